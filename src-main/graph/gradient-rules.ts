/**
 * Gradient rules, one per ONNX op type, in one table (tinygrad's gradient.py, ONNX Runtime's
 * gradient_builder.cc). A rule sees the forward node and the gradient of each of its outputs,
 * and returns the gradient of each input it is asked for: `(c) => [dA, dB]`. Inputs it is not
 * asked for (`c.needs(k)` false) may be left undefined, so integer inputs (indices, shapes,
 * axes) and frozen branches cost nothing.
 *
 * Conventions
 * - `c.x[k]` is input k, `c.y[k]` output k, `c.dy[k]` the gradient of output k (undefined
 *   when that output does not reach the loss; only multi-output ops ever see that).
 * - Element-wise rules return gradients with the broadcast shape of the output; the caller
 *   (`c.reduce`) sums them back to each input's shape.
 * - Formulas follow ONNX Runtime's gradient builder where it has one (Softmax, LogSoftmax,
 *   Gather, MatMul with broadcasting).
 *
 * Ops without a gradient path (Shape, Equal, Range, NonZero …) have no rule: the graph walk
 * never asks for one, because their outputs are integers or booleans. An op on a gradient path
 * with no rule is an error that names the node.
 *
 * Stop-gradient (torch's `.detach()`): an Identity node whose node name starts with
 * {@link STOP_GRADIENT} (made by `stopGradient` in ./gradients.ts). ONNX has no such op, and
 * at run time it is a plain Identity; the marker lives in the node name so it survives
 * serialisation and shows in graph viewers. The graph walk treats its output as a constant:
 * nothing downstream of it depends on the trained values through it, so no gradient flows
 * back across it and its Identity rule below is never called for it.
 */
import { GraphBuilder, attrInt, attrInts, int, str, tensorValues, type Node, type Shape } from './ir.js';
import { isStatic, shapeValue, sumToShape, zerosLike } from './shapes.js';

export interface GradContext {
  b: GraphBuilder;
  node: Node;
  x: string[];
  y: string[];
  /** Gradient of each output; for single-output ops dy[0] is always defined. */
  dy: (string | undefined)[];
  /** Whether input k needs a gradient. */
  needs(k: number): boolean;
  /**
   * Sums a gradient back to input k's shape (undoes broadcasting). The gradient is taken to
   * have output 0's shape unless `gShape` says otherwise.
   */
  reduce(g: string, k: number, gShape?: Shape): string;
}

export type GradRule = (c: GradContext) => (string | undefined)[];

/** Constant int64 values of an initializer input (axes, starts …), or undefined when not constant. */
export function constInts(b: GraphBuilder, name: string | undefined): number[] | undefined {
  if (!name) return undefined;
  const t = b.graph.initializers.get(name);
  if (!t) return undefined;
  return Array.from(tensorValues(t) as ArrayLike<number | bigint>, Number);
}

const rankOf = (b: GraphBuilder, v: string, node: Node): number => {
  const s = b.shapeOf(v);
  if (!s) throw new Error(`autodiff: the rank of '${v}' (input of ${node.op} node ${node.name}) is unknown`);
  return s.length;
};

/** Swaps the last two axes. */
function transposeLast2(b: GraphBuilder, v: string, rank: number): string {
  const perm = Array.from({ length: rank }, (_, i) => i);
  [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1]!, perm[rank - 2]!];
  return b.transpose(v, perm);
}

const normAxis = (axis: number, rank: number) => (axis < 0 ? axis + rank : axis);

/** The gradient of a value that only changed shape: reshape back to the input's shape. */
const reshapeBack: GradRule = ({ b, x, dy }) => [b.reshapeTo(dy[0]!, shapeValue(b, x[0]!), b.shapeOf(x[0]!))];

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

/** Min / Max (variadic): each input whose value is the result gets dy, ties share it evenly. */
const selectGrad: GradRule = ({ b, x, y, dy, needs, reduce }) => {
  const masks = x.map((xi) => b.cast(b.equal(xi, y[0]!), 'float32'));
  const count = masks.reduce((acc, m) => b.add(acc, m));
  const share = b.div(dy[0]!, count);
  return x.map((_, k) => (needs(k) ? reduce(b.mul(share, masks[k]!), k) : undefined));
};

