/**
 * A random model of a real shape written straight into the form a quantised training step keeps
 * (docs/design.md §QLoRA), for bench/train-memory.ts: the projections as int8 / int4 MatMulNBits
 * blocks (through the same `nativeBlocks` hook a GGUF's Q8_0 / Q4_0 tensors use, so nothing is
 * quantised and no fp32 copy of a projection is ever made), the embedding and the untied LM head
 * as fp16 tables, the norms 1. A Qwen3-8B in fp32 is 33 GB; this source never holds more than
 * one tensor's codes at a time (the step's graph writes each to the shared weight file).
 *
 *   qwen3-8b   Qwen3-8B: 36 layers, hidden 4096, 32 / 8 heads of 128, MLP 12,288, 151,936 tokens,
 *              untied head, q/k norms                                     8.19B parameters
 */
import type { ModelConfig } from '../src-main/model/model-config.js';
import type { WeightSource } from '../src-main/model/weight-source.js';
import type { Tensor } from '../src-main/graph/ir.js';
import { quantizedDims, quantScheme, type Quantize } from '../src-main/model/quantize.js';

export const QWEN3_8B: ModelConfig = {
  family: 'qwen3', architecture: 'Qwen3ForCausalLM', vocabSize: 151_936, hiddenSize: 4096, intermediateSize: 12_288, numLayers: 36,
  numHeads: 32, numKvHeads: 8, headDim: 128, rmsNormEps: 1e-6, ropeTheta: 1_000_000, tieWordEmbeddings: false,
  qkvBias: false, oBias: false, mlpBias: false, qkNorm: true, eosTokenIds: [151_645], maxPositionEmbeddings: 40_960,
};

/** The shape's parameter count (projections, tables, norms). */
export function parameterCount(c: ModelConfig): number {
  const H = c.hiddenSize, q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim, I = c.intermediateSize;
  const layer = H * q * 2 + H * kv * 2 + 3 * H * I + 2 * H + 2 * c.headDim;
  return c.numLayers * layer + c.vocabSize * H * (c.tieWordEmbeddings ? 1 : 2) + H;
}

/** Random bytes from a seeded xorshift, 4 at a time. */
function randomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(Math.ceil(length / 4) * 4);
  const words = new Uint32Array(out.buffer);
  let x = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  return out.subarray(0, length);
}

/**
 * Random fp16 weights of magnitude 2⁻⁸ to 2⁻⁵ (about the std 0.02 of a trained model's tables),
 * either sign, made as fp16 bit patterns directly.
 */
function randomHalf(count: number, seed: number): Uint16Array {
  const bytes = randomBytes(count * 2, seed);
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  for (let i = 0; i < count; i++) {
    const r = bits[i]!;
    bits[i] = (r & 0x8000) | ((7 + ((r >> 10) % 3)) << 10) | (r & 0x3ff);
  }
  return bits;
}

/** `config`'s weights, random, with the projections in `quantize`'s blocks (see the header). */
export function randomQuantizedSource(config: ModelConfig, quantize: Exclude<Quantize, 'none'>, seed = 1): WeightSource {
  const scheme = quantScheme(quantize)!;
  // Codes uniform over the range around a zero point at its middle: std ≈ range / √12 · scale ≈ 0.02.
  const levels = 2 ** scheme.bits, scale = 0.02 / (levels / Math.sqrt(12));
  // Each tensor's stream from its name, so every graph that reads a tensor gets the same values.
  const seedOf = (name: string) => [...name].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 16_777_619) >>> 0, 2_166_136_261 ^ seed);
  return {
    config,
    identity: `bench random ${config.architecture} ${config.numLayers}×${config.hiddenSize} ${quantize} seed ${seed}`,
    has: (name) => name !== 'lm_head.weight' || !config.tieWordEmbeddings,
    nativeBlocks(name: string, n: number, k: number, accuracyLevel: 0 | 4) {
      if (!/_proj\.weight$/.test(name)) return undefined; // the inference head: not in a training step
      const s = { ...scheme, accuracyLevel };
      const tensorSeed = seedOf(name);
      return {
        scheme: s,
        read: () => {
          const dims = quantizedDims(n, k, s);
          const zeroPoints = new Uint8Array(dims.zeroPoints[0]!).fill(s.bits === 8 ? 128 : 0x88);
          return {
            codes: { dtype: 'uint8', dims: dims.codes, data: randomBytes(dims.codes.reduce((a, b) => a * b, 1), tensorSeed) },
            scales: { dtype: 'float32', dims: dims.scales, data: new Float32Array(n * dims.scales[1]!).fill(scale) },
            zeroPoints: { dtype: 'uint8', dims: dims.zeroPoints, data: zeroPoints },
          } satisfies Record<string, Tensor>;
        },
      };
    },
    lazyFloat16(name, shape) {
      const tensorSeed = seedOf(name);
      return { dtype: 'float16', dims: shape, data: () => randomHalf(shape.reduce((a, b) => a * b, 1), tensorSeed) };
    },
    lazyFloat32(name, shape) {
      if (!/norm\.weight$/.test(name)) throw new Error(`the random quantised model holds ${name} only in quantised or fp16 form`);
      return { dtype: 'float32', dims: shape, data: () => new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(1) };
    },
  } as WeightSource;
}
