// "Use in Ollama / llama.cpp" clicked on the Training page's finished run, in a browser (Debian's
// Chromium, playwright-core) against a real `hindsight serve`: the demo exports loaded and
// labelled by the heuristic judge, a real two-step fine-tune on a GGUF base (a tiny Qwen3 written
// as F32 GGUF by bench/gguf-writer.ts, as a user's own file would be), then the button. What it
// wrote is read back from disk: the GGUF LoRA adapter (llama.cpp's adapter metadata, a lora_a
// and lora_b per adapted projection, the values of the run's adapter), the Ollama Modelfile
// (FROM the base, ADAPTER the file, the chat template and stop tokens) and, with "also a merged
// GGUF" set to F16, the merged file. Screenshot: export-model.png (see helpers.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { readGgufHeader, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { loraAKey, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { waitUntil } from '../helpers/deadlines.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('export-model.test.ts');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let base: string;
let run: string;

beforeAll(async () => {
  if (!haveChromium) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-export-model-'));
  const folder = path.join(dir, 'tiny-qwen3');
  writeTinyModel(folder, { family: 'qwen3', tie: true, seed: 4 });
  base = path.join(dir, 'tiny-qwen3-f32.gguf');
  writeGguf(folder, base, { type: 'f32' });
  serve = await startServe(path.join(dir, 'h.db'));
  await serve.api('loadSampleData');
  await serve.api('judgeRun', { backend: 'heuristic', hints: true });
  run = path.join(dir, 'run-gguf');
  const d = TRAIN_DEFAULTS;
  const config: TrainConfig = {
    modelDir: base, outDir: run, method: 'combine', steps: 2, batchSize: 2, lr: 1e-3, optimizer: d.optimizer, loraR: 4, loraAlpha: 8,
    targets: ['q', 'k', 'v', 'o'], device: 'cpu', seed: 0, checkpointEvery: d.saveEvery, maxLength: 256,
  };
  const { runId } = await serve.api<{ runId: string }>('trainStart', config);
  await waitUntil('the fine-tune to finish', async () => {
    const r = (await serve.api<{ runs: TrainRunInfo[] }>('trainStatus')).runs.find((x) => x.runId === runId);
    if (r?.status === 'failed') throw new Error(`the run failed: ${r.error}`);
    return r?.status === 'finished' ? r : null;
  });
  ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1280, height: 900 } }));
}, TEST_TIMEOUT_MS);

afterAll(() => closeApp(browser, serve, dir));

/** A GGUF metadata value, or undefined. */
const meta = (file: string, key: string) => readGgufHeader(file).metadata.get(key);

describe.skipIf(!haveChromium)('Use in Ollama / llama.cpp on the Training page', { timeout: TEST_TIMEOUT_MS }, () => {
  it("writes the run's adapter as a GGUF LoRA and a Modelfile that uses the GGUF base", async () => {
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-testid=train-status]', { hasText: 'Finished' }).waitFor();
    const button = page.locator('[data-action=export-model]');
    await button.click();
    const result = page.locator('[data-testid=export-model-result]');
    await result.waitFor();
    const adapterGguf = (await page.locator('[data-testid=export-adapter-gguf]').textContent())!.trim();
    expect(adapterGguf).toBe(path.join(run, 'gguf', 'hindsight-run-gguf.lora.gguf'));
    await shot(page, 'export-model');

    // The adapter file, as llama.cpp's loader reads it: its metadata and one lora_a / lora_b per adapted projection.
    expect(meta(adapterGguf, 'general.type')).toBe('adapter');
    expect(meta(adapterGguf, 'adapter.type')).toBe('lora');
    expect(meta(adapterGguf, 'general.architecture')).toBe('qwen3');
    expect(meta(adapterGguf, 'adapter.lora.alpha')).toBe(8);
    const header = readGgufHeader(adapterGguf);
    const config = Checkpoint.open(base).config;
    const specs = loraSpecs(config, ['q', 'k', 'v', 'o']);
    expect(header.tensors).toHaveLength(2 * specs.length);
    // Its numbers are the run's adapter: a lora_a (not permuted: Qwen3 keeps rotate-half) equals PEFT's A.
    const trained = readAdapter(run, config);
    const spec = specs.find((s) => s.target === 'v' && s.layer === 0)!;
    const a = header.tensors.find((t) => t.name === 'blk.0.attn_v.weight.lora_a')!;
    const bytes = readGgufTensorBytes(a);
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))).toEqual(Array.from(trained.weights.get(loraAKey(spec))!));
    expect(trained.weights.get(loraBKey(spec))!.some((x) => x !== 0)).toBe(true); // two steps moved B off its zero start

    // The Modelfile: FROM the GGUF base, ADAPTER the file just written, the stop tokens; the command shown.
    const modelfile = fs.readFileSync(path.join(run, 'gguf', 'Modelfile'), 'utf8');
    expect(modelfile).toMatch(new RegExp(`^FROM ${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'));
    expect(modelfile).toContain(`ADAPTER ${adapterGguf}`);
    expect(modelfile).toMatch(/^PARAMETER stop "?<\|im_end\|>"?$/m);
    expect(await page.locator('[data-testid=export-ollama-command]').textContent()).toBe(`ollama create hindsight-run-gguf -f ${path.join(run, 'gguf', 'Modelfile')}`);
    expect(await page.locator('[data-testid=export-model-error]').count()).toBe(0);
  });

  it('with "also a merged GGUF" at F16, writes the merged model too', async () => {
    await page.locator('[data-testid=export-merged]').selectOption('f16');
    await page.locator('[data-action=export-model]').click();
    const merged = page.locator('[data-testid=export-model-result] code', { hasText: '.gguf' }).filter({ hasText: /merged|f16/i });
    await merged.first().waitFor();
    const file = (await merged.first().textContent())!.trim();
    expect(fs.existsSync(file)).toBe(true);
    expect(meta(file, 'general.architecture')).toBe('qwen3');
    expect(meta(file, 'general.file_type')).toBe(1); // LLAMA_FTYPE_MOSTLY_F16
    expect(pageErrors).toEqual([]);
  });
});
