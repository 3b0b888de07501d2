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

/** The index of a dim of `v` only known at run time, or -1 when every dim is a number (or none is known). */
const symbolicDim = (b: GraphBuilder, v: string) => b.shapeOf(v)?.findIndex((d) => typeof d !== 'number') ?? -1;

/**
 * int64 [1] holding 0, made at run time from the dims of `values`, never their data: whatever
 * uses it waits until every one of them exists. ONNX Runtime orders nodes by their inputs, so this
 * is how a graph says "after these" (the vocabulary chunks of ../../model/chunked-head.ts, the
 * dequantisation of ./quantized.ts; ../recompute.ts uses {@link deviceZeroAfter}). The zero lives
 * in host memory, for inputs read on the host (Slice's starts).
 *
 * It reads a symbolic dim with Shape(start, end): every provider runs Shape on the host from the
 * tensor's dims, so a GPU waits for nothing. Size orders the same on the CPU and CUDA, but WebGPU
 * has no Size kernel: ONNX Runtime runs it on the CPU after copying the whole tensor to the host,
 * a readback that waits for the GPU's queue to drain (37 in a training step at the 68M shape,
 * bench/ort-profile.ts). A value whose dims are all numbers still gets Size: ONNX Runtime folds a
 * Shape of static dims into a constant, which would drop the ordering.
 */
export function zeroAfter(b: GraphBuilder, values: string[]): string {
  const zeros = values.map((v) => {
    const dim = symbolicDim(b, v);
    const size = dim >= 0
      ? b.op('Shape', [v], { start: int(dim), end: int(dim + 1) }, 1, [{ dtype: 'int64', shape: [1] }])[0]!
      : b.unsqueeze(b.op('Size', [v], {}, 1, [{ dtype: 'int64', shape: [] }])[0]!, [0]);
    return b.sub(size, size);
  });
  return zeros.reduce((acc, z) => b.add(acc, z));
}

/**
 * float32 [] holding 0, made after every value of `values` exists, where they are (for a sum that
 * stays on the device). The ones with a symbolic dim go through {@link zeroAfter}; for the ones
 * whose dims are all numbers (a LoRA weight's gradient, which ../recompute.ts waits for: 14 a
 * layer with all seven targets) the zero is clip(v₀, 0, 0) of each one's first element, on the
 * device, so WebGPU reads none of them back (Size would copy each to the host). A NaN first
 * element gives NaN, where the gradient is not finite anyway.
 */
export function deviceZeroAfter(b: GraphBuilder, values: string[]): string {
  const symbolic = values.filter((v) => symbolicDim(b, v) >= 0), fixed = values.filter((v) => symbolicDim(b, v) < 0);
  const parts: string[] = [];
  if (symbolic.length) parts.push(b.cast(b.squeeze(zeroAfter(b, symbolic), [0]), 'float32'));
  if (fixed.length) {
    const firsts = fixed.map((v) => {
      const first = b.slice(b.reshape(v, [-1]), [0], [1], [0]);
      return b.dtypeOf(first) === 'float32' ? first : b.cast(first, 'float32');
    });
    const zeros = b.clip(firsts.length > 1 ? b.concat(firsts, 0) : firsts[0]!, b.scalar(0), b.scalar(0));
    parts.push(b.op('ReduceSum', [zeros], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!);
  }
  return parts.reduce((acc, z) => b.add(acc, z));
}

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
