// The token view in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` with the demo model: a hinted reply in the annotator, Show tokens, Cancel
// while the model loads, then the coloured tokens with the same values the API gives, the
// legend, and the adapter mode asking for an adapter. Screenshot: token-view.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('token-view.test.ts');

const HINT = 'Write about a cat named Tom who plays in the garden with a red ball.';
const REPLY = 'Once upon a time, there was a little girl named Lily. She liked to play with her dog in the park. One day, the dog found a big ball and they played all day.';

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let sessionId: string;

describe.skipIf(!haveChromium)('the token view, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-tokens-'));
    const line = { messages: [{ role: 'user', content: 'Tell me a story about a cat.' }, { role: 'assistant', content: REPLY }, { role: 'user', content: 'No, I asked for a cat, not a dog.' }] };
    fs.writeFileSync(path.join(dir, 'story.jsonl'), JSON.stringify(line) + '\n');
    serve = await startServe(path.join(dir, 'tokens.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'story.jsonl')] });
    sessionId = (await serve.api<{ sessions: { id: string }[] }>('listSessions', {})).sessions[0]!.id;
    await serve.api('setLabel', { sessionId, responseTurn: 1, patch: { reward: -1, hint: HINT } });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('cancels while the model loads, then shows the hinted reply coloured by the OPD advantage', async () => {
    await page.goto(`${serve.url}#/session/${encodeURIComponent(sessionId)}`);
    const panel = page.locator('[data-testid=token-view-panel]');
    await panel.waitFor();
    await panel.scrollIntoViewIfNeeded();

    // Cancel as soon as the button appears, from inside the page (a DOM observer, no driver
    // round trip): the first request waits on loading the model into its worker, so it is
    // still running then.
    await page.evaluate(() => {
      (window as unknown as { cancelClicked: Promise<void> }).cancelClicked = new Promise<void>((resolve) => {
        const observer = new MutationObserver(() => {
          const button = document.querySelector<HTMLButtonElement>('[data-action=cancel-token-view]');
          if (!button) return;
          observer.disconnect();
          button.click();
          resolve();
        });
        observer.observe(document.body, { childList: true, subtree: true });
      });
    });
    await page.locator('[data-action=show-token-view]').click();
    await page.evaluate(() => (window as unknown as { cancelClicked: Promise<void> }).cancelClicked);
    await page.locator('[data-testid=token-view-note]', { hasText: 'Cancelled.' }).waitFor();
    expect(await page.locator('[data-testid=token-view] .tok').count()).toBe(0);

    await page.locator('[data-action=show-token-view]', { hasText: 'Recompute' }).click();
    await page.locator('[data-testid=token-view] .tok').first().waitFor();
    await page.locator('[data-testid=token-view-legend]').waitFor();
    const shown = await page.locator('[data-testid=token-view] .tok').evaluateAll((spans) => spans.map((s) => Number((s as HTMLElement).dataset.value)));
    const text = await page.locator('[data-testid=token-view]').textContent();
    expect(text).toContain('little girl named Lily');

    // The page shows what the API computes (from the back end's cache now).
    const result = await serve.api<{ cancelled: boolean; view: { cached: boolean; hint: string; tokens: { value: number }[] } }>('tokenView', { sessionId, responseTurn: 1, mode: 'hint' });
    expect(result.cancelled).toBe(false);
    expect(result.view.cached).toBe(true);
    expect(result.view.hint).toBe(HINT);
    expect(shown).toEqual(result.view.tokens.map((t) => t.value));
    expect(shown.some((v) => v > 0) && shown.some((v) => v < 0)).toBe(true);
    const summary = await page.locator('[data-testid=token-view-summary]').textContent();
    expect(summary).toMatch(new RegExp(`${shown.length} tokens · mean [+−]\\d\\.\\d{4} · stories260K`));
    await panel.scrollIntoViewIfNeeded();
    await page.locator('[data-testid=token-view] .tok').nth(12).hover();
    const readout = await page.locator('[data-testid=token-view-readout]').textContent();
    expect(readout).toMatch(/^".*" {2}[+−]\d\.\d{4} · log p student -?\d\.\d{4} → teacher -?\d\.\d{4}$/);
    await shot(page, 'token-view');
  }, TEST_TIMEOUT_MS);

  it('asks for an adapter in adapter mode when no run has made one', async () => {
    await page.locator('[data-mode=adapter]').click();
    await page.locator('[data-testid=token-view-note]', { hasText: 'Choose a trained adapter' }).waitFor();
    await page.locator('[data-mode=hint]').click();
    await page.locator('[data-testid=token-view] .tok').first().waitFor();
  });

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
