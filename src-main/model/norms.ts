/**
 * RMSNorm for ./decoder.ts, in one of two forms:
 *
 * - standard ops (every graph autodiff differentiates, and inference graphs on the CPU and CUDA):
 *   x · 1/√(mean x² + ε) · w from Mul, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul;
 * - ONNX Runtime's fused ops (`fused`: inference graphs on WebGPU, where a decode step is bound
 *   by how many kernels it dispatches; docs/design.md §Devices, "Fewer kernels a decode step on
 *   WebGPU"): SimplifiedLayerNormalization, one kernel; and where the norm follows a residual add
 *   (h + Δ, then the norm), SkipSimplifiedLayerNormalization, which also returns the sum: the add
 *   and the norm in one kernel.
 */
import { CONTRIB_DOMAIN, float, int, type GraphBuilder } from '../graph/ir.js';

export interface NormBuilders {
  /** RMSNorm of x over its last axis ([…, dim]) with the weight named `weightName`. */
  rmsNorm(x: string, weightName: string, dim: number): string;
  /** h + delta, and the RMSNorm of that sum. */
  addNorm(h: string, delta: string, weightName: string, dim: number): { sum: string; normed: string };
  /** Whether addNorm is one op, so the decoder may carry a layer's last residual add into the next layer's first norm. */
  fusesResidual: boolean;
}

export function normBuilders(b: GraphBuilder, eps: number, weight: (name: string, shape: number[]) => string, fused: boolean): NormBuilders {
  const rmsNorm = (x: string, weightName: string, dim: number) => {
    if (fused) return b.op('SimplifiedLayerNormalization', [x, weight(weightName, [dim])], { axis: int(-1), epsilon: float(eps), stash_type: int(1) }, 1, [{ dtype: 'float32', shape: b.shapeOf(x) }])[0]!;
    const inv = b.reciprocal(b.sqrt(b.add(b.reduceMean(b.mul(x, x), [-1], true), b.scalar(eps)))); // 1 / √(mean x² + ε)
    return b.mul(b.mul(x, inv), weight(weightName, [dim]));
  };
  const addNorm = (h: string, delta: string, weightName: string, dim: number) => {
    if (!fused) {
      const sum = b.add(h, delta);
      return { sum, normed: rmsNorm(sum, weightName, dim) };
    }
    // Outputs: the norm, the mean and 1/σ (left out: empty names), and input + skip.
    const info = { dtype: 'float32' as const, shape: b.shapeOf(h) };
    const [normed, , , sum] = b.op('SkipSimplifiedLayerNormalization', [h, delta, weight(weightName, [dim])], { epsilon: float(eps) }, [b.fresh('skip_norm'), '', '', b.fresh('skip_sum')], [info, {}, {}, info], CONTRIB_DOMAIN);
    return { sum: sum!, normed: normed! };
  };
  return { rmsNorm, addNorm, fusesResidual: fused };
}
