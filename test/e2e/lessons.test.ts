// The Lessons page in a browser (Debian's Chromium, playwright-core) against a real `hindsight
// serve` with the demo model: labelled sessions with hints, some held out, and a short training
// run started through the API. The page distils the lessons (by rules: the judge of Settings is the
// heuristic), the user edits and saves them, a reload shows them kept; the Evaluate page then
// measures "lessons (system prompt)" beside the base and the adapter; "lessons as SYSTEM" puts them
// in the run's Modelfile; the Export page writes them as a text file. Screenshots (1400×900):
// lessons.png, evaluate-lessons.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LESSONS_HEADER } from '../../src-shared/lessons.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('lessons.test.ts');

const MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');
const EDIT = '- Give every story a happy ending.';

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let toasts: ToastRecord;
let pageErrors: string[] = [];
let adapterDir: string;

describe.skipIf(!haveChromium)('the Lessons page, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-lessons-'));
    // 24 liked stories and 24 "too short" ones with a hint; 20 + 20 held out, so each side has the minimum.
    const lines = Array.from({ length: 24 }, (_, k) => k).flatMap((k) => [
      { messages: [{ role: 'user', content: `Tell me a story, number ${k}.` }, { role: 'assistant', content: 'Tom had a little cat. The cat played with a red ball and was happy.' }, { role: 'user', content: 'Lovely, thank you!' }] },
      { messages: [{ role: 'user', content: `Tell me a tale, number ${k}.` }, { role: 'assistant', content: 'The end.' }, { role: 'user', content: 'Too short, tell me more.' }] },
    ]);
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    serve = await startServe(path.join(dir, 'lessons.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'stories.jsonl')] });
    const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
    const good: string[] = [];
    const bad: string[] = [];
    for (const s of sessions) {
      const { turns } = await serve.api<{ turns: { role: string; text: string }[] }>('getSession', { id: s.id });
      const liked = turns.some((t) => t.text.startsWith('Lovely'));
      (liked ? good : bad).push(s.id);
      const hint = liked ? null : bad.length % 3 ? 'Tell a longer story, with a beginning, a middle and an end.' : 'Too short: the previous reply was too brief. Write at least five sentences.';
      await serve.api('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: liked ? 1 : -1, ...(hint ? { hint } : {}) } });
    }
    const heldOut = [...good.slice(0, 20), ...bad.slice(0, 20)];
    await serve.api('setHeldOut', { sessionIds: heldOut, heldOut: true });
    await serve.api('setHeldOut', { sessionIds: [...good.slice(20), ...bad.slice(20)], heldOut: false });
    adapterDir = path.join(dir, 'run');
    await serve.api('trainStart', {
      modelDir: MODEL, outDir: adapterDir, method: 'combine', steps: 2, batchSize: 4, lr: 5e-3, optimizer: 'adamw',
      loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cpu', seed: 1, checkpointEvery: 0,
    });
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('distils the hints of the sessions trained on, and keeps an edit across a reload', async () => {
    await page.locator('[data-nav=lessons]').click();
    await page.locator('[data-testid=lessons-origin]', { hasText: 'No lessons yet' }).waitFor();
    expect(await page.locator('[data-testid=lessons-hints]').textContent()).toMatch(/4 hints of the sessions trained on, distilled by rules .*20 of held-out sessions are left out/);
    await page.locator('[data-action=lessons-distil]').click();
    await toasts.next('Distilled');
    const text = await page.locator('[data-testid=lessons-text]').inputValue();
    expect(text.split('\n')[0]).toBe(LESSONS_HEADER);
    expect(text).toContain('- Tell a longer story, with a beginning, a middle and an end.');
    expect(text).toContain('- Write at least five sentences.');
    expect(text).not.toContain('previous reply');
    expect(await page.locator('[data-testid=lessons-origin]').textContent()).toMatch(/^Distilled by rules from 4 hints, /);
    expect(await page.locator('[data-action=lessons-save]').isDisabled()).toBe(true);

    await page.locator('[data-testid=lessons-text]').fill(`${text}\n${EDIT}`);
    expect(await page.locator('[data-testid=lessons-count]').textContent()).toMatch(/^3 lessons · /);
    await page.locator('[data-action=lessons-save]').click();
    await toasts.next('Lessons saved');
    await page.reload();
    toasts.reset();
    await page.locator('[data-testid=lessons-origin]', { hasText: 'Written by you' }).waitFor();
    expect(await page.locator('[data-testid=lessons-text]').inputValue()).toBe(`${text}\n${EDIT}`);
    const stored = await serve.api<{ lessons: { text: string; source: string } }>('lessonsGet');
    expect(stored.lessons).toMatchObject({ text: `${text}\n${EDIT}`, source: 'edited' });
    await shot(page, 'lessons');
  }, TEST_TIMEOUT_MS);

  it('shows the lessons beside the base and the adapter on the Evaluate page', async () => {
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-testid=train-status]', { hasText: /^(finished|failed)$/ }).waitFor();
    expect(await page.locator('[data-testid=train-status]').textContent()).toBe('finished');
    // "lessons as SYSTEM" beside Use in Ollama: the Modelfile gives them to Ollama.
    await page.locator('[data-testid=export-lessons]').check();
    await page.locator('[data-action=export-model]').click();
    await page.locator('[data-testid=export-model-result]').waitFor();
    expect(fs.readFileSync(path.join(adapterDir, 'gguf', 'Modelfile'), 'utf8')).toContain(`${EDIT}"""\n`);
    await page.locator('[data-nav=evaluate]').click();
    await page.locator('[data-testid=eval-lessons]').waitFor();
    expect(await page.locator('[data-testid=eval-lessons] input').isChecked()).toBe(true);
    expect(await page.locator('[data-testid=eval-lessons]').getAttribute('title')).toContain(EDIT);
    await page.locator(`input[type=checkbox][value="${adapterDir}"]`).waitFor();
    await page.locator('[data-testid=eval-run]').click();
    await page.locator('[data-testid=eval-table]').waitFor();
    const rows = page.locator('[data-testid=eval-table] tbody tr');
    expect(await rows.count()).toBe(3);
    expect(await rows.locator('td:first-child').allTextContents()).toEqual(['base', 'lessons (system prompt)', 'run']);
    const told = page.locator('[data-testid=eval-table] tr[data-model=lessons] td');
    for (const cell of (await told.allTextContents()).slice(1, 4)) expect(cell).toMatch(/^-?\d+\.\d{3} \[-?\d+\.\d\d, -?\d+\.\d\d\] n=\d+$/);
    const sentences = await page.locator('[data-testid=eval-sentences]').textContent();
    expect(sentences).toMatch(/lessons \(system prompt\) (prefers|cannot be told apart from) .*base: margin/);
    expect(sentences).toMatch(/run (prefers|cannot be told apart from) .*lessons \(system prompt\): margin/);
    const status = await serve.api<{ report: { models: { name: string; lessons?: string }[] } }>('evalStatus');
    expect(status.report.models[1]!.lessons).toContain(EDIT);
    await page.locator('[data-testid=eval-split]').evaluate((el) => el.closest('.panel')!.scrollIntoView({ block: 'start' }));
    await shot(page, 'evaluate-lessons');
  }, TEST_TIMEOUT_MS);

  it('writes them as a text file from the Export page', async () => {
    await page.locator('[data-nav=export]').click();
    await page.locator('[data-testid=lessons-export] pre').waitFor();
    const out = path.join(dir, 'out', 'lessons.txt');
    await page.locator('[data-testid=lessons-export-path]').fill(out);
    await page.locator('[data-action=write-lessons]').click();
    await page.locator('[data-testid=lessons-export-result]').waitFor();
    expect(fs.readFileSync(out, 'utf8')).toContain(`${EDIT}\n`);
  }, TEST_TIMEOUT_MS);

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
