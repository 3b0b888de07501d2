// The Training page's memory estimate, Quantize control and past runs, in a browser against a
// real `hindsight serve` on the demo model (issue 31 item 2, issue 34):
//   - the estimate is shown beside the machine's memory and changes as the form does (batch
//     size, Quantize); Fine-tune stays on screen at 1400 × 900;
//   - a batch larger than fits at once runs as micro-batches, which the estimate names, and
//     Fine-tune stays on; a Micro-batch asked for that cannot fit: the refusal line names the one
//     that would, Fine-tune is disabled, and trainStart refuses it with the same line. The machine
//     is made small through HINDSIGHT_MEMORY_BUDGET (a real setting: the memory a run may plan
//     on), not a mock;
//   - with Device CUDA the estimate also shows the GPU that nvidia-smi reports (an executable
//     `nvidia-smi` script on the server's PATH stands in for a card, which this machine lacks), and
//     not for the CPU;
//   - two finished runs listed in Past runs, ticked, overlay their loss curves.
// Screenshots: training-memory.png, training-memory-refused.png, training-memory-gpu.png, training-history.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('training-memory.test.ts');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];

const BUDGET = '700M';
const need = () => page.locator('[data-testid=train-memory-need]').textContent();
/** The estimate in bytes: the text is rounded to the MB, and the demo model's whole weights are about 1 MB. */
const needBytes = async () => Number(await page.locator('[data-testid=train-memory-need]').getAttribute('data-bytes'));

