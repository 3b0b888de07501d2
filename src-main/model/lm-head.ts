/**
 * The LM head of ./decoder.ts: its rows, [V, H] (the embedding when tied), and x·Wᵀ against them
 * without a transposed copy.
 */
import { int, type GraphBuilder } from '../graph/ir.js';
import { halfTable } from './half-matmul.js';
import type { WeightSource } from './weight-source.js';

/**
 * The LM head as a [V, H] matrix, one row per token, added to `b` if it is not there yet: the
 * embedding matrix itself when the head is tied (so the lookup and the head share one copy),
 * else `lm_head.weight` as stored (not transposed, unlike the head of {@link buildDecoder}).
 */
export function headRows(b: GraphBuilder, weights: WeightSource, half = false): string {
  const c = weights.config;
  const name = headName(weights);
  if (half) return halfTable(b, weights, name);
  return b.graph.initializers.has(name) ? name : b.initializer(name, weights.lazyFloat32(name, [c.vocabSize, c.hiddenSize]));
}

/** The checkpoint tensor holding the LM head's [V, H] rows: the embedding when tied. */
export function headName(weights: WeightSource): string {
  const c = weights.config;
  const tied = c.tieWordEmbeddings || !weights.has('lm_head.weight');
  if (tied && !c.tieWordEmbeddings) weights.lazyFloat32('lm_head.weight', [c.vocabSize, c.hiddenSize]); // throws: names the tensor
  return tied ? 'model.embed_tokens.weight' : 'lm_head.weight';
}

/**
 * x·Wᵀ for the head's rows W [V, H], as Gemm with transB on 2-D rows (x is [B, H] or [B, T, H]):
 * no transposed copy of the head is made (ONNX Runtime would fold a Transpose of the
 * embedding into a second copy), so every session reads the one stored matrix (docs/design.md §Memory).
 */
export function applyHead(b: GraphBuilder, x: string, rows: string, vocabSize: number): string {
  const shape = b.shapeOf(x)!;
  const f32 = (s: (string | number)[]) => [{ dtype: 'float32' as const, shape: s }];
  if (shape.length === 2) return b.op('Gemm', [x, rows], { transB: int(1) }, 1, f32([shape[0]!, vocabSize]))[0]!;
  const flat = b.reshape(x, [-1, shape.at(-1) as number]);
  const logits = b.op('Gemm', [flat, rows], { transB: int(1) }, 1, f32([b.shapeOf(flat)![0]!, vocabSize]))[0]!;
  const target = b.concat([b.slice(b.shape(x), [0], [shape.length - 1], [0]), b.int64s([vocabSize])], 0);
  return b.reshapeTo(logits, target, [...shape.slice(0, -1), vocabSize]);
}
