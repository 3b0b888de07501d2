// A GGUF's Q8_0 and Q4_0 weights under --quantize run on their own blocks
// (src-main/model/gguf/native-blocks.ts): the MatMulNBits codes stand for exactly the values
// ggml's dequantisation gives (Llama's q/k rows put back too), the projections are never read
// as fp32, and the model scores close to its fp32 expansion.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { readGgufTensor } from '../../src-main/model/gguf/model.js';
import { ggufNativeBlocks } from '../../src-main/model/gguf/native-blocks.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { dequantize } from '../../src-main/model/quantize.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-native-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const tiny = writeTinyModel(path.join(tmp, 'llama'), { family: 'llama', seed: 5, hiddenSize: 64, intermediateSize: 96, headDim: 16, numHeads: 4, numKvHeads: 2 });

describe.each(['q8_0', 'q4_0'] as const)('a %s GGUF', (type) => {
  const file = path.join(tmp, `llama-${type}.gguf`);
  writeGgufFromFolder(tiny.dir, file, { type, embeddings: 'q8_0' });
  const projections = [...tiny.weights.keys()].filter((n) => /_proj\.weight$/.test(n));

  it('gives MatMulNBits blocks that stand for ggml\'s values exactly (q/k rows in Hugging Face\'s order)', () => {
    const ckpt = Checkpoint.open(file);
    for (const name of [...projections, 'lm_head.weight']) {
      const [n, k] = ckpt.entry(name).shape as [number, number];
      const native = ggufNativeBlocks(ckpt.gguf!, name, n, k, 4)!;
      expect(native.scheme).toEqual({ bits: name === 'lm_head.weight' || type === 'q8_0' ? 8 : 4, blockSize: 32, accuracyLevel: 4 });
      const fromBlocks = dequantize(native.read(), n, k, native.scheme);
      const fromGgml = readGgufTensor(ckpt.gguf!.tensors.get(name)!);
      expect(fromBlocks.every((v, i) => Object.is(v, fromGgml[i])), name).toBe(true);
    }
  });

  it('runs the projections on them under --quantize, never reading them as fp32, close to the fp32 expansion', async () => {
    const read = vi.spyOn(Checkpoint.prototype, 'readFloat32');
    const quantized = await LocalModel.load(file, { quantize: type === 'q8_0' ? 'int8' : 'int4' });
    const full = await LocalModel.load(file);
    try {
      const rows = [{ inputIds: [3, 17, 42, 8, 99, 5, 61, 7], responseStart: 2 }];
      const q = (await quantized.score(rows))[0]!;
      const readNames = new Set(read.mock.calls.map((c) => c[0]));
      const f = (await full.score(rows))[0]!;
      expect(projections.filter((n) => readNames.has(n))).toEqual([]);
      expect(readNames.has('lm_head.weight')).toBe(false);
      // Only the activations' int8 rounding (accuracy level 4) parts them: the weights are the same
      // values. A random tiny model amplifies it (docs/design.md §Quantisation holds re-quantised
      // int8 to 0.05 nats and int4 to 0.5).
      const drift = Math.max(...q.map((v, i) => Math.abs(v - f[i]!)));
      expect(drift).toBeLessThan(type === 'q8_0' ? 0.05 : 0.2);
      expect((await quantized.generate([3, 17, 42], { maxNewTokens: 4, temperature: 0 })).tokens.length).toBeGreaterThan(0);
    } finally {
      await Promise.all([quantized.close(), full.close()]);
    }
  });
});

it('leaves types without an exact mapping (F32, Q4_1, k-quants) to the usual quantisation', () => {
  const file = path.join(tmp, 'llama-f32.gguf');
  writeGgufFromFolder(tiny.dir, file, { type: 'f32' });
  const ckpt = Checkpoint.open(file);
  expect(ggufNativeBlocks(ckpt.gguf!, 'model.layers.0.mlp.up_proj.weight', 96, 64, 4)).toBeUndefined();
});