describe.skipIf(!haveChromium)('the memory estimate and past runs on the Training page', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-train-memory-'));
    const smi = path.join(dir, 'bin');
    fs.mkdirSync(smi);
    fs.writeFileSync(path.join(smi, 'nvidia-smi'), "#!/bin/sh\necho 'NVIDIA Test Card, 16384, 16000'\n", { mode: 0o755 });
    const env: NodeJS.ProcessEnv = { ...process.env, HINDSIGHT_MEMORY_BUDGET: BUDGET, PATH: `${smi}${path.delimiter}${process.env.PATH}` };
    delete env.CUDA_VISIBLE_DEVICES;
    serve = await startServe(path.join(dir, 'm.db'), { env });
    await serve.api('loadSampleData');
    await serve.api('judgeRun', { backend: 'heuristic', hints: true });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(() => closeApp(browser, serve, dir), TEST_TIMEOUT_MS);

  it('shows the estimate beside the memory the machine allows, changing with the batch size and Quantize', async () => {
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-testid=train-memory-need]').waitFor();
    await page.fill('[data-testid=train-batch]', '2');
    expect(await page.locator('[data-testid=train-memory-host]').textContent()).toMatch(/of 700 MB allowed \([\d.]+ GB in this machine\)/);
    const atTwo = await need();
    const atTwoBytes = await needBytes();
    await page.fill('[data-testid=train-batch]', '4');
    await page.waitForFunction((before) => document.querySelector('[data-testid=train-memory-need]')?.textContent !== before, atTwo);
    await page.fill('[data-testid=train-batch]', '2');
    await page.waitForFunction((before) => document.querySelector('[data-testid=train-memory-need]')?.textContent === before, atTwo);
    expect(await page.locator('[data-testid=train-memory-parts]').textContent()).toMatch(/^fp32 weights \d+ MB, LoRA and AdamW \d+ MB, activations \d+ MB at 2 × 512 tokens and a teacher pass, runtime \d+ MB$/);
    // An empty Max length is the model's 512 positions here (2,048 for a model that reads more), and the field says so.
    expect(await page.locator('[data-testid=train-max-length]').getAttribute('placeholder')).toBe('auto: 512');

    // Quantize: int4 stores the base in 4-bit blocks; the estimate says so and shrinks.
    await page.selectOption('[data-testid=train-quantize]', 'int4');
    await page.locator('[data-testid=train-memory-parts]', { hasText: /^int4 weights/ }).waitFor();
    expect(await page.locator('[data-testid=train-quantize-help]').textContent()).toContain('4-bit blocks');
    expect(await needBytes()).toBeLessThan(atTwoBytes);
    await page.selectOption('[data-testid=train-quantize]', 'none');
    await page.locator('[data-testid=train-memory-parts]', { hasText: /^fp32 weights/ }).waitFor();

    // Fine-tune and the estimate in a few words beside it are on screen at 900 px, however long the form.
    for (const what of ['[data-action=fine-tune]', '[data-testid=train-memory-short]']) {
      const box = (await page.locator(what).boundingBox())!;
      expect(box.y + box.height, what).toBeLessThanOrEqual(900);
    }
    expect(await page.locator('[data-testid=train-memory-short]').textContent()).toMatch(/^Memory: about \d+ MB of 700 MB allowed$/);
    expect(await page.locator('[data-action=fine-tune]').isEnabled()).toBe(true);
    await shot(page, 'training-memory');
  });

  it('runs a large batch as micro-batches; refuses a micro-batch that cannot fit, naming the one that would, on the page and in the API', async () => {
    // The batch is a learning setting: 64 rows do not fit at once in 700 MB, so they go through the step a few at a time.
    await page.fill('[data-testid=train-batch]', '64');
    const parts = page.locator('[data-testid=train-memory-parts]');
    await parts.filter({ hasText: /batch 64 as/ }).waitFor();
    const [, rows, passes] = /at (\d+) × 512 tokens a pass \(batch 64 as (\d+) micro-batches of \d+/.exec((await parts.textContent())!)!;
    expect(Number(rows)).toBeGreaterThan(1);
    expect(Number(rows) * Number(passes)).toBeGreaterThanOrEqual(64);
    expect(await page.locator('[data-testid=train-memory-refusal]').count()).toBe(0);
    expect(await page.locator('[data-action=fine-tune]').isEnabled()).toBe(true);
    expect(await page.locator('[data-testid=train-memory-short]').textContent()).toMatch(/^Memory: about \d+ MB of 700 MB allowed$/);

    // Asking for all 64 rows in one pass (the advanced Micro-batch) does not fit.
    await page.locator('details.advanced summary', { hasText: 'Optimizer and LoRA' }).click();
    await page.fill('[data-testid=train-micro-batch]', '64');
    const refusal = page.locator('[data-testid=train-memory-refusal]');
    await refusal.waitFor();
    const line = (await refusal.textContent())!;
    expect(line).toMatch(new RegExp(`^This run needs about [\\d.]+ GB even with 64 rows of 512 tokens a pass \\(Micro-batch 64\\), but this machine has 700 MB allowed \\(HINDSIGHT_MEMORY_BUDGET\\) of [\\d.]+ GB: try Micro-batch ${rows} \\(about \\d+ MB\\), or tick Start anyway\\.$`));
    expect(await page.locator('[data-action=fine-tune]').isDisabled()).toBe(true);
    expect(await page.locator('[data-testid=train-memory-short]').textContent()).toMatch(/of 700 MB allowed: does not fit$/);
    await page.locator('[data-testid=train-memory-refusal]').scrollIntoViewIfNeeded();
    await shot(page, 'training-memory-refused');

    // The API refuses the same run with the same line (the page computed it with the same estimate).
    const d = TRAIN_DEFAULTS;
    const config: TrainConfig = {
      modelDir: await page.locator('[data-testid=train-model]').inputValue(), outDir: path.join(dir, 'refused'), method: 'combine', steps: 2, batchSize: 64, microBatch: 64,
      lr: d.lr, optimizer: d.optimizer, loraR: d.loraR, loraAlpha: d.loraAlpha, targets: [...d.targets], device: 'cpu', seed: 0, checkpointEvery: 0, quantize: 'none',
    };
    await expect(serve.api('trainStart', config)).rejects.toThrow(line.replace(/tick Start anyway\.$/, ''));
    expect(fs.existsSync(path.join(dir, 'refused'))).toBe(false);

    // Start anyway lets it through; the suggested micro-batch fits, and so does leaving it to the estimate.
    await page.locator('[data-testid=train-memory-ignore]').check();
    expect(await page.locator('[data-action=fine-tune]').isEnabled()).toBe(true);
    await page.locator('[data-testid=train-memory-ignore]').uncheck();
    await page.fill('[data-testid=train-micro-batch]', rows!);
    await refusal.waitFor({ state: 'detached' });
    expect(await page.locator('[data-action=fine-tune]').isEnabled()).toBe(true);
    await page.fill('[data-testid=train-micro-batch]', '');
    await parts.filter({ hasText: `batch 64 as ${passes} micro-batches` }).waitFor();
  });

  it.skipIf(process.platform === 'win32')('with Device CUDA, checks the GPU nvidia-smi reports as well; not with the CPU', async () => {
    await page.locator('[data-nav=training]').click();
    await page.fill('[data-testid=train-batch]', '2');
    await page.locator('[data-testid=train-memory-need]').waitFor();
    const gpu = page.locator('[data-testid=train-memory-gpu]');
    expect(await gpu.count()).toBe(0);
    await page.selectOption('[data-testid=train-device-select]', 'cuda');
    await gpu.waitFor();
    expect(await gpu.textContent()).toMatch(/^GPU: about \d+ MB\s*of 15\.6 GB free \(NVIDIA Test Card, 16\.0 GB\)$/);
    expect(await page.locator('[data-testid=train-memory-short]').textContent()).toMatch(/^Memory: about \d+ MB of 700 MB allowed, GPU about \d+ MB of 15\.6 GB free$/);
    await gpu.scrollIntoViewIfNeeded();
    await shot(page, 'training-memory-gpu');
    await page.selectOption('[data-testid=train-device-select]', 'cpu');
    await gpu.waitFor({ state: 'detached' });
  });

  it('lists past runs and overlays the loss curves of the runs ticked', async () => {
    await page.fill('[data-testid=train-batch]', '2');
    await page.fill('[data-testid=train-steps]', '3');
    for (const method of ['combine', 'rl']) {
      await page.locator(`input[name=method][value=${method}]`).check();
      // Read at once: a locator's getAttribute would wait out the whole state timeout (5 minutes)
      // for a run line that is not there before the first run.
      const before = await page.evaluate(() => document.querySelector('.run-line')?.getAttribute('data-run-id') ?? null);
      await page.locator('[data-action=fine-tune]').click();
      await page.waitForFunction((id) => { const el = document.querySelector('.run-line'); return !!el && el.getAttribute('data-run-id') !== id; }, before);
      await page.locator('[data-testid=train-status]', { hasText: /^(finished|failed)$/ }).waitFor();
      expect(await page.locator('[data-testid=train-status]').textContent()).toBe('finished');
    }
    const runs = (await serve.api<{ runs: TrainRunInfo[] }>('trainStatus')).runs;
    expect(runs).toHaveLength(2);
    const rows = page.locator('[data-history-run]');
    expect(await rows.count()).toBe(2);
    // Newest first.
    expect(await rows.first().getAttribute('data-history-run')).toBe(runs[1]!.runId);
    for (const r of runs) await page.locator(`[data-history-run="${r.runId}"] [data-action=compare-run]`).check();
    const loss = page.locator('[data-compare=loss]');
    await page.waitForFunction(() => document.querySelector('[data-compare=loss]')?.getAttribute('data-points') === '6');
    expect(await loss.getAttribute('data-series')).toBe('2');
    expect(await page.locator('[data-compare=heldout]').getAttribute('data-series')).toBe('2');
    // Show puts the older run in Progress.
    await page.locator(`[data-history-run="${runs[0]!.runId}"] [data-action=show-run]`).click();
    await page.waitForFunction((id) => document.querySelector('.run-line')?.getAttribute('data-run-id') === id, runs[0]!.runId);
    await page.locator('[data-testid=run-history]').scrollIntoViewIfNeeded();
    await shot(page, 'training-history');
  });

  it('logged no errors in the page', () => {
    // The refused trainStart above was the test's own call, not the page's.
    expect(pageErrors).toEqual([]);
  });
});
