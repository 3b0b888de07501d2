/**
 * Rotary position embedding (RoPE) in the graph IR: each head's vector x = [x₁, x₂] (halves)
 * becomes [x₁·cos − x₂·sin, x₂·cos + x₁·sin], the angles being position × the checkpoint's
 * inverse frequencies (Hugging Face's rotate_half form). Two forms give the same values:
 * - standard ops, x·cos + rotate_half(x)·sin, which autodiff differentiates (the training step);
 * - ONNX Runtime's RotaryEmbedding, one node per use, for graphs that are only run
 *   (docs/design.md §Scoring, "Attention in an inference graph").
 * The angles are computed in the graph from position_ids, upstream of every weight, so autodiff
 * prunes them.
 */
import { f32Tensor, int, type GraphBuilder } from '../graph/ir.js';
import { ropeInverseFrequencies, type ModelConfig } from './hf-checkpoint.js';

/** Rotates x [B, T, heads, headDim] by its tokens' positions. */
export type Rope = (x: string, heads: number) => string;

/** The RoPE for `positionIds` [B, T] (int64); `inference`: as ONNX Runtime's contrib op. */
export function rotaryEmbedding(b: GraphBuilder, config: ModelConfig, positionIds: string, inference: boolean): Rope {
  const invFreq = b.constant(f32Tensor([config.headDim / 2], ropeInverseFrequencies(config)), 'inv_freq');
  return inference ? fusedRope(b, config, positionIds, invFreq) : standardRope(b, config, positionIds, invFreq);
}

function standardRope(b: GraphBuilder, config: ModelConfig, positionIds: string, invFreq: string): Rope {
  const half = config.headDim / 2;
  // cos/sin tables [B, T, 1, headDim], shared by every layer.
  const freqs = b.mul(b.unsqueeze(b.cast(positionIds, 'float32'), [-1]), invFreq);
  const angles = b.unsqueeze(b.concat([freqs, freqs], -1), [2]);
  const cos = b.cos(angles), sin = b.sin(angles);
  return (x) => {
    const [x1, x2] = b.split(x, -1, [half, half]) as [string, string];
    const rotated = b.concat([b.neg(x2), x1], -1);
    return b.add(b.mul(x, cos), b.mul(rotated, sin));
  };
}

/**
 * RotaryEmbedding reads cos/sin tables [rows, headDim / 2] by each token's row index. The table
 * has one row per token of the run (row i: the i-th of position_ids, flattened), and the op
 * reads row i for token i: the tables are B·T rows, as the standard form's, rather than one row
 * per position up to the largest (a decode step at 8,000 tokens would compute 8,000 rows per
 * token). The angles are the same float32 products as the standard form's.
 */
function fusedRope(b: GraphBuilder, config: ModelConfig, positionIds: string, invFreq: string): Rope {
  const int64 = (value: number) => b.scalar(value, 'int64');
  const flat = b.reshape(b.cast(positionIds, 'float32'), [-1]); // [B·T]
  const angles = b.mul(b.unsqueeze(flat, [-1]), invFreq); // [B·T, headDim / 2]
  const cos = b.cos(angles), sin = b.sin(angles);
  const tokens = b.gather(b.shape(flat), int64(0), 0);
  const rowOfToken = b.reshapeTo(b.range(int64(0), tokens, int64(1), ['rope_rows']), b.shape(positionIds), b.shapeOf(positionIds));
  const d = config.headDim;
  return (x, heads) => {
    const rows = b.reshape(x, [0, 0, heads * d]);
    const rotated = b.contribOp('RotaryEmbedding', [rows, rowOfToken, cos, sin], { num_heads: int(heads), interleaved: int(0) }, { dtype: 'float32', shape: b.shapeOf(rows) });
    return b.reshape(rotated, [0, 0, heads, d]);
  };
}
