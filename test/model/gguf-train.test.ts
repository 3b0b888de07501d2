// Training on a GGUF base: a LoRA training step on a tiny Llama written as GGUF (F32, q/k rows
// permuted as llama.cpp does) is the step on its folder, and the merged model of a GGUF base
// (what generate/serve --adapter load) is a folder that scores as the folder base's merge.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { writeMergedModel } from '../../src-main/train/merge.js';
import { cloneWeights, loraSpecs } from '../../src-main/train/lora.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { adamw, LORA, lossConfig, randomLora, tinyBatch } from '../train/step-helpers.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-train-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('a GGUF base for training', () => {
  const dir = writeTinyModel(path.join(root, 'llama'), { family: 'llama', seed: 7, hiddenSize: 64, intermediateSize: 96, numHeads: 4, numKvHeads: 2, std: 0.05 }).dir;
  const file = path.join(root, 'llama.gguf');
  writeGguf(dir, file, { type: 'f32' });
  const config = Checkpoint.open(dir).config;
  const weights = randomLora(loraSpecs(config, LORA.targets), LORA.r, 3);

  it('takes the training step the folder takes', async () => {
    const stepOn = async (model: string) => {
      const step = await createTrainStep(model, { lora: LORA, loss: lossConfig('combine'), optimizer: adamw(1e-3), device: 'cpu', threads: 1 });
      try {
        return await step.step(tinyBatch('combine', config.vocabSize, 3), cloneWeights(weights), { step: 0, m: new Map(), v: new Map() }); // each from the same start
      } finally {
        await step.close();
      }
    };
    const [a, b] = [await stepOn(dir), await stepOn(file)];
    expect(b.metrics.loss).toBeCloseTo(a.metrics.loss, 6);
    expect(b.metrics.gradNorm).toBeCloseTo(a.metrics.gradNorm, 6);
    for (const [k, w] of a.weights) expect(Math.max(...w.map((v, i) => Math.abs(v - b.weights.get(k)![i]!))), k).toBeLessThan(1e-6);
  });

  it('merges an adapter into a folder that scores as the folder base\'s merge', async () => {
    const specs = loraSpecs(config, LORA.targets);
    const fromFolder = writeMergedModel(Checkpoint.open(dir), path.join(root, 'merged-folder'), LORA, specs, weights);
    const fromGguf = writeMergedModel(Checkpoint.open(file), path.join(root, 'merged-gguf'), LORA, specs, weights);
    expect(fs.readdirSync(fromGguf).sort()).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    const rows = [{ inputIds: [4, 8, 15, 16, 23, 42], responseStart: 2 }];
    const [a, b] = [await LocalModel.load(fromFolder), await LocalModel.load(fromGguf)];
    try {
      const [x, y] = [(await a.score(rows))[0]!, (await b.score(rows))[0]!];
      y.forEach((v, i) => expect(v).toBeCloseTo(x[i]!, 5));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