export const GRADIENT_RULES: Record<string, GradRule> = {
  Identity: ({ dy }) => [dy[0]],
  Add: ({ dy, reduce }) => [reduce(dy[0]!, 0), reduce(dy[0]!, 1)],
  Sub: ({ b, dy, needs, reduce }) => [reduce(dy[0]!, 0), needs(1) ? reduce(b.neg(dy[0]!), 1) : undefined],
  Mul: ({ b, x, dy, needs, reduce }) => [
    needs(0) ? reduce(b.mul(dy[0]!, x[1]!), 0) : undefined,
    needs(1) ? reduce(b.mul(dy[0]!, x[0]!), 1) : undefined,
  ],
  // d(a/b) = da/b − (a/b)·db/b
  Div: ({ b, x, y, dy, needs, reduce }) => [
    needs(0) ? reduce(b.div(dy[0]!, x[1]!), 0) : undefined,
    needs(1) ? reduce(b.neg(b.div(b.mul(dy[0]!, y[0]!), x[1]!)), 1) : undefined,
  ],
  // d(aᵇ) = b·aᵇ⁻¹·da + aᵇ·ln(a)·db
  Pow: ({ b, x, y, dy, needs, reduce }) => [
    needs(0) ? reduce(b.mul(b.mul(dy[0]!, x[1]!), b.pow(x[0]!, b.sub(x[1]!, b.scalar(1)))), 0) : undefined,
    needs(1) ? reduce(b.mul(b.mul(dy[0]!, y[0]!), b.log(x[0]!)), 1) : undefined,
  ],
  Neg: ({ b, dy }) => [b.neg(dy[0]!)],
  Exp: ({ b, y, dy }) => [b.mul(dy[0]!, y[0]!)],
  Log: ({ b, x, dy }) => [b.div(dy[0]!, x[0]!)],
  Sqrt: ({ b, y, dy }) => [b.div(b.mul(dy[0]!, b.scalar(0.5)), y[0]!)],
  Reciprocal: ({ b, y, dy }) => [b.neg(b.mul(dy[0]!, b.mul(y[0]!, y[0]!)))],
  Sigmoid: ({ b, y, dy }) => [b.mul(dy[0]!, b.mul(y[0]!, b.sub(b.scalar(1), y[0]!)))],
  Tanh: ({ b, y, dy }) => [b.mul(dy[0]!, b.sub(b.scalar(1), b.mul(y[0]!, y[0]!)))],
  Sin: ({ b, x, dy }) => [b.mul(dy[0]!, b.cos(x[0]!))],
  Cos: ({ b, x, dy }) => [b.neg(b.mul(dy[0]!, b.sin(x[0]!)))],
  Relu: ({ b, x, dy }) => [b.where(b.greater(x[0]!, b.scalar(0)), dy[0]!, b.scalar(0))],
  Abs: ({ b, x, dy }) => [b.mul(dy[0]!, b.op('Sign', [x[0]!], {}, 1, [{ dtype: b.dtypeOf(x[0]!), shape: b.shapeOf(x[0]!) }])[0]!)],

  // dx = y·(dy − Σ dy·y)
  Softmax: ({ b, node, y, dy }) => {
    const axis = attrInt(node, 'axis', -1);
    return [b.mul(y[0]!, b.sub(dy[0]!, b.reduceSum(b.mul(dy[0]!, y[0]!), [axis], true)))];
  },
  // dx = dy − softmax·Σ dy
  LogSoftmax: ({ b, node, y, dy }) => {
    const axis = attrInt(node, 'axis', -1);
    return [b.sub(dy[0]!, b.mul(b.exp(y[0]!), b.reduceSum(dy[0]!, [axis], true)))];
  },
  ReduceSum: reduceGrad(false),
  ReduceMean: reduceGrad(true),

  // C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC, each summed over broadcast batch dims.
  MatMul: ({ b, node, x: [a, w], dy, needs, reduce }) => {
    const ra = rankOf(b, a!, node), rb = rankOf(b, w!, node);
    if (ra < 2 || rb < 2) throw new Error(`autodiff: MatMul node ${node.name} with a 1-D operand has no gradient rule`);
    const g = dy[0]!;
    const product = (p: string, q: string) => {
      const v = b.matmul(p, q);
      return { v, shape: b.shapeOf(v) };
    };
    let dA: string | undefined;
    if (needs(0)) {
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

  Transpose: ({ b, node, x, dy }) => {
    const rank = rankOf(b, x[0]!, node);
    const perm = attrInts(node, 'perm', Array.from({ length: rank }, (_, i) => rank - 1 - i));
    const inverse = new Array<number>(rank);
    perm.forEach((p, i) => (inverse[p] = i));
    return [b.transpose(dy[0]!, inverse)];
  },
  Reshape: reshapeBack,
  Unsqueeze: reshapeBack,
  Squeeze: reshapeBack,
  Flatten: reshapeBack,
  Expand: ({ dy, reduce }) => [reduce(dy[0]!, 0)],

  // The pieces' gradients side by side; a piece that does not reach the loss contributes zeros.
  Split: ({ b, node, x, y, dy }) => {
    const axis = attrInt(node, 'axis', 0);
    const parts = y.map((yi, k) => dy[k] ?? zerosLike(b, yi));
    return [b.concat(parts, normAxis(axis, rankOf(b, x[0]!, node)))];
  },
  Concat: ({ b, node, x, dy, needs }) => {
    const rank = rankOf(b, x[0]!, node);
    const axis = normAxis(attrInt(node, 'axis'), rank);
    const sizes = x.map((xi) => b.shapeOf(xi)![axis]!);
    let parts: string[];
    if (sizes.every((s) => typeof s === 'number')) parts = b.split(dy[0]!, axis, sizes as number[]);
    else {
      const runtimeSizes = b.concat(x.map((xi) => b.slice(b.shape(xi), [axis], [axis + 1], [0])), 0);
      parts = b.op('Split', [dy[0]!, runtimeSizes], { axis: int(axis) }, x.length, x.map((xi) => ({ dtype: b.dtypeOf(dy[0]!), shape: b.shapeOf(xi) })));
    }
    return x.map((_, k) => (needs(k) ? parts[k] : undefined));
  },
  // Zero padding around dy; the pads are worked out from the shapes so symbolic dims work too.
  Slice: ({ b, node, x, y, dy }) => {
    const rank = rankOf(b, x[0]!, node);
    const starts = constInts(b, node.inputs[1]), ends = constInts(b, node.inputs[2]);
    const axes = node.inputs[3] ? constInts(b, node.inputs[3]) : starts?.map((_, i) => i);
    const steps = node.inputs[4] ? constInts(b, node.inputs[4]) : undefined;
    if (!starts || !ends || !axes) throw new Error(`autodiff: Slice node ${node.name} needs constant starts/ends/axes for its gradient`);
    if (steps?.some((s) => s !== 1)) throw new Error(`autodiff: Slice node ${node.name} with steps ≠ 1 has no gradient rule`);
    const begin = new Array<number>(rank).fill(0), fromEnd = new Array<number>(rank).fill(0);
    axes.forEach((a, k) => {
      const ax = normAxis(a, rank);
      begin[ax] = starts[k]!;
      fromEnd[ax] = starts[k]! < 0 ? 1 : 0;
    });
    const xShape = shapeValue(b, x[0]!), yShape = shapeValue(b, y[0]!);
    // begin pad = clamp(start (+dim when negative), 0, dim); end pad = dim − len − begin pad
    const adjusted = b.add(b.int64s(begin), b.mul(b.int64s(fromEnd), xShape));
    const beginPad = b.min(b.max(adjusted, b.int64s(new Array(rank).fill(0))), xShape);
    const endPad = b.sub(b.sub(xShape, yShape), beginPad);
    const pads = b.concat([beginPad, endPad], 0);
    return [b.op('Pad', [dy[0]!, pads], { mode: str('constant') }, 1, [{ dtype: b.dtypeOf(dy[0]!), shape: b.shapeOf(x[0]!) }])[0]!];
  },

  // Scatter-add dy into zeros of data's shape (repeated indices accumulate).
  Gather: ({ b, node, x: [data, indices], dy }) => {
    const rank = rankOf(b, data!, node);
    const axis = normAxis(attrInt(node, 'axis', 0), rank);
    const idxRank = rankOf(b, indices!, node);
    const info = { dtype: b.dtypeOf(dy[0]!) };
    if (axis === 0) {
      const idx = b.unsqueeze(indices!, [-1]);
      return [b.op('ScatterND', [zerosLike(b, data!), idx, dy[0]!], { reduction: str('add') }, 1, [{ ...info, shape: b.shapeOf(data!) }])[0]!];
    }
    // Move the gathered axis to the front on both sides, scatter along axis 0, move it back.
    const dataPerm = [axis, ...Array.from({ length: rank }, (_, i) => i).filter((i) => i !== axis)];
    const dyPerm = [
      ...Array.from({ length: idxRank }, (_, i) => axis + i),
      ...Array.from({ length: axis }, (_, i) => i),
      ...Array.from({ length: rank - axis - 1 }, (_, i) => axis + idxRank + i),
    ];
    const zeros = zerosLike(b, b.transpose(data!, dataPerm));
    const scattered = b.op('ScatterND', [zeros, b.unsqueeze(indices!, [-1]), b.transpose(dy[0]!, dyPerm)], { reduction: str('add') }, 1, [info])[0]!;
    const inverse = new Array<number>(rank);
    dataPerm.forEach((p, i) => (inverse[p] = i));
    return [b.transpose(scattered, inverse)];
  },
  GatherElements: ({ b, node, x: [data, indices], dy }) => {
    const axis = attrInt(node, 'axis', 0);
    return [b.op('ScatterElements', [zerosLike(b, data!), indices!, dy[0]!], { axis: int(axis), reduction: str('add') }, 1, [
      { dtype: b.dtypeOf(dy[0]!), shape: b.shapeOf(data!) },
    ])[0]!];
  },

  Cast: ({ b, x, dy }) => [b.dtypeOf(x[0]!) === b.dtypeOf(dy[0]!) ? dy[0] : b.cast(dy[0]!, b.dtypeOf(x[0]!) ?? 'float32')],
  Where: ({ b, x, dy, needs, reduce }) => {
    const zero = b.scalar(0);
    return [
      undefined,
      needs(1) ? reduce(b.where(x[0]!, dy[0]!, zero), 1) : undefined,
      needs(2) ? reduce(b.where(x[0]!, zero, dy[0]!), 2) : undefined,
    ];
  },
  Min: selectGrad,
  Max: selectGrad,
  // Passes dy where min ≤ x ≤ max (inclusive, as torch.clamp does). The bounds get no gradient.
  Clip: ({ b, node, x, dy, needs }) => {
    if (needs(1) || needs(2)) throw new Error(`autodiff: Clip node ${node.name}: gradients of the bounds are not supported`);
    const lo = node.inputs[1], hi = node.inputs[2];
    const conds: string[] = [];
    if (lo) conds.push(b.op('GreaterOrEqual', [x[0]!, lo], {}, 1, [{ dtype: 'bool', shape: b.shapeOf(x[0]!) }])[0]!);
    if (hi) conds.push(b.lessOrEqual(x[0]!, hi));
    if (!conds.length) return [dy[0]];
    const inside = conds.reduce((p, q) => b.and(p, q));
    return [b.where(inside, dy[0]!, b.scalar(0))];
  },
};

/** Node-name prefix of a stop-gradient Identity (see the module comment). */
export const STOP_GRADIENT = 'StopGradient';

/** Whether a node is a stop-gradient marker: its output is a constant for autodiff. */
export const isStopGradient = (node: Node): boolean => node.op === 'Identity' && node.name.startsWith(STOP_GRADIENT);

/** Ops whose outputs never carry a gradient, whatever their dtype. */
export const NON_DIFFERENTIABLE = new Set([
  'Shape', 'Size', 'Equal', 'Less', 'LessOrEqual', 'Greater', 'GreaterOrEqual', 'And', 'Or', 'Not', 'Xor',
  'ArgMax', 'ArgMin', 'NonZero', 'Range', 'ConstantOfShape', 'Constant', 'RandomNormal', 'RandomUniform',
  'RandomNormalLike', 'RandomUniformLike', 'Sign', 'Floor', 'Ceil', 'Round', 'OneHot', 'TopK',
]);
