// Weight-only quantised inference (docs/design.md §Quantisation): the blockwise codes, the
// MatMulNBits layout ONNX Runtime reads, and the stated log-prob tolerance of int8 and int4
// against fp32 on a tiny random model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GraphBuilder, int } from '../../src-main/graph/ir.js';
import { createSession, ort } from '../../src-main/model/ort-session.js';
import { dequantize, quantizeBlockwise, quantScheme, QUANT_BLOCK_SIZE, type Quantize, type QuantScheme } from '../../src-main/model/quantize.js';
import { DRIFT_TEXT } from '../../src-main/model/quant-drift.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { checkpointWeights, decoderGraph } from '../../src-main/model/decoder.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { scoreRows } from '../../src-main/model/score-feeds.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import { writeTinyModel, type TinyModel } from '../../tools/tiny-models.js';

/**
 * The stated tolerance: the most |Δ log-prob| (nats) a token of the fixed text may move from
 * fp32, per choice. docs/design.md §Quantisation quotes the same figures.
 */
export const LOGPROB_TOLERANCE: Record<Exclude<Quantize, 'none'>, { max: number; mean: number }> = {
  int8: { max: 0.05, mean: 0.01 },
  int4: { max: 0.5, mean: 0.12 },
};

const randomWeights = (n: number, seed: number, skew = 0) => {
  const rand = seededRandom(seed);
  return Float32Array.from({ length: n }, () => (rand() - 0.5 + skew) * 0.2);
};

describe('blockwise quantisation', () => {
  for (const bits of [8, 4] as const) {
    for (const blockSize of [32, 128]) {
      it(`${bits}-bit, block ${blockSize}: every weight within half a step of its block, partial last block included`, () => {
        const scheme: QuantScheme = { bits, blockSize, accuracyLevel: 0 };
        const n = 5, k = blockSize + 20;
        const w = randomWeights(n * k, bits + blockSize, 0.3);
        const q = quantizeBlockwise(w, n, k, scheme);
        const back = dequantize(q, n, k, scheme);
        const scales = q.scales.data as Float32Array;
        const kBlocks = Math.ceil(k / blockSize);
        for (let r = 0; r < n; r++) {
          for (let c = 0; c < k; c++) {
            const step = scales[r * kBlocks + Math.floor(c / blockSize)]!;
            // Half a step, plus a little for the zero point's rounding.
            expect(Math.abs(back[r * k + c]! - w[r * k + c]!)).toBeLessThanOrEqual(step * 0.5 + 1e-6);
          }
        }
        expect(q.codes.dims).toEqual([n, kBlocks, (blockSize * bits) / 8]);
      });
    }
  }

  it('exact zeros stay exactly zero', () => {
    const w = new Float32Array(64);
    w[3] = 0.5;
    w[40] = -0.25;
    const scheme = quantScheme('int4')!;
    const back = dequantize(quantizeBlockwise(w, 1, 64, scheme), 1, 64, scheme);
    expect(back.filter((v, i) => i !== 3 && i !== 40).every((v) => v === 0)).toBe(true);
  });
});

describe('MatMulNBits reads the codes as they are laid out', () => {
  for (const [bits, blockSize] of [[8, 32], [4, 32], [8, QUANT_BLOCK_SIZE], [4, QUANT_BLOCK_SIZE]] as const) {
    it(`${bits}-bit, blocks of ${blockSize}: ONNX Runtime's product equals A · dequant(W)ᵀ`, async () => {
      const M = 3, K = 2 * blockSize + 16, N = 24; // two whole blocks and a partial one
      const scheme: QuantScheme = { bits, blockSize, accuracyLevel: 0 };
      const w = randomWeights(N * K, 7 + bits, 0.2);
      const a = randomWeights(M * K, 11);
      const q = quantizeBlockwise(w, N, K, scheme);
      const b = new GraphBuilder('nbits');
      const x = b.input('a', 'float32', [M, K]);
      const y = b.contribOp('MatMulNBits', [x, b.initializer('b', q.codes), b.initializer('s', q.scales), b.initializer('z', q.zeroPoints)], {
        K: int(K), N: int(N), bits: int(bits), block_size: int(blockSize), accuracy_level: int(0),
      }, { dtype: 'float32', shape: [M, N] });
      b.output(b.identityAs(y, 'y'));
      const { session } = await createSession(b.graph, { device: 'cpu', threads: 1 });
      const got = (await session.run({ a: new ort.Tensor('float32', a, [M, K]) })).y!.data as Float32Array;
      await session.release();
      const wd = dequantize(q, N, K, scheme);
      for (let m = 0; m < M; m++) {
        for (let n = 0; n < N; n++) {
          let s = 0;
          for (let k = 0; k < K; k++) s += a[m * K + k]! * wd[n * K + k]!;
          expect(got[m * N + n]).toBeCloseTo(s, 5);
        }
      }
    });
  }
});

