// Mixed precision (docs/design.md §Precision): with `precision: 'fp16'` the frozen base's
// projections are stored and multiplied in half precision while LoRA, the norms, attention, the
// head, the loss and the optimizer stay fp32. On the CPU (ONNX Runtime has fp16 MatMul there
// too, slowly) its results must stay close to fp32's, its gradients must still reach LoRA, and
// the fp32 default must be untouched; GPU runs are measured by bench:gpu.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { float32ToFp16, floatToHalf } from '../../src-main/model/half.js';
import { toFloat32 } from '../../src-main/model/safetensors.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { checkpointWeights, decoderGraph } from '../../src-main/model/decoder.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import type { StepBatch, StepMetrics } from '../../src-main/train/training-step.js';
import { UserError } from '../../src-shared/types.js';
import { cloneWeights, initLora, loraSpecs } from '../../src-main/train/lora.js';
import { defaultPrecision, type Precision } from '../../src-shared/training.js';
import { adamw, LORA, lossConfig, randomLora, sgd, tinyBatch } from '../train/step-helpers.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-precision-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const halfBitsToFloat = (bits: Uint16Array) => toFloat32(new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength), 'F16', 'test');

describe('fp32 → fp16', () => {
  it('every fp16 value comes back to its own bits, and halfway points round to the even neighbour', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const values = halfBitsToFloat(all);
    const back = float32ToFp16(values);
    for (let h = 0; h < 65536; h++) {
      const isNaN = (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
      if (isNaN) expect(back[h]! & 0x7fff, `NaN ${h}`).toBeGreaterThan(0x7c00);
      else if (back[h] !== h) expect.fail(`bits ${h.toString(16)} (${values[h]}) came back as ${back[h]!.toString(16)}`);
    }
    // Midpoints between neighbours (positive finite, so the next pattern is the next value up).
    const mids: number[] = [], expected: number[] = [];
    for (let h = 0; h < 0x7bff; h += 97) {
      mids.push((values[h]! + values[h + 1]!) / 2);
      expected.push(h % 2 === 0 ? h : h + 1);
    }
    const f32Mids = Float32Array.from(mids);
    // Only where the midpoint is exact in fp32 (it is for all but the largest exponents' few).
    const exact = mids.map((m, i) => f32Mids[i] === m);
    const got = float32ToFp16(f32Mids);
    expected.forEach((e, i) => { if (exact[i]) expect(got[i], `midpoint ${mids[i]}`).toBe(e); });
  });

  it('the fast path for normals agrees with the one-value encoder: random fp32 patterns and every pattern near its two edges', () => {
    const rand = seededRandom(9);
    // 2^-14 (the smallest normal) and 65,520 (the first value that rounds to inf), ±4,096 patterns, both signs.
    const edges = [0x38800000, 0x477ff000].flatMap((edge) => [0, 0x80000000].flatMap((sign) => Array.from({ length: 8193 }, (_, d) => ((edge + d - 4096) | sign) >>> 0)));
    const bits = Uint32Array.from([...edges, ...Array.from({ length: 2_000_000 }, () => Math.floor(rand() * 2 ** 32))]);
    const values = new Float32Array(bits.buffer);
    const got = float32ToFp16(values);
    for (let i = 0; i < values.length; i++) {
      if (Number.isNaN(values[i])) continue; // a NaN's bits do not survive a JS number; NaN stays NaN, checked above
      if (got[i] !== floatToHalf(values[i]!)) expect.fail(`fp32 bits ${bits[i]!.toString(16)}: ${got[i]!.toString(16)}, one by one ${floatToHalf(values[i]!).toString(16)}`);
    }
  });

  it('overflow is ±inf, underflow ±0, and the fp32 sign survives', () => {
    const got = halfBitsToFloat(float32ToFp16(Float32Array.from([65504, 65519, 65520, -1e6, 1e-9, -1e-9, 2 ** -24, 0.1])));
    expect(Array.from(got.slice(0, 6))).toEqual([65504, 65504, Infinity, -Infinity, 0, -0]);
    expect(got[6]).toBe(2 ** -24);
    expect(got[7]).toBeCloseTo(0.1, 4);
  });
});

