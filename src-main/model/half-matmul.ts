/**
 * A frozen projection in half precision (docs/design.md §Precision): x · Wᵀ with W stored as an
 * fp16 initializer `<name>.T.fp16` ([in, out], converted from the checkpoint's fp32 when the
 * session is made; the fp32 copy is not kept), the input cast down and the product cast back up
 * to fp32, so what surrounds it (LoRA, norms, attention, the head) stays fp32. Its gradient is
 * the transposed fp16 product, scaled through fp16 (autodiff's halfProduct), no fp32 copy of W.
 */
import { tensorValues, type GraphBuilder, type Tensor } from '../graph/ir.js';
import type { WeightSource } from './weight-source.js';
import { float32ToFp16 } from './half.js';
import { halfProduct } from '../graph/autodiff.js';

export function halfPrecisionMatmul(b: GraphBuilder, x: string, weights: WeightSource, name: string, outF: number, inF: number): string {
  const key = `${name}.T.fp16`;
  if (!b.graph.initializers.has(key)) b.initializer(key, halfOf(weights.lazyFloat32(name, [outF, inF], true)));
  return halfProduct(b, x, key);
}

/** An fp32 tensor (lazy or not) as a lazy fp16 one: converted when read, the fp32 values not kept. */
export function halfOf(fp32: Tensor): Tensor {
  return { dtype: 'float16', dims: fp32.dims, data: () => float32ToFp16(tensorValues(fp32) as Float32Array) };
}

/** A [V, H] table (the embedding, the LM head's rows) as one fp16 initializer `<name>.fp16`, added once (docs/design.md §QLoRA). */
export function halfTable(b: GraphBuilder, weights: WeightSource, name: string): string {
  const key = `${name}.fp16`;
  if (b.graph.initializers.has(key)) return key;
  const shape = [weights.config.vocabSize, weights.config.hiddenSize];
  return b.initializer(key, weights.lazyFloat16?.(name, shape) ?? halfOf(weights.lazyFloat32(name, shape)));
}
