// createTrainStep runs the same engine in a worker thread: identical results to the in-process
// engine, the EP reported, user errors (bad folder, missing CUDA provider) arrive as UserErrors.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { CUDA_PROVIDER_LIBS, ortBinaryDir } from '../../src-main/model/ort-session.js';
import { createTrainStep, createTrainStepInProcess, emptyState } from '../../src-main/train/step/index.js';
import { writeTinyModel } from '../model/tiny-models.js';
import { LORA, adamw, lossConfig, randomLora, tinyBatch } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-step-worker-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const options = { lora: LORA, loss: lossConfig('rl'), optimizer: adamw(1e-3), device: 'cpu' as const };

describe('createTrainStep (worker thread)', () => {
  it('gives bit-identical results to the in-process engine and reports the EP', async () => {
    const dir = path.join(root, 'llama');
    writeTinyModel(dir, { family: 'llama', seed: 31, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
    const inWorker = await createTrainStep(Checkpoint.open(dir), options);
    const local = await createTrainStepInProcess(dir, options);
    try {
      expect(inWorker.executionProvider).toBe('cpu');
      expect(inWorker.specs).toEqual(local.specs);
      expect(inWorker.specs).toHaveLength(2 * 7);
      const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
      const batch = tinyBatch('rl', vocab, 3);
      const w = randomLora(inWorker.specs, LORA.r, 3);
      batch.oldLogprobs = await inWorker.policyLogprobs(batch, w);
      expect(await local.policyLogprobs(batch, w)).toEqual(batch.oldLogprobs);
      expect(await inWorker.baseLogprobs(batch)).toEqual(await local.baseLogprobs(batch));
      const a = await inWorker.step(batch, w, emptyState());
      const b = await local.step(batch, w, emptyState());
      expect(a.metrics).toEqual(b.metrics);
      for (const [k, v] of b.weights) expect(a.weights.get(k)).toEqual(v);
      for (const [k, v] of b.state.m) expect(a.state.m.get(k)).toEqual(v);
      // A second step from the first one's state carries the moments through the worker.
      const a2 = await inWorker.step(batch, a.weights, a.state);
      expect(a2.state.step).toBe(2);
      expect(a2.metrics.loss).toBeLessThan(a.metrics.loss);
    } finally {
      await inWorker.close();
      await local.close();
    }
    await expect(inWorker.step(tinyBatch('rl', 300, 1), new Map(), emptyState())).rejects.toThrow(/closed/);
  });

  it('passes user errors through as UserErrors', async () => {
    const missing = path.join(root, 'nope');
    const err = await createTrainStep(missing, options).catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toContain(`model folder not found: ${missing}`);
  });

  it.skipIf(CUDA_PROVIDER_LIBS.every((f) => fs.existsSync(path.join(ortBinaryDir(), f))))('refuses --device cuda without the provider instead of falling back', async () => {
    const dir = path.join(root, 'qwen2');
    writeTinyModel(dir, { family: 'qwen2', seed: 32, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
    const err = await createTrainStep(dir, { ...options, device: 'cuda' }).catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toMatch(/--device cuda: the ONNX Runtime CUDA provider is not installed/);
  });
});
