/**
 * Ops that change only the shape of a tensor (reshape, transpose, add or drop unit axes,
 * broadcast) and ops that make shapes and index ranges. Records as explained in
 * ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { attrInts, int, ints, normAxis, numel, type Shape } from '../ir-data.js';
import { NOT_DIFFERENTIABLE, nonDifferentiable, rankOf, type GradRule, type OpRecord } from '../op-record.js';
import { shapeValue } from '../gradient-shapes.js';

/** The gradient of a value that only changed shape: reshape back to the input's shape. */
const reshapeBack: GradRule = ({ b, x, dy }) => [b.reshapeTo(dy[0]!, shapeValue(b, x[0]!), b.shapeOf(x[0]!))];

/**
 * Reshape to a target: a literal list (0 copies the input dim, -1 is inferred) or a run-time
 * int64 [rank] value, whose result shape only the caller can tell (`shape`).
 */
export const Reshape = {
  name: 'Reshape',
  inferShape: ([x, target], _, freshDim) => {
    const s = x!.shape;
    let shape: Shape | undefined;
    if (s && target!.ints) {
      shape = target!.ints.map((d, i) => (d === 0 ? s[i]! : d));
      const minus = shape.indexOf(-1);
      if (minus >= 0) {
        const known = shape.filter((d, i) => i !== minus);
        const allStatic = s.every((d) => typeof d === 'number') && known.every((d) => typeof d === 'number');
        shape[minus] = allStatic ? numel(s as number[]) / numel(known as number[]) : freshDim();
      }
    }
    return [{ dtype: x!.dtype, shape }];
  },
  build: (b: GraphBuilder, x: string, target: number[] | string, shape?: Shape): string =>
    b.apply(Reshape, [x, target], {}, typeof target === 'string' ? { shape } : {})[0]!,
  gradient: reshapeBack,
} satisfies OpRecord;

export const Transpose = {
  name: 'Transpose',
  inferShape: ([x], attrs) => {
    const s = x!.shape, perm = attrs.perm?.kind === 'ints' ? attrs.perm.value : undefined;
    return [{ dtype: x!.dtype, shape: s && perm && perm.map((p) => s[p]!) }];
  },
  build: (b: GraphBuilder, x: string, perm: number[]): string => b.apply(Transpose, [x], { perm: ints(perm) })[0]!,
  gradient: ({ b, node, x, dy }) => {
    const rank = rankOf(b, x[0]!, node);
    const perm = attrInts(node, 'perm', Array.from({ length: rank }, (_, i) => rank - 1 - i));
    const inverse = new Array<number>(rank);
    perm.forEach((p, i) => (inverse[p] = i));
    return [b.transpose(dy[0]!, inverse)];
  },
} satisfies OpRecord;

/** Inserts unit axes at `axes` (positions in the result). */
export const Unsqueeze = {
  name: 'Unsqueeze',
  inferShape: ([x, axes]) => {
    const s = x!.shape;
    let shape: Shape | undefined;
    if (s && axes!.ints) {
      const rank = s.length + axes!.ints.length;
      const ax = new Set(axes!.ints.map((a) => normAxis(a, rank)));
      const rest = [...s];
      shape = Array.from({ length: rank }, (_, i) => (ax.has(i) ? 1 : rest.shift()!));
    }
    return [{ dtype: x!.dtype, shape }];
  },
  build: (b: GraphBuilder, x: string, axes: number[]): string => b.apply(Unsqueeze, [x, axes])[0]!,
  gradient: reshapeBack,
} satisfies OpRecord;

/** Drops the unit axes at `axes`. */
export const Squeeze = {
  name: 'Squeeze',
  inferShape: ([x, axes]) => {
    const s = x!.shape;
    const ax = s && axes!.ints && new Set(axes!.ints.map((a) => normAxis(a, s.length)));
    return [{ dtype: x!.dtype, shape: s && ax ? s.filter((_, i) => !ax.has(i)) : undefined }];
  },
  build: (b: GraphBuilder, x: string, axes: number[]): string => b.apply(Squeeze, [x, axes])[0]!,
  gradient: reshapeBack,
} satisfies OpRecord;

/** To 2-D: the dims before `axis` times each other, and the rest. */
export const Flatten = {
  name: 'Flatten',
  inferShape: ([x], attrs, freshDim) => {
    const s = x!.shape;
    if (!s) return [{ dtype: x!.dtype }];
    const axis = normAxis(attrs.axis?.kind === 'int' ? attrs.axis.value : 1, s.length);
    const product = (dims: Shape) => (dims.every((d) => typeof d === 'number') ? numel(dims as number[]) : freshDim());
    return [{ dtype: x!.dtype, shape: [product(s.slice(0, axis)), product(s.slice(axis))] }];
  },
  build: (b: GraphBuilder, x: string, axis = 1): string => b.apply(Flatten, [x], { axis: int(axis) })[0]!,
  gradient: reshapeBack,
} satisfies OpRecord;

/** Broadcasts to a run-time shape value; only the caller can tell the result's shape. */
export const Expand = {
  name: 'Expand',
  inferShape: ([x]) => [{ dtype: x!.dtype }],
  build: (b: GraphBuilder, x: string, shapeValue: string, shape?: Shape): string => b.apply(Expand, [x, shapeValue], {}, { shape })[0]!,
  gradient: ({ dy, reduce }) => [reduce(dy[0]!, 0)],
} satisfies OpRecord;

/** A value's shape as an int64 [rank] tensor. */
export const ShapeOf = {
  name: 'Shape',
  inferShape: ([x]) => [{ dtype: 'int64', shape: x!.shape ? [x!.shape.length] : undefined }],
  build: (b: GraphBuilder, x: string): string => b.apply(ShapeOf, [x])[0]!,
  gradient: NOT_DIFFERENTIABLE,
} satisfies OpRecord;

/** Range(start, limit, delta) over scalar values of one dtype; only the caller can tell its length. */
export const Range = {
  name: 'Range',
  inferShape: ([start]) => [{ dtype: start!.dtype }],
  build: (b: GraphBuilder, start: string, limit: string, delta: string, shape?: Shape): string =>
    b.apply(Range, [start, limit, delta], {}, { shape })[0]!,
  gradient: NOT_DIFFERENTIABLE,
} satisfies OpRecord;

/** Written only as raw nodes (gradient rules, samplers), but known to carry no gradient. */
export const OTHER_SHAPES_AND_SOURCES = nonDifferentiable(
  'Size', 'ConstantOfShape', 'Constant', 'RandomNormal', 'RandomUniform', 'RandomNormalLike', 'RandomUniformLike',
);
