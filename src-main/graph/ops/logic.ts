/**
 * Comparisons, boolean logic and selection. Comparisons and logic make masks (bool), so they
 * carry no gradient; Where routes dy to the branch each element came from. Records as
 * explained in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { broadcastShapes } from '../ir-data.js';
import { NOT_DIFFERENTIABLE, binaryOp, nonDifferentiable, unaryOp, type OpRecord } from '../op-record.js';

export const Equal = binaryOp('Equal', NOT_DIFFERENTIABLE, 'bool');
export const Less = binaryOp('Less', NOT_DIFFERENTIABLE, 'bool');
export const LessOrEqual = binaryOp('LessOrEqual', NOT_DIFFERENTIABLE, 'bool');
export const Greater = binaryOp('Greater', NOT_DIFFERENTIABLE, 'bool');
export const And = binaryOp('And', NOT_DIFFERENTIABLE, 'bool');
export const Not = unaryOp('Not', NOT_DIFFERENTIABLE);

/** Element-wise `cond ? a : b`, all three broadcast. */
export const Where = {
  name: 'Where',
  inferShape: ([cond, a, c]) => [{ dtype: a!.dtype, shape: broadcastShapes(broadcastShapes(cond!.shape, a!.shape), c!.shape) }],
  build: (b: GraphBuilder, cond: string, a: string, c: string): string => b.apply(Where, [cond, a, c])[0]!,
  gradient: ({ b, x, dy, needs, reduce }) => {
    const zero = b.scalar(0);
    return [
      undefined,
      needs(1) ? reduce(b.where(x[0]!, dy[0]!, zero), 1) : undefined,
      needs(2) ? reduce(b.where(x[0]!, zero, dy[0]!), 2) : undefined,
    ];
  },
} satisfies OpRecord;

/** Written only as raw nodes (gradient rules, rounding), but known to carry no gradient. */
export const OTHER_MASKS_AND_ROUNDING = nonDifferentiable('GreaterOrEqual', 'Or', 'Xor', 'Sign', 'Floor', 'Ceil', 'Round');
