// The Export page's counts in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` with the demo data judged (issue 34: "counts per format before writing"):
// each format shows how many lines it would write, the numbers the API and the written file
// agree with; leaving the held-out sessions out changes the counts, the preview and the file.
// Screenshot at 1400×900: export.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExportCounts } from '../../src-shared/export-api.js';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('export-counts.test.ts');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];

/** The counts the page shows, by format, once it shows one for each. */
async function shownCounts(): Promise<Record<string, number>> {
  await page.locator('[data-count]').nth(EXPORT_FORMATS.length - 1).waitFor();
  return page.evaluate(() => Object.fromEntries(Array.from(document.querySelectorAll('[data-count]')).map((e) => [e.getAttribute('data-count'), Number(e.getAttribute('data-lines'))])));
}

describe.skipIf(!haveChromium)('the Export page’s counts, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-export-'));
    serve = await startServe(path.join(dir, 'export.db'));
    await serve.api('loadSampleData');
    await serve.api('judgeRun', { backend: 'heuristic', hints: true });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.locator('[data-nav=export]').click();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('shows each format’s lines before writing: the API’s counts, and the file written has that many', async () => {
    const all = await serve.api<ExportCounts>('exportCounts', {});
    expect(await shownCounts()).toEqual(all.lines);
    expect(all.lines.samples).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=export-sessions]').textContent()).toContain(`${all.sessions} sessions`);
    await page.locator('[data-format=sft]').check();
    await page.locator('[data-testid=export-preview]').first().waitFor();
    const out = path.join(dir, 'sft.jsonl');
    await page.fill('[data-testid=export-path]', out);
    await page.locator('[data-action=write-export]').click();
    await page.locator('[data-testid=export-result]').waitFor();
    expect(fs.readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(all.lines.sft);
    await page.evaluate(() => document.querySelector('.content')!.scrollTo(0, 0));
    await shot(page, 'export');
  });

  it('leaving the held-out sessions out changes the counts and what is written', async () => {
    const without = await serve.api<ExportCounts>('exportCounts', { leaveOutHeldOut: true });
    expect(without.heldOutLeftOut).toBeGreaterThan(0);
    await page.locator('[data-field=export-leave-out-heldout]').check();
    await page.locator('[data-testid=export-sessions]', { hasText: 'held-out session' }).waitFor();
    await page.waitForFunction((n) => document.querySelector('[data-count=samples]')?.getAttribute('data-lines') === String(n), without.lines.samples);
    expect(await shownCounts()).toEqual(without.lines);
    await page.locator('[data-format=samples]').check();
    const out = path.join(dir, 'samples.jsonl');
    await page.fill('[data-testid=export-path]', out);
    await page.locator('[data-action=write-export]').click();
    await page.locator('[data-testid=export-result]').waitFor();
    expect(fs.readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(without.lines.samples);
    const heldOut = (await serve.api<{ listed: { id: string; heldOut: boolean }[] }>('split')).listed.filter((s) => s.heldOut).map((s) => s.id);
    for (const line of fs.readFileSync(out, 'utf8').trim().split('\n')) expect(heldOut).not.toContain(JSON.parse(line).session_id);
  });

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
