// Settings → Converted models in a browser against a real `hindsight serve` whose graph cache
// (HINDSIGHT_GRAPH_CACHE) holds a tiny model in fp32 and int4: the panel lists both with their
// size and last use, and Remove all (confirmed) empties it, saying what it freed.
// Screenshot: settings-cache.png (1400×900).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GraphCacheView } from '../../src-shared/models-api.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('settings-cache.test.ts');

let dir: string;
let cache: string;
let model: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let toasts: ToastRecord;

describe.skipIf(!haveChromium)('the graph cache on the Settings page', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-cache-'));
    cache = path.join(dir, 'graphs');
    model = writeTinyModel(path.join(dir, 'tiny-llama'), { family: 'llama', seed: 3 }).dir;
    for (const quantize of ['none', 'int4'] as const) {
      const engine = ModelEngine.open(model, { threads: 1, graphCache: cache, quantize });
      await engine.generate([1, 5, 9], { maxNewTokens: 2, stopTokenIds: [] });
      await engine.close();
    }
    serve = await startServe(path.join(dir, 'cache.db'), { env: { ...process.env, HINDSIGHT_GRAPH_CACHE: cache } });
    ({ browser, page, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.locator('[data-nav=settings]').click();
    await page.locator('[data-testid=graph-cache-folders]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('lists each converted model with its form, size and last use (screenshot)', async () => {
    const view = await serve.api<GraphCacheView>('graphCache');
    expect(view.folders.map((f) => [f.model, f.form])).toEqual([[model, 'int4'], [model, 'fp32']]);
    const rows = await page.locator('[data-testid=graph-cache-folders] tbody tr').evaluateAll((trs) => trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td) => td.textContent!.trim())));
    expect(rows.map((r) => [r[0], r[1], r[3]])).toEqual([[model, 'int4', 'today'], [model, 'fp32', 'today']]);
    expect(await page.locator('[data-testid=graph-cache-summary]').textContent()).toMatch(/^[\d.]+ [kM]B in 2 folders$/);
    await page.locator('[data-testid=graph-cache]').scrollIntoViewIfNeeded();
    await shot(page, 'settings-cache');
  });

  it('Remove all, confirmed, empties it and says what it freed', async () => {
    page.once('dialog', (d) => void d.accept());
    await page.locator('[data-action=clear-graph-cache]').click();
    expect(await toasts.next('Removed')).toMatch(/^Removed 2 folders, [\d.]+ [kM]B\.$/);
    await page.locator('[data-testid=graph-cache-summary]', { hasText: 'Empty' }).waitFor();
    expect(fs.readdirSync(cache)).toEqual([]);
    expect(await page.locator('[data-action=clear-graph-cache]').isDisabled()).toBe(true);
  });
});
