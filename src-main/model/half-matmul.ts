/**
 * A frozen projection in half precision (docs/design.md §Precision): x · Wᵀ with W stored as an
 * fp16 initializer `<name>.T.fp16` ([in, out], converted from the checkpoint's fp32 when the
 * session is made; the fp32 copy is not kept), the input cast down and the product cast back up
 * to fp32, so what surrounds it (LoRA, norms, attention, the head) stays fp32. Its gradient is
 * autodiff's Cast and MatMul rules: the transposed fp16 product, no fp32 copy of W.
 */
import type { GraphBuilder } from '../graph/ir.js';
import type { WeightSource } from './weight-source.js';
import { float32ToFp16 } from './safetensors.js';

export function halfPrecisionMatmul(b: GraphBuilder, x: string, weights: WeightSource, name: string, outF: number, inF: number): string {
  const key = `${name}.T.fp16`;
  if (!b.graph.initializers.has(key)) {
    const fp32 = weights.lazyFloat32(name, [outF, inF], true);
    const read = fp32.data;
    const data = () => float32ToFp16((typeof read === 'function' ? read() : read) as Float32Array);
    b.initializer(key, { dtype: 'float16', dims: fp32.dims, data });
  }
  return b.cast(b.matmul(b.cast(x, 'float16'), key), 'float32');
}
