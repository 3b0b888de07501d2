/**
 * Activations and normalisers: the smooth and piecewise non-linearities, clamping, and the
 * (log-)softmax over one axis. Records as explained in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { attrInt, int } from '../ir-data.js';
import { likeInput, unaryOp, type OpRecord } from '../op-record.js';

export const Sigmoid = unaryOp('Sigmoid', ({ b, y, dy }) => [b.mul(dy[0]!, b.mul(y[0]!, b.sub(b.scalar(1), y[0]!)))]);
export const Tanh = unaryOp('Tanh', ({ b, y, dy }) => [b.mul(dy[0]!, b.sub(b.scalar(1), b.mul(y[0]!, y[0]!)))]);
export const Sin = unaryOp('Sin', ({ b, x, dy }) => [b.mul(dy[0]!, b.cos(x[0]!))]);
export const Cos = unaryOp('Cos', ({ b, x, dy }) => [b.neg(b.mul(dy[0]!, b.sin(x[0]!)))]);
export const Relu = unaryOp('Relu', ({ b, x, dy }) => [b.where(b.greater(x[0]!, b.scalar(0)), dy[0]!, b.scalar(0))]);
export const Abs = unaryOp('Abs', ({ b, x, dy }) => [
  b.mul(dy[0]!, b.op('Sign', [x[0]!], {}, 1, [{ dtype: b.dtypeOf(x[0]!), shape: b.shapeOf(x[0]!) }])[0]!),
]);

/** Clamps to [min, max]; either bound may be left out. */
export const Clip = {
  name: 'Clip',
  inferShape: likeInput,
  build: (b: GraphBuilder, x: string, min?: string, max?: string): string => b.apply(Clip, max ? [x, min ?? '', max] : min ? [x, min] : [x])[0]!,
  // Passes dy where min ≤ x ≤ max (inclusive, as torch.clamp does). The bounds get no gradient.
  gradient: ({ b, node, x, dy, needs }) => {
    if (needs(1) || needs(2)) throw new Error(`autodiff: Clip node ${node.name}: gradients of the bounds are not supported`);
    const lo = node.inputs[1], hi = node.inputs[2];
    const conds: string[] = [];
    if (lo) conds.push(b.op('GreaterOrEqual', [x[0]!, lo], {}, 1, [{ dtype: 'bool', shape: b.shapeOf(x[0]!) }])[0]!);
    if (hi) conds.push(b.lessOrEqual(x[0]!, hi));
    if (!conds.length) return [dy[0]];
    const inside = conds.reduce((p, q) => b.and(p, q));
    return [b.where(inside, dy[0]!, b.scalar(0))];
  },
} satisfies OpRecord;

export const Softmax = {
  name: 'Softmax',
  inferShape: likeInput,
  build: (b: GraphBuilder, x: string, axis = -1): string => b.apply(Softmax, [x], { axis: int(axis) })[0]!,
  // dx = y·(dy − Σ dy·y)
  gradient: ({ b, node, y, dy }) => {
    const axis = attrInt(node, 'axis', -1);
    return [b.mul(y[0]!, b.sub(dy[0]!, b.reduceSum(b.mul(dy[0]!, y[0]!), [axis], true)))];
  },
} satisfies OpRecord;

export const LogSoftmax = {
  name: 'LogSoftmax',
  inferShape: likeInput,
  build: (b: GraphBuilder, x: string, axis = -1): string => b.apply(LogSoftmax, [x], { axis: int(axis) })[0]!,
  // dx = dy − softmax·Σ dy
  gradient: ({ b, node, y, dy }) => {
    const axis = attrInt(node, 'axis', -1);
    return [b.sub(dy[0]!, b.mul(b.exp(y[0]!), b.reduceSum(dy[0]!, [axis], true)))];
  },
} satisfies OpRecord;
