/**
 * RoPE scaling as a GGUF file stores it (./model.ts): `rope.scaling.type` linear or yarn with its
 * keys, Llama 3's `rope_freqs` tensor, Phi-3's LongRoPE factor tensors.
 */
import { UserError } from '../../../src-shared/types.js';
import type { RopeScaling } from '../model-config.js';
import { dequantize } from './dequantize.js';
import { readGgufTensorBytes, type GgufFile, type GgufTensorInfo } from './reader.js';

/** A small tensor's values as stored (no rows to reorder). */
function readValues(info: GgufTensorInfo): Float32Array {
  return dequantize(readGgufTensorBytes(info), info.type, info.dims.reduce((a, d) => a * d, 1), `${info.file}: tensor '${info.name}'`);
}

export function ropeScaling(gguf: GgufFile, arch: string, file: string, byName: Map<string, GgufTensorInfo>, rotary: number, theta: number): RopeScaling | undefined {
  const meta = gguf.metadata;
  const type = meta.get(`${arch}.rope.scaling.type`);
  const factor = meta.get(`${arch}.rope.scaling.factor`);
  if (type === 'linear' && typeof factor === 'number' && factor > 0) return { type: 'linear', factor };
  if (type === 'yarn') {
    if (!(typeof factor === 'number' && factor > 0)) throw new UserError(`${file}: ${arch}.rope.scaling.type yarn needs a positive ${arch}.rope.scaling.factor, found ${JSON.stringify(String(factor))}`);
    return yarnFromMetadata(meta, arch, file, factor);
  }
  const short = arch === 'phi3' ? byName.get('rope_factors_short.weight') : undefined;
  if (type !== undefined && type !== 'none' && type !== 'linear' && !(short && type === 'longrope')) throw new UserError(`${file}: ${arch}.rope.scaling.type '${String(type)}' is not supported (supported: linear, yarn, Llama 3's rope_freqs and Phi-3's LongRoPE factors)`);
  if (short) return longRopeFromFactors(gguf, arch, file, short, rotary);
  const freqs = byName.get('rope_freqs.weight');
  if (!freqs) return undefined;
  return llama3FromFreqs(file, readValues(freqs), rotary, theta);
}

/**
 * YaRN as llama.cpp runs it: `rope.scaling.original_context_length`, `yarn_beta_fast`/`_slow` (32
 * and 1 where absent), cos and sin times 0.1·ln(factor) + 1, or that over 0.1·m·ln(factor) + 1 for
 * a `yarn_log_multiplier` m (mscale_all_dim): llama.cpp derives it so, whatever `yarn_attn_factor`
 * the converter wrote.
 */
function yarnFromMetadata(meta: GgufFile['metadata'], arch: string, file: string, factor: number): RopeScaling {
  const key = (k: string) => meta.get(`${arch}.rope.scaling.${k}`);
  const original = key('original_context_length');
  if (typeof original !== 'number' || !(original > 0)) throw new UserError(`${file}: ${arch}.rope.scaling.original_context_length must be a positive number for yarn, found ${JSON.stringify(String(original))}`);
  const mscale = (m: number) => (factor <= 1 ? 1 : 0.1 * m * Math.log(factor) + 1);
  // A log multiplier (mscale_all_dim) divides, as llama.cpp's yarn_attn_factor = mscale(1) / mscale(log_mul).
  const logMul = Number(key('yarn_log_multiplier') ?? 0);
  if (!Number.isFinite(logMul)) throw new UserError(`${file}: ${arch}.rope.scaling.yarn_log_multiplier must be a number`);
  const beta = (k: string, fallback: number) => (typeof key(k) === 'number' && key(k) ? (key(k) as number) : fallback);
  return { type: 'yarn', factor, originalMaxPositionEmbeddings: original, betaFast: beta('yarn_beta_fast', 32), betaSlow: beta('yarn_beta_slow', 1), attentionFactor: logMul ? mscale(1) / mscale(logMul) : mscale(1), truncate: true };
}

/**
 * Phi-3's LongRoPE within its original context: the short factors (a divisor per rotated pair),
 * and the factor cos and sin are multiplied by. llama.cpp takes that factor from
 * `rope.scaling.attn_factor` (hparams.rope_attn_factor, 1 where a file has none; ggml's rope
 * multiplies cos and sin by it) as transformers takes its attention_factor, so a file without
 * the key is read as llama.cpp runs it.
 */
function longRopeFromFactors(gguf: GgufFile, arch: string, file: string, short: GgufTensorInfo, rotary: number): RopeScaling {
  const factors = readValues(short);
  if (factors.length !== rotary / 2 || !factors.every((f) => f > 0 && Number.isFinite(f))) {
    throw new UserError(`${file}: rope_factors_short.weight must hold ${rotary / 2} positive numbers (one per rotated pair of ${arch}.rope.dimension_count ${rotary}), found ${factors.length}`);
  }
  const attn = gguf.metadata.get(`${arch}.rope.scaling.attn_factor`);
  if (attn !== undefined && !(typeof attn === 'number' && attn > 0 && Number.isFinite(attn))) throw new UserError(`${file}: ${arch}.rope.scaling.attn_factor must be a positive number, found ${JSON.stringify(String(attn))}`);
  return { type: 'longrope', shortFactor: [...factors], attentionFactor: typeof attn === 'number' ? attn : 1 };
}

/**
 * Llama 3.1+'s RoPE scaling, which the converter stores as rope_freqs (a divisor per frequency)
 * rather than its parameters: the parameters Meta published (low 1, high 4, original context
 * 8192; the factor is the largest divisor) are taken when they reproduce every divisor.
 */
function llama3FromFreqs(file: string, divisors: Float32Array, headDim: number, theta: number): RopeScaling {
  const factor = Math.max(...divisors);
  const s: RopeScaling = { type: 'llama3', factor, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 };
  const lowWavelen = 8192 / 1, highWavelen = 8192 / 4;
  for (let i = 0; i < divisors.length; i++) {
    const freq = 1 / theta ** ((2 * i) / headDim);
    const wavelen = (2 * Math.PI) / freq;
    let want = 1;
    if (wavelen > lowWavelen) want = factor;
    else if (wavelen >= highWavelen) {
      const smooth = (8192 / wavelen - 1) / (4 - 1);
      want = 1 / ((1 - smooth) / factor + smooth);
    }
    if (Math.abs(want - divisors[i]!) > 1e-3 * want) throw new UserError(`${file}: rope_freqs.weight is not Llama 3's RoPE scaling with its published parameters (divisor ${i} is ${divisors[i]}, expected ${want}); not supported`);
  }
  return s;
}
