// The Evaluate page in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` with the demo model: labelled sessions, half of them held out through the
// API (setHeldOut), a short training run started through the API (trainStart), then the page
// evaluates the base and that adapter and shows the before/after table with n and an interval
// in each measured cell; with 2 held-out samples it says "too few held-out samples to tell"
// instead (issue 34). Screenshots: evaluate.png, evaluate-too-few.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('evaluate.test.ts');

const MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');
const NAMES = ['Tom', 'Lily', 'Max', 'Sue', 'Ben', 'Mia', 'Sam', 'Zoe'];
const catReply = (k: number) => `${NAMES[k % NAMES.length]} had a little cat. The cat played with a red ball and was happy.`;
const gibberish = (k: number) => `qxzv kwjb fpqx ${'zvkw'.slice(k % 4)} jbfp qxzv.`;

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let adapterDir: string;
let goodIds: string[] = [];
let badIds: string[] = [];

describe.skipIf(!haveChromium)('the Evaluate page, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-eval-'));
    // 30 good and 30 bad sessions: 20 + 20 held out, so each labelled side has the minimum.
    const lines = Array.from({ length: 30 }, (_, k) => k).flatMap((k) => [
      { messages: [{ role: 'user', content: `Tell me a story, number ${k}.` }, { role: 'assistant', content: catReply(k) }, { role: 'user', content: 'Lovely, thank you!' }] },
      { messages: [{ role: 'user', content: `Tell me a tale, number ${k}.` }, { role: 'assistant', content: gibberish(k) }, { role: 'user', content: 'That makes no sense.' }] },
    ]);
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    serve = await startServe(path.join(dir, 'eval.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'stories.jsonl')] });
    const { sessions } = await serve.api<{ sessions: { id: string; title: string }[] }>('listSessions', {});
    expect(sessions).toHaveLength(60);
    const good = new Map<string, boolean>();
    for (const s of sessions) {
      const { turns } = await serve.api<{ turns: { role: string; text: string }[] }>('getSession', { id: s.id });
      good.set(s.id, turns.some((t) => t.role === 'user' && t.text.startsWith('Lovely')));
      await serve.api('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: good.get(s.id) ? 1 : -1 } });
    }
    // Held out: 20 good and 20 bad sessions; the other 20 are trained on.
    const ids = sessions.map((s) => s.id);
    ({ good: goodIds, bad: badIds } = { good: ids.filter((id) => good.get(id)), bad: ids.filter((id) => !good.get(id)) });
    const heldOut = [...goodIds.slice(0, 20), ...badIds.slice(0, 20)];
    await serve.api('setHeldOut', { sessionIds: heldOut, heldOut: true });
    await serve.api('setHeldOut', { sessionIds: ids.filter((id) => !heldOut.includes(id)), heldOut: false });
    adapterDir = path.join(dir, 'run');
    await serve.api('trainStart', {
      modelDir: MODEL, outDir: adapterDir, method: 'rl', steps: 2, batchSize: 4, lr: 5e-3, optimizer: 'adamw',
      loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cpu', seed: 1, checkpointEvery: 0,
    });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('evaluates the base and the adapter on the held-out split and shows n and an interval', async () => {
    // The run started through the API: the Training page shows it finishing.
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-testid=train-status]', { hasText: /^(finished|failed)$/ }).waitFor();
    expect(await page.locator('[data-testid=train-status]').textContent()).toBe('finished');

    await page.locator('[data-nav=evaluate]').click();
    await page.locator(`input[type=checkbox][value="${adapterDir}"]`).waitFor();
    expect(await page.locator(`input[type=checkbox][value="${adapterDir}"]`).isChecked()).toBe(true);
    expect(await page.locator('[data-testid=eval-model]').inputValue()).not.toBe('');
    // Named by its run (the folder's name), the path in the title; replay is not ticked without an LLM judge.
    expect((await page.locator('[data-testid=eval-adapter]').first().textContent())!.trim()).toBe('run');
    expect(await page.locator('[data-testid=eval-adapter]').first().getAttribute('title')).toBe(adapterDir);
    expect(await page.locator('input[data-metric=replay]').isChecked()).toBe(false);
    expect(await page.locator('[data-testid=eval-replay-note]').textContent()).toContain('needs an LLM judge');
    await page.locator('[data-testid=eval-run]').click();
    await page.locator('[data-testid=eval-table]').waitFor();

    const split = await page.locator('[data-testid=eval-split]').textContent();
    expect(split).toMatch(/Held-out split: 40 sessions, 40 samples/);
    expect(await page.locator('[data-testid=eval-too-few]').count()).toBe(0);
    // Each column says what it measures and which way is better.
    const help = await page.locator('[data-testid=eval-columns-help]').textContent();
    expect(help).toMatch(/Margin ↑.*Higher is better/s);
    expect(help).toMatch(/Hint gap ↓.*Lower is better/s);
    const rows = page.locator('[data-testid=eval-table] tbody tr');
    expect(await rows.count()).toBe(2);
    for (let i = 0; i < 2; i++) {
      const cells = await rows.nth(i).locator('td').allTextContents();
      // +1 replies, −1 replies, margin: a mean, a 95 % interval and n.
      expect(cells[1]).toMatch(/^-?\d+\.\d{3} \[-?\d+\.\d\d, -?\d+\.\d\d\] n=20$/);
      expect(cells[2]).toMatch(/^-?\d+\.\d{3} \[-?\d+\.\d\d, -?\d+\.\d\d\] n=20$/);
      expect(cells[3]).toMatch(/\[-?\d+\.\d\d, -?\d+\.\d\d\] n=\d+$/);
    }
    // The adapter by its run's name, in the table and the sentences alike.
    expect(await rows.nth(1).locator('td').first().textContent()).toBe('run');
    expect(await page.locator('[data-testid=eval-sentences]').textContent()).toMatch(/^run prefers|^run cannot|^run .* base/);
    expect(await page.locator('[data-testid=eval-sentences]').textContent()).not.toContain(dir);
    const status = await serve.api<{ state: string; report: { models: { name: string }[] } }>('evalStatus');
    expect(status.state).toBe('done');
    await shot(page, 'evaluate');
  }, TEST_TIMEOUT_MS);

  it('says "too few held-out samples to tell" below the minimum instead of an interval', async () => {
    // Only 1 good and 1 bad session held out: 2 samples.
    await serve.api('setHeldOut', { sessionIds: [...goodIds.slice(1, 20), ...badIds.slice(1, 20)], heldOut: false });
    await page.reload();
    await page.locator('[data-testid=eval-adapter]').first().waitFor();
    const before = await page.locator('[data-testid=eval-split]').count();
    expect(before).toBe(1); // the last report is still shown until the next one
    await page.locator('[data-testid=eval-run]').click();
    await page.locator('[data-testid=eval-split]', { hasText: 'Held-out split: 2 sessions, 2 samples' }).waitFor();
    expect(await page.locator('[data-testid=eval-too-few]').textContent()).toContain('Too few held-out samples to tell (n = 2)');
    const cells = await page.locator('[data-testid=eval-table] tbody tr').first().locator('td').allTextContents();
    expect(cells[1]).toBe('too few to tell (n = 1)');
    expect(cells[2]).toBe('too few to tell (n = 1)');
    expect(cells.join(' ')).not.toMatch(/\[-?\d/);
    const sentences = await page.locator('[data-testid=eval-sentences]').textContent();
    expect(sentences).toContain('too few held-out samples to tell (n = ');
    expect(sentences).not.toMatch(/prefers|CI/);
    await shot(page, 'evaluate-too-few');
  }, TEST_TIMEOUT_MS);

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
