// The Training page's status against a run that ends while the page reads it (Debian's
// Chromium, playwright-core, a real `hindsight serve` and trainer on the demo model). The
// page reads trainStatus and follows train.status events; the answer and the event come over
// different connections, so under load the event can land first and the older answer after
// it. The page showed such a run as "running" for good (CI: a 2-step run started just before
// the page opened, the Evaluate suite). Here that order is made on purpose: the page's first
// trainStatus is answered by the server while the run is running and held back until the
// run has been cancelled and the page has received that event.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('training-status-race.test.ts');

const MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];

describe.skipIf(!haveChromium)('the Training page and a run that ends during its read', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-race-'));
    const lines = Array.from({ length: 4 }, (_, k) => ({
      messages: [{ role: 'user', content: `Tell me a story, number ${k}.` }, { role: 'assistant', content: 'Tom had a little cat.' }, { role: 'user', content: 'Lovely!' }],
    }));
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    serve = await startServe(path.join(dir, 'race.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'stories.jsonl')] });
    const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
    for (const [k, s] of sessions.entries()) await serve.api('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: k % 2 ? 1 : -1 } });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
    // Every event the page's stream delivers, recorded before the app's own handler runs.
    await page.addInitScript(() => {
      const seen: string[] = [];
      (window as unknown as { __events: string[] }).__events = seen;
      const Original = window.EventSource;
      window.EventSource = class extends Original {
        constructor(url: string | URL, init?: EventSourceInit) {
          super(url, init);
          this.addEventListener('message', (m) => seen.push(String(m.data)));
        }
      };
    });
    await page.reload();
    await page.locator('[data-nav=training]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('shows the run cancelled, though the answer that said "running" arrived after the event', async () => {
    // Many steps: the run is still going when the server answers the page's read.
    const { runId } = await serve.api<{ runId: string }>('trainStart', {
      modelDir: MODEL, outDir: path.join(dir, 'run'), method: 'rl', steps: 100_000, batchSize: 2, lr: 1e-3, optimizer: 'adamw',
      loraR: 2, loraAlpha: 4, targets: ['q'], device: 'cpu', seed: 1, checkpointEvery: 0,
    });
    let deliver!: () => Promise<void>;
    let answered!: (body: string) => void;
    const staleAnswer = new Promise<string>((resolve) => (answered = resolve));
    await page.route('**/api/trainStatus', async (route) => {
      const response = await route.fetch();
      deliver = () => route.fulfill({ response });
      answered(await response.text());
    }, { times: 1 });
    await page.locator('[data-nav=training]').click();
    expect(JSON.parse(await staleAnswer).value.runs[0].status).toBe('running');

    await serve.api('cancel', { job: 'train', runId });
    await expect.poll(async () => (await serve.api<{ runs: { status: string }[] }>('trainStatus')).runs[0]!.status, { timeout: TEST_TIMEOUT_MS, interval: 100 }).toBe('cancelled');
    await page.waitForFunction(() => (window as unknown as { __events: string[] }).__events.some((e) => e.includes('"train.status"') && e.includes('"cancelled"')));
    await deliver();

    await page.locator('[data-testid=train-status]', { hasText: /^cancelled$/ }).waitFor();
  }, TEST_TIMEOUT_MS);

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
