/**
 * RoPE's parameters as config.json gives them (./hf-checkpoint.ts readModelConfig), and the
 * inverse frequencies they make (./rope.ts): a base, a partial rotation, and scaling of type
 * `linear`, `llama3`, `longrope` (Phi-3) or `yarn` (OLMo 3), in transformers' older form
 * (`rope_theta`, `rope_scaling`) or its 5.x form (`rope_parameters`).
 */
import { UserError } from '../../src-shared/types.js';
import type { ModelConfig, RopeScaling } from './model-config.js';

export interface RopeRead {
  theta: number;
  scaling?: RopeScaling;
  /** The fraction of each head RoPE turns (partial_rotary_factor). */
  partial: number;
  /** LongRoPE's original_max_position_embeddings. */
  originalContext?: number;
}

/**
 * RoPE's base, scaling and partial rotation: transformers ≥ 5 writes them as one
 * `rope_parameters` object ({rope_type, rope_theta, partial_rotary_factor, factor…}), older
 * configs as `rope_theta`, `rope_scaling` and (Phi-3) `partial_rotary_factor`,
 * `original_max_position_embeddings` beside them.
 */
export function readRope(raw: Record<string, unknown>, file: string, num: (key: string, fallback?: number) => number): RopeRead {
  const p = raw.rope_parameters;
  const topPartial = raw.partial_rotary_factor ?? 1;
  if (p === null || p === undefined) return withScaling(num('rope_theta', 10000), raw.rope_scaling, topPartial, raw, file);
  if (typeof p !== 'object' || Array.isArray(p) || typeof (p as Record<string, unknown>).rope_theta !== 'number') {
    throw new UserError(`${file}: rope_parameters ${JSON.stringify(p)} is not supported (one object with rope_theta; per-layer-type parameters are not)`);
  }
  const { rope_theta: theta, partial_rotary_factor: partial, ...scaling } = p as Record<string, unknown>;
  return withScaling(theta as number, scaling.rope_type === undefined && scaling.type === undefined ? undefined : scaling, partial ?? topPartial, raw, file);
}

function withScaling(theta: number, scaling: unknown, partial: unknown, raw: Record<string, unknown>, file: string): RopeRead {
  if (typeof partial !== 'number' || !(partial > 0 && partial <= 1)) throw new UserError(`${file}: partial_rotary_factor ${JSON.stringify(partial)} must be a number in (0, 1]`);
  const r = (scaling ?? {}) as Record<string, unknown>;
  const original = Number(r.original_max_position_embeddings ?? raw.original_max_position_embeddings ?? raw.max_position_embeddings);
  return { theta, partial, scaling: parseRopeScaling(scaling, file, raw, partial), ...(Number.isFinite(original) && original > 0 ? { originalContext: original } : {}) };
}

export function parseRopeScaling(raw: unknown, file: string, config: Record<string, unknown>, partial: number): RopeScaling | undefined {
  if (raw === null || raw === undefined) return undefined;
  const r = raw as Record<string, unknown>;
  const type = r.rope_type ?? r.type;
  if (type === 'default') return undefined;
  const factor = Number(r.factor);
  if (type === 'linear' && factor > 0) return { type, factor };
  if (type === 'llama3' && factor > 0) {
    return {
      type,
      factor,
      lowFreqFactor: Number(r.low_freq_factor ?? 1),
      highFreqFactor: Number(r.high_freq_factor ?? 4),
      originalMaxPositionEmbeddings: Number(r.original_max_position_embeddings ?? 8192),
    };
  }
  // Phi-3's LongRoPE ("su" in its first configs), as transformers' _compute_longrope_parameters reads it.
  if (type === 'longrope' || type === 'su') return longRope(r, config, partial, file);
  if (type === 'yarn') return yarn(r, config, file);
  throw new UserError(`${file}: rope_scaling ${JSON.stringify(raw)} is not supported (supported: linear, llama3, longrope, yarn)`);
}

