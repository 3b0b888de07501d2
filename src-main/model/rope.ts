/**
 * Rotary position embedding (RoPE, rotate-half form, as Hugging Face's Llama and Qwen apply it,
 * or over adjacent pairs where the model says so: GLM-4's, ModelConfig.ropeInterleaved) for
 * ./decoder.ts, in one of two forms:
 *
 * - standard ops (every graph autodiff differentiates, and inference graphs on the CPU and CUDA):
 *   x·cos + rotate_half(x)·sin, with rotate_half from Split/Concat and its sign on the sin table,
 *   five nodes a call;
 * - ONNX Runtime's RotaryEmbedding contrib op (`fused`; inference graphs on WebGPU, where a
 *   decode step is bound by how many kernels it dispatches: docs/design.md §Devices, "Fewer
 *   kernels a decode step on WebGPU"), one kernel a call. It reads its cos/sin rows from a table
 *   by position; the table here holds one row per token of the batch (the same cos and sin of
 *   position·inv_freq the standard form computes), and each token's "position" is its own row,
 *   so padding-aware positions work as they do in the standard form.
 *
 * Both compute x₁·cos − x₂·sin and x₂·cos + x₁·sin per pair in fp32: the same values but for
 * rounding in the kernel's order of operations.
 */
import { GraphBuilder, f32Tensor, int, type Attr } from '../graph/ir.js';
import type { ModelConfig } from './model-config.js';
import { ropeInverseFrequencies } from './rope-config.js';

/** The per-token tables every layer shares; made once per graph by {@link ropeTables}. */
export type RopeTables =
  /** cos and signed sin [B, T, 1, rotaryDim]; the first rotaryDim of each head's headDim are turned */
  | { form: 'standard'; cos: string; signedSin: string; rotaryDim: number; interleaved: boolean }
  /** cos and sin [B·T, rotaryDim / 2], and each token's row in them, int64 [B, T] */
  | { form: 'fused'; cos: string; sin: string; rows: string; interleaved: boolean; rotaryDim: number };

/**
 * The RoPE tables for `positionIds` int64 [B, T], in the contrib op's form when `fused` (a partial
 * rotation, Phi-4-mini's and GLM-4's, as the op's `rotary_embedding_dim`). Cos and sin carry
 * LongRoPE's and YaRN's attention factor, as transformers multiplies them.
 */
export function ropeTables(b: GraphBuilder, config: ModelConfig, positionIds: string, headDim: number, fused = false): RopeTables {
  const rotaryDim = config.rotaryDim ?? headDim;
  const interleaved = config.ropeInterleaved ?? false;
  const invFreq = b.constant(f32Tensor([rotaryDim / 2], ropeInverseFrequencies(config)), 'inv_freq');
  const freqs = b.mul(b.unsqueeze(b.cast(positionIds, 'float32'), [-1]), invFreq); // [B, T, d/2]
  const s = config.ropeScaling;
  const factor = s?.type === 'longrope' || s?.type === 'yarn' ? s.attentionFactor : 1;
  const scaled = (table: string) => (factor === 1 ? table : b.mul(table, b.scalar(factor)));
  if (fused) {
    const flat = b.reshape(freqs, [-1, rotaryDim / 2]); // [B·T, d/2]
    const tokens = b.gather(b.shape(flat), b.scalar(0, 'int64'), 0);
    const tokenRows = b.range(b.scalar(0, 'int64'), tokens, b.scalar(1, 'int64'), ['N']);
    const [rows] = b.op('Reshape', [tokenRows, b.shape(positionIds)], {}, 1, [{ dtype: 'int64', shape: b.shapeOf(positionIds) }]);
    return { form: 'fused', cos: scaled(b.cos(flat)), sin: scaled(b.sin(flat)), rows: rows!, interleaved, rotaryDim };
  }
  // Rotate-half's tables hold [f₀…f₍d/2−1₎, f₀…f₍d/2−1₎]; interleaved ones [f₀, f₀, f₁, f₁, …].
  const twice = (x: string, y: string) => (interleaved ? b.reshape(b.concat([b.unsqueeze(x, [-1]), b.unsqueeze(y, [-1])], -1), [0, 0, rotaryDim]) : b.concat([x, y], -1));
  const halfCos = scaled(b.cos(freqs));
  const cos = b.unsqueeze(twice(halfCos, halfCos), [2]);
  // rotate_half(x)·sin = [−x₂, x₁]·[sin, sin] = [x₂, x₁]·[−sin, sin]: the sign rides on the
  // table, made once, instead of a Neg of x in every layer (the same values to the bit). The
  // same for pairs: (x₂ᵢ, x₂ᵢ₊₁) turns to (x₂ᵢ₊₁, x₂ᵢ)·(−sin, sin).
  const halfSin = scaled(b.sin(freqs));
  const signedSin = b.unsqueeze(twice(b.neg(halfSin), halfSin), [2]);
  return { form: 'standard', cos, signedSin, rotaryDim, interleaved };
}

/**
 * RoPE applied to x [B, T, heads, headDim]. `rows` narrows the tables to the rows x holds when
 * it is a cut of the batch's tokens (the last layer's output rows: a Slice along axis 1).
 */
export function applyRope(b: GraphBuilder, x: string, tables: RopeTables, heads: number, headDim: number, rows?: (value: string) => string): string {
  const cut = rows ?? ((value: string) => value);
  if (tables.form === 'fused') {
    const flat = b.reshape(x, [0, 0, heads * headDim]); // the op's [B, T, hidden] form
    // A partial rotation turns each head's first rotary_embedding_dim dimensions and passes the rest.
    const partial: Record<string, Attr> = tables.rotaryDim !== headDim ? { rotary_embedding_dim: int(tables.rotaryDim) } : {};
    const rotated = b.contribOp('RotaryEmbedding', [flat, cut(tables.rows), tables.cos, tables.sin], { num_heads: int(heads), interleaved: int(tables.interleaved ? 1 : 0), ...partial }, { dtype: 'float32', shape: b.shapeOf(flat) });
    return b.reshape(rotated, [0, 0, heads, headDim]);
  }
  const d = tables.rotaryDim;
  // A partial rotation turns the head's first d dimensions and passes the rest through.
  const [turned, passed] = d === headDim ? [x, undefined] : (b.split(x, -1, [d, headDim - d]) as [string, string]);
  const swapped = tables.interleaved ? swapPairs(b, turned, d) : swapHalves(b, turned, d);
  const rotated = b.add(b.mul(turned, cut(tables.cos)), b.mul(swapped, cut(tables.signedSin)));
  return passed ? b.concat([rotated, passed], -1) : rotated;
}

/** x's last axis [x₁, x₂] (halves of d) as [x₂, x₁]. */
function swapHalves(b: GraphBuilder, x: string, d: number): string {
  const [x1, x2] = b.split(x, -1, [d / 2, d / 2]) as [string, string];
  return b.concat([x2, x1], -1);
}

/** x's last axis (d values, [B, T, heads, d]) with each adjacent pair swapped: (x₂ᵢ₊₁, x₂ᵢ). */
function swapPairs(b: GraphBuilder, x: string, d: number): string {
  const [even, odd] = b.split(b.reshape(x, [0, 0, 0, d / 2, 2]), -1, [1, 1]) as [string, string];
  return b.reshape(b.concat([odd, even], -1), [0, 0, 0, d]);
}