describe('fp16 projections', () => {
  const ROWS = [{ inputIds: [5, 9, 40, 41, 42, 7, 3, 60, 61, 12, 30], responseStart: 4 }, { inputIds: [8, 2, 77, 6, 13], responseStart: 2 }];

  it('default precision: fp16 on CUDA, fp32 on the CPU and on WebGPU', () => {
    expect(defaultPrecision('cpu')).toBe('fp32');
    expect(defaultPrecision('cuda')).toBe('fp16');
    expect(defaultPrecision('webgpu')).toBe('fp32');
  });

  for (const family of ['llama', 'qwen2', 'qwen3'] as const) {
    it(`${family}: score and greedy decode in fp16 stay within 2e-2 of fp32; only the projections' weights are fp16`, async () => {
      const dir = writeTinyModel(path.join(root, family), { family, seed: 3, hiddenSize: 64, intermediateSize: 96, std: 0.05 }).dir;
      const run = async (precision: Precision) => {
        const engine = ModelEngine.open(dir, { threads: 1, precision, graphCache: false });
        try {
          expect(engine.precision).toBe(precision);
          const scores = await engine.score(ROWS);
          const { tokens } = await engine.generate(ROWS[0]!.inputIds, { maxNewTokens: 8, stopTokenIds: [] });
          return { scores, tokens };
        } finally {
          await engine.close();
        }
      };
      const fp32 = await run('fp32');
      const fp16 = await run('fp16');
      const drift = Math.max(...fp32.scores.flatMap((row, i) => row.map((x, j) => Math.abs(x - fp16.scores[i]![j]!))));
      expect(drift).toBeGreaterThan(0); // it did run in fp16
      expect(drift).toBeLessThan(2e-2);
      expect(fp16.tokens.length).toBe(fp32.tokens.length);

      const { graph } = decoderGraph(checkpointWeights(Checkpoint.open(dir)), { output: 'target_logprobs', precision: 'fp16' });
      const half = [...graph.initializers].filter(([, t]) => t.dtype === 'float16').map(([name]) => name);
      const layers = Checkpoint.open(dir).config.numLayers;
      expect(half).toHaveLength(7 * layers);
      expect(half.every((n) => /_proj\.weight\.T\.fp16$/.test(n))).toBe(true);
    });
  }

  it('a training step in fp16: the fp32 step\'s loss within 1e-3 and gradient norm within 2% (LoRA and the optimizer stay fp32)', async () => {
    const dir = writeTinyModel(path.join(root, 'train'), { family: 'qwen2', seed: 5, hiddenSize: 64, intermediateSize: 96, std: 0.05 }).dir;
    const config = Checkpoint.open(dir).config;
    const weights = randomLora(loraSpecs(config, LORA.targets), LORA.r, 11);
    const run = async (precision: Precision): Promise<{ metrics: StepMetrics; a: Float32Array }> => {
      const step = await createTrainStep(dir, { lora: LORA, loss: lossConfig('combine'), optimizer: adamw(1e-3), device: 'cpu', threads: 1, precision });
      try {
        const r = await step.step(tinyBatch('combine', config.vocabSize, 3), cloneWeights(weights), { step: 0, m: new Map(), v: new Map() });
        const firstA = [...r.weights.keys()].find((k) => k.includes('lora_A'))!;
        return { metrics: r.metrics, a: r.weights.get(firstA)! };
      } finally {
        await step.close();
      }
    };
    const fp32 = await run('fp32');
    const fp16 = await run('fp16');
    expect(Math.abs(fp16.metrics.loss - fp32.metrics.loss)).toBeLessThan(1e-3);
    expect(Math.abs(fp16.metrics.gradNorm - fp32.metrics.gradNorm) / fp32.metrics.gradNorm).toBeLessThan(2e-2);
    expect(fp16.a).toBeInstanceOf(Float32Array);
    expect(fp16.a).not.toEqual(weights.get([...weights.keys()].find((k) => k.includes('lora_A'))!)); // the update happened
  });

  // A real run's gradients at the projections are small, much of them under fp16's normal
  // range: cast down unscaled they lost 8% of the gradient's norm here on the CPU,
  // 20% on WebGPU (lavapipe), which flushes fp16 subnormals to zero, and 48% at hidden 512,
  // 4 layers, 512 tokens. Scaled through fp16 (autodiff's halfProduct) they keep it.
  for (const [device, recompute] of [['cpu', false], ['cpu', true], ['webgpu', false], ['cuda', false]] as const) {
    it(`${device}${recompute ? ', recomputing' : ''}: small gradients survive the fp16 projections (the SGD step within 1% of fp32's on the CPU), or the device says it cannot run`, async () => {
      const dir = writeTinyModel(path.join(root, `small-gradients-${device}-${recompute}`), {
        family: 'qwen2', seed: 5, hiddenSize: 256, intermediateSize: 768, numLayers: 2, numHeads: 8, numKvHeads: 4, headDim: 32, std: 0.02, vocabSize: 8000, maxPositions: 512,
      }).dir;
      const config = Checkpoint.open(dir).config;
      const lora = { r: 16, alpha: 32, targets: LORA.targets };
      const weights = randomLora(loraSpecs(config, lora.targets), lora.r, 11);
      const batch = longReplyBatch(config.vocabSize, 256);
      const update = async (on: typeof device, precision: Precision) => {
        const step = await createTrainStep(dir, { lora, loss: lossConfig('rl'), optimizer: sgd(1), device: on, threads: 2, precision, recompute: recompute && precision === 'fp16' });
        try {
          const r = await step.step(batch, cloneWeights(weights), { step: 0, m: new Map(), v: new Map() });
          return { gradNorm: r.metrics.gradNorm, delta: [...weights.keys()].flatMap((k) => Array.from(r.weights.get(k)!, (w, i) => w - weights.get(k)![i]!)) };
        } finally {
          await step.close();
        }
      };
      let fp16: Awaited<ReturnType<typeof update>>;
      try {
        fp16 = await update(device, 'fp16');
      } catch (error) {
        if (device === 'cpu' || !(error instanceof UserError)) throw error;
        console.info(`precision: ${device} cannot run here, so its fp16 gradients are not checked: ${(error as Error).message.split('\n')[0]}`);
        return;
      }
      const fp32 = await update('cpu', 'fp32');
      let err = 0, norm = 0;
      fp32.delta.forEach((d, i) => { err += (fp16.delta[i]! - d) ** 2; norm += d * d; });
      expect(norm).toBeGreaterThan(0);
      expect(Math.sqrt(err / norm)).toBeLessThan(1e-2);
      expect(Math.abs(fp16.gradNorm - fp32.gradNorm) / fp32.gradNorm).toBeLessThan(2e-3);
    });
  }
});

/** One row of T random tokens, the second half the reply, advantages ±1: a real run's gradient scale. */
function longReplyBatch(vocab: number, T: number): StepBatch {
  const rand = seededRandom(1);
  return {
    batch: 1, seqLen: T,
    inputIds: BigInt64Array.from({ length: T }, () => BigInt(Math.floor(rand() * vocab))),
    attentionMask: new BigInt64Array(T).fill(1n),
    positionIds: BigInt64Array.from({ length: T }, (_, i) => BigInt(i)),
    responseMask: Float32Array.from({ length: T }, (_, i) => (i >= T / 2 ? 1 : 0)),
    oldLogprobs: new Float32Array(T),
    advantages: Float32Array.from({ length: T }, (_, i) => (i < T / 2 ? 0 : i % 3 ? 1 : -1)),
  };
}
