/**
 * Reductions over constant axes (opset 18: the axes are an int64 input). Records as explained
 * in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { attrInt, int, normAxis, type Node, type Shape } from '../ir-data.js';
import { constInts, type GradRule, type ShapeRule } from '../op-record.js';
import { shapeValue } from '../gradient-shapes.js';

/** Drops the reduced axes, or keeps them as 1s. */
const reducedShape: ShapeRule = ([x, axes], attrs) => {
  const s = x!.shape;
  let shape: Shape | undefined;
  if (s && axes?.ints) {
    const ax = new Set(axes.ints.map((a) => normAxis(a, s.length)));
    const keepdims = attrs.keepdims?.kind !== 'int' || attrs.keepdims.value === 1;
    shape = keepdims ? s.map((d, i) => (ax.has(i) ? 1 : d)) : s.filter((_, i) => !ax.has(i));
  }
  return [{ dtype: x!.dtype, shape }];
};

/** Gradient of a Reduce{Sum,Mean}: broadcast dy back over the reduced axes. */
function reduceGrad(mean: boolean): GradRule {
  return ({ b, node, x, y, dy }) => {
    const axesInput = node.inputs[1] || undefined;
    const keepdims = attrInt(node, 'keepdims', 1) === 1;
    let g = mean ? b.mul(dy[0]!, meanFactor(b, node, x[0]!, y[0]!)) : dy[0]!; // scaled while still small
    // keepdims=0 removed the axes; put them back as 1s (reduce-all yields a scalar, which Expand broadcasts).
    if (!keepdims && axesInput) g = b.op('Unsqueeze', [g, axesInput], {}, 1, [{ dtype: b.dtypeOf(g) }])[0]!;
    return [b.expand(g, shapeValue(b, x[0]!), b.shapeOf(x[0]!))];
  };
}

/** 1 / (number of reduced elements): a constant when those dims are static, else Size(y) / Size(x). */
function meanFactor(b: GraphBuilder, node: Node, x: string, y: string): string {
  const xs = b.shapeOf(x);
  const axes = node.inputs[1] ? constInts(b, node.inputs[1]) : xs?.map((_, i) => i);
  const reduced = xs && axes?.map((a) => xs[normAxis(a, xs.length)]);
  if (reduced?.every((d) => typeof d === 'number')) return b.scalar(1 / (reduced as number[]).reduce((p, d) => p * d, 1));
  const size = (v: string) => b.cast(b.op('Size', [v], {}, 1, [{ dtype: 'int64', shape: [] }])[0]!, 'float32');
  return b.div(size(y), size(x));
}

function reduceOp(name: string, gradient: GradRule) {
  const op = {
    name,
    inferShape: reducedShape,
    build: (b: GraphBuilder, x: string, axes: number[], keepdims = true): string => b.apply(op, [x, axes], { keepdims: int(keepdims ? 1 : 0) })[0]!,
    gradient,
  };
  return op;
}

export const ReduceSum = reduceOp('ReduceSum', reduceGrad(false));
export const ReduceMean = reduceOp('ReduceMean', reduceGrad(true));
