// The Judge actions in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve`:
//   - Settings' "Run this judge now" with the local backend (the demo model generating
//     through ONNX Runtime): the progress bar appears, Cancel after the first sample stops
//     the run, the toast says it was cancelled, and what was judged before keeps its labels;
//   - the Sessions page's "Run heuristic judge" then labels the rest, leaves the manual label
//     alone, and says so.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoModelWithPositions } from '../judge/helpers.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('judge.test.ts');

interface SampleView {
  responseTurn: number;
  label: { reward: number | null; hint: string | null; source: string | null } | null;
}

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let toasts: ToastRecord;

async function allSamples(): Promise<SampleView[]> {
  const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
  const details = await Promise.all(sessions.map((s) => serve.api<{ samples: SampleView[] }>('getSession', { id: s.id })));
  return details.flatMap((d) => d.samples);
}

describe.skipIf(!haveChromium)('the judge actions, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-judge-'));
    const reactions = ['No, I said a cat, not a dog.', 'Perfect, thanks!', 'Great, thank you!', 'That is wrong, use a bird instead.', 'Thanks, that is exactly right.'];
    const lines = reactions.map((reaction, i) =>
      JSON.stringify({ messages: [{ role: 'user', content: `Tell me story number ${i}.` }, { role: 'assistant', content: `Once upon a time there was a cat number ${i}.` }, { role: 'user', content: reaction }] }),
    );
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.join('\n') + '\n');
    serve = await startServe(path.join(dir, 'judge.db'));
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1360, height: 860 } }));
    await page.setInputFiles('[data-testid=import-file]', path.join(dir, 'stories.jsonl'));
    await page.locator('.session-row').nth(4).waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('runs the local-model judge from Settings with progress, and cancels it', async () => {
    await page.locator('[data-nav=settings]').click();
    await page.locator('input[name=backend][value=local]').check();
    // The demo model's own 512 positions cannot hold the judge's instructions (every sample would
    // be skipped as too long, test/judge/judge-context.test.ts): a copy that reads 2,048.
    await page.locator('[data-testid=judge-local-model-pick]').selectOption('__other__');
    await page.locator('[data-testid=judge-local-model]').fill(demoModelWithPositions(2048));
    await page.fill('label:has-text("Votes") input', '1');
    await page.locator('[data-action=save-settings]').click();
    await toasts.next('Settings saved');
    await page.locator('[data-action=run-judge]').click();
    await page.locator('[data-action=run-judge]', { hasText: 'Judging…' }).waitFor();
    // The progress bar shows while the run goes (the demo model loads first: no fixed limit).
    const progress = page.locator('[data-testid=judge-progress]');
    await progress.waitFor();
    expect(await progress.textContent()).toMatch(/\d+ \/ 5 samples/);
    // Cancel once the first sample is judged, from inside the page (no driver round trip).
    await page.waitForFunction(
      () => {
        const done = Number(/(\d+) \/ 5/.exec(document.querySelector('[data-testid=judge-progress]')?.textContent ?? '')?.[1] ?? 0);
        if (done < 1) return false;
        const cancel = document.querySelector<HTMLButtonElement>('[data-action=cancel-judge]');
        if (!cancel) throw new Error(`${done} of 5 judged was first seen with the run over: too late to cancel`);
        cancel.click();
        return true;
      },
      undefined,
      { polling: 100 },
    );
    const cancelled = await toasts.next('Judge cancelled');
    await page.locator('[data-action=run-judge]', { hasText: 'Run this judge now' }).waitFor();
    const judgedBeforeCancel = Number(/after (\d+) sample/.exec(cancelled)?.[1] ?? 0);
    process.stderr.write(`[e2e] local judge cancelled from the UI: "${cancelled}"\n`);
    expect(judgedBeforeCancel).toBeGreaterThanOrEqual(1);
    expect(judgedBeforeCancel).toBeLessThan(5);
    const labelled = (await allSamples()).filter((s) => s.label?.source === 'judge:stories260K');
    expect(labelled).toHaveLength(judgedBeforeCancel);
  });

  it('runs the heuristic judge from Sessions; a manual label and the local judge’s labels stay', async () => {
    // One manual label first, through the API as a script would.
    const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', { search: 'story number 1' });
    await serve.api('setLabel', { sessionId: sessions[0]!.id, responseTurn: 1, patch: { reward: -1 } });
    const before = await allSamples();
    const llmLabelled = before.filter((s) => s.label?.source?.startsWith('judge:')).length;

    await page.locator('[data-nav=sessions]').click();
    await page.locator('[data-action=judge-heuristic]').click();
    const text = await toasts.next('Heuristic judge: Judged');
    expect(text).toContain('1 manual label kept');
    expect(text).toContain(`Judged ${5 - 1 - llmLabelled} sample`);
    const after = await allSamples();
    expect(after.filter((s) => s.label?.source === 'manual').map((s) => s.label?.reward)).toEqual([-1]);
    expect(after.filter((s) => s.label?.source === 'heuristic')).toHaveLength(5 - 1 - llmLabelled);
  });

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
