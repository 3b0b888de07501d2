// createTrainStep fails early and readably: a bad model folder or a missing CUDA provider is a
// UserError when the step is built, never a crash at the first step or a silent CPU fallback.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { CUDA_PROVIDER_LIBS, ortBinaryDir } from '../../src-main/model/ort-session.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, adamw, lossConfig } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-step-errors-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const options = { lora: LORA, loss: lossConfig('rl'), optimizer: adamw(1e-3), device: 'cpu' as const };

describe('createTrainStep errors', () => {
  it('names a missing model folder in a UserError', async () => {
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

  it('a closed step refuses further calls', async () => {
    const dir = path.join(root, 'llama');
    writeTinyModel(dir, { family: 'llama', seed: 31, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
    const step = await createTrainStep(dir, options);
    expect(step.executionProvider).toBe('cpu');
    expect(step.specs).toHaveLength(2 * 7);
    await step.close();
    await expect(step.baseLogprobs({} as never)).rejects.toThrow(/closed/);
  });
});