describe('quantised score and generate on a tiny random model', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-quant-'));
  let tiny: TinyModel;
  const models = new Map<Quantize, LocalModel>();
  let fixed: { inputIds: number[]; responseStart: number };
  beforeAll(async () => {
    // Wide enough that K spans whole blocks of 128 and a partial one. Weights of std 0.03 (a
    // gain per layer of std · √width about that of std 0.05 at width 64, where these tolerances
    // were set): a random model with larger ones is chaotic, amplifying any rounding layer by
    // layer far more than a trained model does (std 0.2 moves int8 log-probs by up to 0.2 nats).
    tiny = writeTinyModel(path.join(root, 'm'), { family: 'qwen3', hiddenSize: 160, intermediateSize: 272, numHeads: 4, numKvHeads: 2, headDim: 16, std: 0.03, seed: 9 });
    for (const q of ['none', 'int8', 'int4'] as const) models.set(q, await LocalModel.load(tiny.dir, { quantize: q, threads: 1 }));
    fixed = { inputIds: models.get('none')!.tokenizer.encode(DRIFT_TEXT, true), responseStart: 1 };
  });
  afterAll(async () => {
    for (const m of models.values()) await m.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  for (const q of ['int8', 'int4'] as const) {
    it(`${q}: log-probs within the stated tolerance of fp32 (max ${LOGPROB_TOLERANCE[q].max}, mean ${LOGPROB_TOLERANCE[q].mean} nats)`, async () => {
      const [ref] = await models.get('none')!.score([fixed]);
      const [got] = await models.get(q)!.score([fixed]);
      const diffs = got!.map((v, i) => Math.abs(v - ref![i]!));
      const max = Math.max(...diffs);
      const mean = diffs.reduce((a, d) => a + d, 0) / diffs.length;
      expect(max).toBeLessThanOrEqual(LOGPROB_TOLERANCE[q].max);
      expect(mean).toBeLessThanOrEqual(LOGPROB_TOLERANCE[q].mean);
      // Quantised for real: not the fp32 numbers under another name.
      expect(max).toBeGreaterThan(0);
      // The model reports the same kind of figure itself (on the first tokens of the same text).
      const drift = (await models.get(q)!.quantizationDrift())!;
      expect(drift.tokens).toBeGreaterThan(20);
      expect(drift.maxAbs).toBeLessThanOrEqual(LOGPROB_TOLERANCE[q].max);
      expect(drift.meanAbs).toBeLessThanOrEqual(LOGPROB_TOLERANCE[q].mean);
    });

    it(`${q}: generates through the KV cache as it scores`, async () => {
      const model = models.get(q)!;
      const prompt = fixed.inputIds.slice(0, 12);
      const out = await model.generate(prompt, { maxNewTokens: 8, stopTokenIds: [] });
      expect(out.tokens).toHaveLength(8);
      const [lp] = await model.score([{ inputIds: [...prompt, ...out.tokens], responseStart: prompt.length }]);
      // accuracy_level 4 quantises activations per call, so prefill and decode differ a little.
      lp!.forEach((v, i) => expect(Math.abs(v - out.logprobs[i]!)).toBeLessThan(LOGPROB_TOLERANCE[q].max));
    });
  }

  for (const q of ['none', 'int8', 'int4'] as const) {
    it(`${q}: the score head over many vocabulary chunks (a partial last one) gives one chunk's log-probs`, async () => {
      const weights = checkpointWeights(Checkpoint.open(tiny.dir));
      const vocab = weights.config.vocabSize;
      const rows = [fixed, { inputIds: fixed.inputIds.slice(0, 20), responseStart: 12 }];
      const scoreWith = async (vocabChunk: number) => {
        const { graph } = decoderGraph(weights, { output: 'target_logprobs', quantize: quantScheme(q), vocabChunk });
        const { session } = await createSession(graph, { device: 'cpu', threads: 1 });
        try {
          return await scoreRows((feeds) => session.run(feeds), rows);
        } finally {
          await session.release();
        }
      };
      expect(vocab).toBeGreaterThan(3 * 37);
      expect(vocab % 37).not.toBe(0);
      const [whole, chunked] = [await scoreWith(vocab), await scoreWith(37)];
      expect(chunked.map((r) => r.length)).toEqual([fixed.inputIds.length - 1, 8]);
      chunked.forEach((row, r) => row.forEach((v, i) => expect(Math.abs(v - whole[r]![i]!)).toBeLessThan(1e-5)));
    });
  }

  it('without quantisation there is no drift to report', async () => {
    expect(await models.get('none')!.quantizationDrift()).toBeUndefined();
  });
});
