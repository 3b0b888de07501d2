/**
 * Matrix product with NumPy semantics: batch dims broadcast, the last two contract. The
 * record as explained in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { broadcastShapes, int, type Shape } from '../ir-data.js';
import { rankOf, type OpRecord } from '../op-record.js';

/** Swaps the last two axes. */
function transposeLast2(b: GraphBuilder, v: string, rank: number): string {
  const perm = Array.from({ length: rank }, (_, i) => i);
  [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1]!, perm[rank - 2]!];
  return b.transpose(v, perm);
}

/**
 * dA = dC·Wᵀ for a 2-D W (a weight shared by every row), as Gemm with transB over dC's rows.
 * Written as MatMul(dC, Transpose(W)), ONNX Runtime folds the Transpose of a constant weight
 * into a second, transposed copy of it: one more copy of every frozen linear in the training
 * step (docs/design.md §Memory). Gemm reads W as it is.
 */
function productWithTransposedWeight(b: GraphBuilder, g: string, a: string, w: string): string {
  const shapeA = b.shapeOf(a), [K, N] = b.shapeOf(w)! as [number | string, number];
  const rows = b.reshape(g, [-1, N]);
  const rowCount = b.shapeOf(rows)?.[0] ?? 'rows';
  const product = b.op('Gemm', [rows, w], { transB: int(1) }, 1, [{ dtype: b.dtypeOf(a) ?? 'float32', shape: [rowCount, K] }])[0]!;
  return b.reshapeTo(product, b.shape(a), shapeA);
}

export const MatMul = {
  name: 'MatMul',
  inferShape: ([a, c]) => {
    const sa = a!.shape, sb = c!.shape;
    let shape: Shape | undefined;
    if (sa && sb && sa.length >= 2 && sb.length >= 2) {
      const batch = broadcastShapes(sa.slice(0, -2), sb.slice(0, -2))!;
      shape = [...batch, sa[sa.length - 2]!, sb[sb.length - 1]!];
    } else if (sa && sb && sb.length === 1) shape = sa.slice(0, -1);
    return [{ dtype: a!.dtype, shape }];
  },
  build: (b: GraphBuilder, a: string, c: string): string => b.apply(MatMul, [a, c])[0]!,

  // C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC, each summed over broadcast batch dims.
  gradient: ({ b, node, x: [a, w], dy, needs, reduce }) => {
    const ra = rankOf(b, a!, node), rb = rankOf(b, w!, node);
    if (ra < 2 || rb < 2) throw new Error(`autodiff: MatMul node ${node.name} with a 1-D operand has no gradient rule`);
    const g = dy[0]!;
    const product = (p: string, q: string) => {
      const v = b.matmul(p, q);
      return { v, shape: b.shapeOf(v) };
    };
    let dA: string | undefined;
    if (needs(0) && rb === 2 && typeof b.shapeOf(w!)?.[1] === 'number') {
      dA = productWithTransposedWeight(b, g, a!, w!);
    } else if (needs(0)) {
      const { v, shape } = product(g, transposeLast2(b, w!, rb));
      dA = reduce(v, 0, shape);
    }
    let dB: string | undefined;
    if (needs(1)) {
      const K = b.shapeOf(a!)![ra - 1], N = b.shapeOf(w!)![rb - 1];
      if (rb === 2 && ra > 2 && typeof K === 'number' && typeof N === 'number') {
        // A weight shared by every row: one [K, rows]·[rows, N] product, not a batch then a sum.
        dB = b.matmul(b.transpose(b.reshape(a!, [-1, K]), [1, 0]), b.reshape(g, [-1, N]));
      } else {
        const { v, shape } = product(transposeLast2(b, a!, ra), g);
        dB = reduce(v, 1, shape);
      }
    }
    return [dA, dB];
  },
} satisfies OpRecord;
