/**
 * Arithmetic: the element-wise ops of school algebra, their select-the-larger cousins, and
 * the dtype plumbing (Identity, Cast). Records as explained in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { ONNX_DTYPE, dtypeOfCode, int, type DType } from '../ir-data.js';
import { binaryOp, unaryOp, type GradRule, type OpRecord } from '../op-record.js';

export const Identity = unaryOp('Identity', ({ dy }) => [dy[0]]);
export const Neg = unaryOp('Neg', ({ b, dy }) => [b.neg(dy[0]!)]);
export const Exp = unaryOp('Exp', ({ b, y, dy }) => [b.mul(dy[0]!, y[0]!)]);
export const Log = unaryOp('Log', ({ b, x, dy }) => [b.div(dy[0]!, x[0]!)]);
export const Sqrt = unaryOp('Sqrt', ({ b, y, dy }) => [b.div(b.mul(dy[0]!, b.scalar(0.5)), y[0]!)]);
export const Reciprocal = unaryOp('Reciprocal', ({ b, y, dy }) => [b.neg(b.mul(dy[0]!, b.mul(y[0]!, y[0]!)))]);

export const Add = binaryOp('Add', ({ dy, needs, reduce }) => [needs(0) ? reduce(dy[0]!, 0) : undefined, needs(1) ? reduce(dy[0]!, 1) : undefined]);
export const Sub = binaryOp('Sub', ({ b, dy, needs, reduce }) => [reduce(dy[0]!, 0), needs(1) ? reduce(b.neg(dy[0]!), 1) : undefined]);
export const Mul = binaryOp('Mul', ({ b, x, dy, needs, reduce }) => [
  needs(0) ? reduce(b.mul(dy[0]!, x[1]!), 0) : undefined,
  needs(1) ? reduce(b.mul(dy[0]!, x[0]!), 1) : undefined,
]);
// d(a/b) = da/b − (a/b)·db/b
export const Div = binaryOp('Div', ({ b, x, y, dy, needs, reduce }) => [
  needs(0) ? reduce(b.div(dy[0]!, x[1]!), 0) : undefined,
  needs(1) ? reduce(b.neg(b.div(b.mul(dy[0]!, y[0]!), x[1]!)), 1) : undefined,
]);
// d(aᵇ) = b·aᵇ⁻¹·da + aᵇ·ln(a)·db
export const Pow = binaryOp('Pow', ({ b, x, y, dy, needs, reduce }) => [
  needs(0) ? reduce(b.mul(b.mul(dy[0]!, x[1]!), b.pow(x[0]!, b.sub(x[1]!, b.scalar(1)))), 0) : undefined,
  needs(1) ? reduce(b.mul(b.mul(dy[0]!, y[0]!), b.log(x[0]!)), 1) : undefined,
]);

/** Min / Max (variadic): each input whose value is the result gets dy, ties share it evenly. */
const selectGrad: GradRule = ({ b, x, y, dy, needs, reduce }) => {
  const masks = x.map((xi) => b.cast(b.equal(xi, y[0]!), 'float32'));
  const count = masks.reduce((acc, m) => b.add(acc, m));
  const share = b.div(dy[0]!, count);
  return x.map((_, k) => (needs(k) ? reduce(b.mul(share, masks[k]!), k) : undefined));
};
export const Min = binaryOp('Min', selectGrad);
export const Max = binaryOp('Max', selectGrad);

export const Cast = {
  name: 'Cast',
  inferShape: ([x], attrs) => [{ dtype: attrs.to?.kind === 'int' ? dtypeOfCode(attrs.to.value) : undefined, shape: x!.shape }],
  build: (b: GraphBuilder, x: string, to: DType): string => b.apply(Cast, [x], { to: int(ONNX_DTYPE[to]) })[0]!,
  gradient: ({ b, x, dy }) => [b.dtypeOf(x[0]!) === b.dtypeOf(dy[0]!) ? dy[0] : b.cast(dy[0]!, b.dtypeOf(x[0]!) ?? 'float32')],
} satisfies OpRecord;
