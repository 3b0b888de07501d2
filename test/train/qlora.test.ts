// QLoRA (docs/design.md §QLoRA): a training step on an int8 or int4 base equals a step on an fp32
// base whose weights are the dequantised ones (the projections dequantised, the embedding and the
// head rounded to fp16, as the quantised step stores them): the loss within 1e-5 relative, every
// LoRA gradient within 1e-4 relative, on every tiny architecture, with and without recomputation.
// Against the original fp32 weights the drift (loss, gradient cosine, log-probs) is measured and
// printed: docs/design.md §QLoRA quotes it.
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { trainingScheme } from '../../src-main/train/step-graph.js';
import { dequantize, quantizeBlockwise, type Quantize } from '../../src-main/model/quantize.js';
import { float32ToFp16, fp16ToFloat32 } from '../../src-main/model/half.js';
import { writeSafetensors, type TensorToWrite } from '../../src-main/model/safetensors.js';
import { writeTinyModel, type TinyFamily, type TinyModel } from '../../tools/tiny-models.js';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import type { LoraWeights } from '../../src-main/train/training-step.js';
import { LORA, dot, lossConfig, randomLora, sgd, tinyBatch } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-qlora-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const PROJECTION = /\.(q|k|v|o|gate|up|down)_proj\.weight$/;
const TABLE = /^(model\.embed_tokens|lm_head)\.weight$/;

/** fp32 → fp16 → fp32. */
function halfRounded(v: Float32Array): Float32Array {
  return fp16ToFloat32(float32ToFp16(v));
}

/** A copy of `model` whose weights are what a `quantize` step computes with, as plain fp32. */
function dequantisedCopy(model: TinyModel, quantize: Quantize, dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const f of fs.readdirSync(model.dir)) if (!f.endsWith('.safetensors')) fs.copyFileSync(path.join(model.dir, f), path.join(dir, f));
  const scheme = trainingScheme(quantize)!;
  const tensors: Record<string, TensorToWrite> = {};
  for (const [name, { shape, data }] of model.weights) {
    let values = data;
    if (PROJECTION.test(name)) values = dequantize(quantizeBlockwise(data, shape[0]!, shape[1]!, scheme), shape[0]!, shape[1]!, scheme);
    else if (TABLE.test(name)) values = halfRounded(data);
    tensors[name] = { dtype: 'F32', shape, data: values };
  }
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors, { format: 'pt' });
  return dir;
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);
function relativeNorm(a: Float32Array, b: Float32Array): number {
  let d = 0, n = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i]! - b[i]!) ** 2;
    n += b[i]! ** 2;
  }
  return Math.sqrt(d / Math.max(n, 1e-30));
}
const cosine = (a: LoraWeights, b: LoraWeights) => dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b));

// hidden 160: two blocks of 128 along K, the second padded; the others one padded block.
const CASES: { family: TinyFamily; quantize: Quantize; hiddenSize?: number; recompute?: boolean }[] = [
  { family: 'qwen3', quantize: 'int4', hiddenSize: 160, recompute: true },
  { family: 'qwen3', quantize: 'int8' },
  { family: 'qwen2', quantize: 'int4' },
  { family: 'qwen2', quantize: 'int8', recompute: true },
  { family: 'llama', quantize: 'int4' },
  { family: 'llama', quantize: 'int8' },
];