function longRope(r: Record<string, unknown>, config: Record<string, unknown>, partial: number, file: string): RopeScaling {
  const headDim = typeof config.head_dim === 'number' ? config.head_dim : Number(config.hidden_size) / Number(config.num_attention_heads);
  const pairs = Math.floor(headDim * partial) / 2;
  const short = r.short_factor;
  if (!Array.isArray(short) || short.length !== pairs || !short.every((f) => typeof f === 'number' && f > 0 && Number.isFinite(f))) {
    throw new UserError(`${file}: rope_scaling.short_factor must be ${pairs} positive numbers (one per rotated pair), found ${JSON.stringify(short)?.slice(0, 80)}`);
  }
  const original = Number(r.original_max_position_embeddings ?? config.original_max_position_embeddings ?? config.max_position_embeddings);
  // As transformers: the factor given, else the ratio of the two contexts.
  const factor = typeof r.factor === 'number' ? r.factor : Number(config.max_position_embeddings) / original;
  const given = r.attention_factor;
  const attentionFactor = typeof given === 'number' ? given : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original));
  if (!(original > 0) || !Number.isFinite(attentionFactor)) throw new UserError(`${file}: rope_scaling ${JSON.stringify(r).slice(0, 120)} has no usable original_max_position_embeddings or factor`);
  return { type: 'longrope', shortFactor: short as number[], attentionFactor };
}

/** YaRN's parameters with transformers' defaults (beta_fast 32, beta_slow 1, truncate, the attention factor 0.1·ln(factor) + 1, or mscale's ratio). */
function yarn(r: Record<string, unknown>, config: Record<string, unknown>, file: string): RopeScaling {
  const original = Number(r.original_max_position_embeddings);
  const factor = typeof r.factor === 'number' ? r.factor : Number(config.max_position_embeddings) / original;
  if (!(original > 0) || !(factor > 0)) throw new UserError(`${file}: rope_scaling ${JSON.stringify(r).slice(0, 120)}: yarn needs original_max_position_embeddings and a factor`);
  const mscale = (scale: number, m = 1) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
  const given = r.attention_factor;
  const attentionFactor = typeof given === 'number' ? given
    : typeof r.mscale === 'number' && typeof r.mscale_all_dim === 'number' && r.mscale && r.mscale_all_dim ? mscale(factor, r.mscale) / mscale(factor, r.mscale_all_dim) : mscale(factor);
  const num = (v: unknown, fallback: number) => (typeof v === 'number' && v ? v : fallback);
  return { type: 'yarn', factor, originalMaxPositionEmbeddings: original, betaFast: num(r.beta_fast, 32), betaSlow: num(r.beta_slow, 1), attentionFactor, truncate: r.truncate !== false };
}

/** YaRN's frequencies (transformers' _compute_yarn_parameters; llama.cpp's rope_yarn is the same mix). */
function yarnFrequencies(s: Extract<RopeScaling, { type: 'yarn' }>, theta: number, dim: number): Float64Array {
  // The pair index at which a wavelength makes `rotations` turns over the original context.
  const correction = (rotations: number) => (dim * Math.log(s.originalMaxPositionEmbeddings / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
  let low = correction(s.betaFast), high = correction(s.betaSlow);
  if (s.truncate) [low, high] = [Math.floor(low), Math.ceil(high)];
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  if (low === high) high += 0.001;
  return Float64Array.from({ length: dim / 2 }, (_, i) => {
    const kept = 1 - Math.min(1, Math.max(0, (i - low) / (high - low))); // 1: the frequency as it is; 0: interpolated
    const base = 1 / theta ** ((2 * i) / dim);
    return (base / s.factor) * (1 - kept) + base * kept;
  });
}

/** RoPE inverse frequencies [rotaryDim/2], with the config's scaling applied (as transformers does). */
export function ropeInverseFrequencies(config: ModelConfig): Float64Array {
  const dim = config.rotaryDim ?? config.headDim;
  const half = dim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / config.ropeTheta ** ((2 * i) / dim);
  const s = config.ropeScaling;
  if (s?.type === 'yarn') return yarnFrequencies(s, config.ropeTheta, dim);
  if (s?.type === 'linear') for (let i = 0; i < half; i++) inv[i]! /= s.factor;
  if (s?.type === 'longrope') for (let i = 0; i < half; i++) inv[i]! /= s.shortFactor[i]!;
  if (s?.type === 'llama3') {
    const lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wavelen = (2 * Math.PI) / inv[i]!;
      if (wavelen > lowWavelen) inv[i]! /= s.factor;
      else if (wavelen >= highWavelen) {
        const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        inv[i] = (1 - smooth) * (inv[i]! / s.factor) + smooth * inv[i]!;
      }
    }
  }
  return inv;
}
