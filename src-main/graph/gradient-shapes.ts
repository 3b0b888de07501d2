/**
 * Shape plumbing for gradient rules: summing a broadcast gradient back to an input's shape,
 * zeros of a value's shape, and "this value's shape" as a static constant or a Shape op.
 *
 * Static shapes are used wherever the IR knows them, so ONNX Runtime sees constants; a dim the
 * IR only knows symbolically ('B', 'T', a fresh 'dim_7') falls back to Shape-based ops that
 * work out the same thing at run time.
 */
import type { GraphBuilder } from './ir.js';
import { f32Tensor, int, type Dim, type Shape, type Tensor } from './ir-data.js';

export const isStatic = (s: Shape | undefined): s is number[] => !!s && s.every((d) => typeof d === 'number');

/** An int64 [rank] value holding `x`'s shape: a constant when static, else Shape(x). */
export function shapeValue(b: GraphBuilder, x: string): string {
  const s = b.shapeOf(x);
  return isStatic(s) ? b.int64s(s) : b.shape(x);
}

const zeroTensor = (): Tensor => f32Tensor([1], [0]);

/** Float zeros with `like`'s shape. */
export function zerosLike(b: GraphBuilder, like: string): string {
  return b.op('ConstantOfShape', [shapeValue(b, like)], { value: { kind: 'tensor', value: zeroTensor() } }, 1, [
    { dtype: 'float32', shape: b.shapeOf(like) },
  ])[0]!;
}

/** Records what a gradient value is known to look like (only where the builder could not tell). */
export function describeAs(b: GraphBuilder, value: string, like: string): string {
  const info = b.graph.values.get(value);
  if (info && !info.shape) info.shape = b.shapeOf(like);
  if (info && !info.dtype) info.dtype = b.dtypeOf(like) ?? 'float32';
  return value;
}

/**
 * The axes of a gradient of shape `from` to sum so it takes the shape `to` (NumPy
 * broadcasting in reverse), or undefined when the static dims cannot tell (a symbolic dim
 * that might be 1 at run time).
 */
export function staticReduceAxes(from: Shape, to: Shape): number[] | undefined {
  const lead = from.length - to.length;
  if (lead < 0) return undefined;
  const axes: number[] = [];
  for (let i = 0; i < from.length; i++) {
    if (i < lead) {
      axes.push(i);
      continue;
    }
    const t: Dim = to[i - lead]!, f: Dim = from[i]!;
    if (t === f) continue;
    if (t === 1) axes.push(i); // summing a dim that is 1 at run time is harmless
    else if (typeof t === 'number') continue; // t > 1: broadcasting can only have kept it
    else if (f === 1) continue; // symbolic t broadcast to 1: t must be 1
    else return undefined; // symbolic t against another size: might be 1 or not
  }
  return axes;
}

/**
 * Sums `g` (the gradient of a broadcast result, shape `gShape`) down to the shape of input
 * `x`. Static where the shapes allow it, otherwise with Shape/NonZero ops computing the
 * reduced axes at run time.
 */
export function sumToShape(b: GraphBuilder, g: string, gShape: Shape | undefined, x: string): string {
  const xs = b.shapeOf(x);
  if (xs && gShape) {
    const axes = staticReduceAxes(gShape, xs);
    if (axes) {
      if (axes.length === 0) return g;
      const lead = gShape.length - xs.length;
      let r = b.reduceSum(g, axes, true);
      if (lead > 0) r = b.squeeze(r, Array.from({ length: lead }, (_, i) => i));
      return describeAs(b, r, x);
    }
  }
  return describeAs(b, dynamicSumToShape(b, g, x), x);
}

/**
 * Run-time version: pad x's shape with leading 1s to g's rank, reduce every axis where that
 * padded shape is 1 and g's is not, then reshape to x's shape.
 */
function dynamicSumToShape(b: GraphBuilder, g: string, x: string): string {
  const gShape = b.shape(g);
  const xShape = b.shape(x);
  const one = b.int64s([1]);
  const extra = b.sub(b.op('Size', [gShape], {}, 1, [{ dtype: 'int64', shape: [] }])[0]!, b.op('Size', [xShape], {}, 1, [{ dtype: 'int64', shape: [] }])[0]!);
  const ones = b.op('ConstantOfShape', [b.unsqueeze(extra, [0])], { value: { kind: 'tensor', value: { dtype: 'int64', dims: [1], data: BigInt64Array.of(1n) } } }, 1, [{ dtype: 'int64', shape: ['R'] }])[0]!;
  const padded = b.concat([ones, xShape], 0);
  const reduce = b.and(b.equal(padded, one), b.not(b.equal(gShape, one)));
  const axes = b.reshape(b.op('NonZero', [reduce], {}, 1, [{ dtype: 'int64', shape: [1, 'N'] }])[0]!, [-1]);
  const summed = b.op('ReduceSum', [g, axes], { keepdims: int(1), noop_with_empty_axes: int(1) }, 1, [{ dtype: b.dtypeOf(g) }])[0]!;
  return b.reshapeTo(summed, xShape, b.shapeOf(x));
}