describe.each(CASES)('$family $quantize (hidden $hiddenSize, recompute $recompute)', ({ family, quantize, hiddenSize, recompute = false }) => {
  it('equals the step on the dequantised fp32 base; its drift from the original weights is measured', async () => {
    const seed = { qwen3: 21, qwen2: 22, llama: 23, phi3: 24, granite: 25, gemma2: 46, gemma3: 26, glm4: 56, smollm3: 27, olmo2: 28, olmo3: 29, ministral3: 30 }[family];
    const model = writeTinyModel(path.join(root, `${family}-${quantize}`), { family, seed, ...(hiddenSize ? { hiddenSize, headDim: hiddenSize / 4 } : {}), tie: family === 'qwen2' });
    const reference = dequantisedCopy(model, quantize, path.join(root, `${family}-${quantize}-dequantised`));
    const options = { lora: LORA, loss: lossConfig('combine'), optimizer: sgd(0.1), device: 'cpu' as const, recompute, vocabChunk: 64 };
    const [quantized, dequantised, original] = await Promise.all([
      TrainStepEngine.create(model.dir, { ...options, quantize }),
      TrainStepEngine.create(reference, options),
      TrainStepEngine.create(model.dir, options),
    ]);
    try {
      const vocab = model.config.vocab_size as number;
      const batch = tinyBatch('combine', vocab, seed);
      const weights = randomLora(quantized.specs, LORA.r, seed);
      batch.oldLogprobs = await dequantised.policyLogprobs(batch, weights);
      const [q, d, o] = await Promise.all([quantized, dequantised, original].map((e) => e.gradients(batch, weights)));
      expect(relative(q.loss, d.loss)).toBeLessThan(1e-5);
      for (const [key, g] of d.grads) expect(relativeNorm(q.grads.get(key)!, g), key).toBeLessThan(1e-4);
      expect(dot(q.grads, q.grads)).toBeGreaterThan(0);

      // Drift from the original fp32 weights: stated, not bounded tightly (docs/design.md §QLoRA).
      const [lq, lo] = await Promise.all([quantized.policyLogprobs(batch, weights), original.policyLogprobs(batch, weights)]);
      let logprobDrift = 0;
      for (let i = 0; i < lq.length; i++) if (batch.responseMask[i]) logprobDrift = Math.max(logprobDrift, Math.abs(lq[i]! - lo[i]!));
      const drift = { loss: relative(q.loss, o.loss), gradCosine: cosine(q.grads, o.grads), logprobMaxAbs: logprobDrift };
      console.log(`qlora drift ${family} ${quantize}: ${JSON.stringify(drift)}`);
      expect(drift.gradCosine).toBeGreaterThan(quantize === 'int8' ? 0.99 : 0.5); // tiny random weights: int4's error is large there
    } finally {
      await Promise.all([quantized, dequantised, original].map((e) => e.close()));
    }
  });
});

// A GGUF base whose Q8_0 / Q4_0 blocks map onto MatMulNBits trains from its own blocks: no
// projection is read as fp32 or quantised again, and the step equals the step on ggml's own
// expansion of them (the tables rounded to fp16, as the quantised step stores them).
describe.each([['q8_0', 'int8'], ['q4_0', 'int4']] as const)('a %s GGUF base under --quantize %s', (type, quantize) => {
  it('trains from its own blocks, equal to the step on their fp32 expansion', async () => {
    const tiny = writeTinyModel(path.join(root, `gguf-${type}`), { family: 'llama', seed: 25, hiddenSize: 64, intermediateSize: 96, headDim: 16, numHeads: 4, numKvHeads: 2 });
    const file = path.join(root, `llama-${type}.gguf`);
    writeGguf(tiny.dir, file, { type, embeddings: 'q8_0' });
    // The reference: every tensor as the GGUF reader expands it, in a safetensors folder.
    const expanded = path.join(root, `gguf-${type}-expanded`);
    fs.mkdirSync(expanded);
    for (const f of fs.readdirSync(tiny.dir)) if (!f.endsWith('.safetensors')) fs.copyFileSync(path.join(tiny.dir, f), path.join(expanded, f));
    const ckpt = Checkpoint.open(file);
    const tensors: Record<string, TensorToWrite> = {};
    for (const [name, { shape }] of tiny.weights) {
      const values = ckpt.readFloat32(name, shape);
      tensors[name] = { dtype: 'F32', shape, data: TABLE.test(name) ? halfRounded(values) : values };
    }
    writeSafetensors(path.join(expanded, 'model.safetensors'), tensors, { format: 'pt' });

    const read = vi.spyOn(Checkpoint.prototype, 'readFloat32');
    const options = { lora: LORA, loss: lossConfig('rl'), optimizer: sgd(0.1), device: 'cpu' as const, vocabChunk: 64 };
    const native = await TrainStepEngine.create(file, { ...options, quantize });
    const reference = await TrainStepEngine.create(expanded, options);
    try {
      const batch = tinyBatch('rl', tiny.config.vocab_size as number, 25);
      const weights = randomLora(native.specs, LORA.r, 25);
      batch.oldLogprobs = await reference.policyLogprobs(batch, weights);
      const [q, d] = await Promise.all([native.gradients(batch, weights), reference.gradients(batch, weights)]);
      const readNames = new Set(read.mock.calls.flatMap((c, i) => ((read.mock.contexts[i] as Checkpoint).gguf ? [c[0]] : []))); // the GGUF's reads as fp32
      expect([...readNames].filter((n) => PROJECTION.test(n))).toEqual([]);
      expect(relative(q.loss, d.loss)).toBeLessThan(1e-5);
      for (const [key, g] of d.grads) expect(relativeNorm(q.grads.get(key)!, g), key).toBeLessThan(1e-4);
    } finally {
      await Promise.all([native.close(), reference.close()]);
    }
  });
});
