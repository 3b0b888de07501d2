/**
 * Ops that pick elements or pieces (Gather, GatherElements, Slice, Split) and the one that
 * joins pieces (Concat). Their gradients scatter or pad dy back to where the elements came
 * from. Records as explained in ../op-record.ts.
 */
import type { GraphBuilder } from '../ir.js';
import { attrInt, int, normAxis, str, type Attr, type Shape } from '../ir-data.js';
import { constInts, nonDifferentiable, rankOf, type OpRecord } from '../op-record.js';
import { shapeValue, zerosLike } from '../gradient-shapes.js';

const axisAttr = (attrs: Record<string, Attr>, fallback = 0): number => (attrs.axis?.kind === 'int' ? attrs.axis.value : fallback);

/** Gather along `axis` (embedding lookup with axis 0). */
export const Gather = {
  name: 'Gather',
  inferShape: ([data, indices], attrs) => {
    const sd = data!.shape, si = indices!.shape;
    let shape: Shape | undefined;
    if (sd && si) {
      const ax = normAxis(axisAttr(attrs), sd.length);
      shape = [...sd.slice(0, ax), ...si, ...sd.slice(ax + 1)];
    }
    return [{ dtype: data!.dtype, shape }];
  },
  build: (b: GraphBuilder, data: string, indices: string, axis = 0): string => b.apply(Gather, [data, indices], { axis: int(axis) })[0]!,
  // Scatter-add dy into zeros of data's shape (repeated indices accumulate).
  gradient: ({ b, node, x: [data, indices], dy }) => {
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
} satisfies OpRecord;

/** Picks one element along `axis` for each index; the result has the indices' shape. */
export const GatherElements = {
  name: 'GatherElements',
  inferShape: ([data, indices]) => [{ dtype: data!.dtype, shape: indices!.shape }],
  build: (b: GraphBuilder, data: string, indices: string, axis: number): string => b.apply(GatherElements, [data, indices], { axis: int(axis) })[0]!,
  gradient: ({ b, node, x: [data, indices], dy }) => {
    const axis = attrInt(node, 'axis', 0);
    return [b.op('ScatterElements', [zerosLike(b, data!), indices!, dy[0]!], { axis: int(axis), reduction: str('add') }, 1, [
      { dtype: b.dtypeOf(dy[0]!), shape: b.shapeOf(data!) },
    ])[0]!];
  },
} satisfies OpRecord;

export const Concat = {
  name: 'Concat',
  inferShape: (xs, attrs, freshDim) => {
    let shape: Shape | undefined;
    if (xs.every((x) => x.shape)) {
      const first = xs[0]!.shape!;
      const ax = normAxis(axisAttr(attrs), first.length);
      const parts = xs.map((x) => x.shape![ax]!);
      const total = parts.every((p) => typeof p === 'number') ? (parts as number[]).reduce((a, c) => a + c, 0) : freshDim();
      shape = first.map((d, i) => (i === ax ? total : d));
    }
    return [{ dtype: xs[0]!.dtype, shape }];
  },
  build: (b: GraphBuilder, xs: string[], axis: number): string => b.apply(Concat, xs, { axis: int(axis) })[0]!,
  gradient: ({ b, node, x, dy, needs }) => {
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
} satisfies OpRecord;

/** Split along `axis` into pieces of the given static sizes (one output per piece). */
export const Split = {
  name: 'Split',
  inferShape: ([x, sizes], attrs) => {
    const s = x!.shape;
    return (sizes!.ints ?? []).map((n) => {
      if (!s) return { dtype: x!.dtype };
      const ax = normAxis(axisAttr(attrs), s.length);
      return { dtype: x!.dtype, shape: s.map((d, i) => (i === ax ? n : d)) };
    });
  },
  build: (b: GraphBuilder, x: string, axis: number, sizes: number[]): string[] => b.apply(Split, [x, sizes], { axis: int(axis) }),
  // The pieces' gradients side by side; a piece that does not reach the loss contributes zeros.
  gradient: ({ b, node, x, y, dy }) => {
    const axis = attrInt(node, 'axis', 0);
    const parts = y.map((yi, k) => dy[k] ?? zerosLike(b, yi));
    return [b.concat(parts, normAxis(axis, rankOf(b, x[0]!, node)))];
  },
} satisfies OpRecord;

/** Static slice along the given axes (ends may exceed the dim, as in ONNX). */
export const Slice = {
  name: 'Slice',
  inferShape: ([x, starts, ends, axes], _, freshDim) => {
    const s = x!.shape;
    let shape: Shape | undefined;
    if (s && starts!.ints && ends!.ints && axes!.ints) {
      shape = [...s];
      axes!.ints.forEach((a, k) => {
        const ax = normAxis(a, s.length);
        const d = s[ax];
        if (typeof d === 'number') {
          const clamp = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
          shape![ax] = Math.max(0, clamp(ends!.ints![k]!) - clamp(starts!.ints![k]!));
        } else shape![ax] = freshDim();
      });
    }
    return [{ dtype: x!.dtype, shape }];
  },
  build: (b: GraphBuilder, x: string, starts: number[], ends: number[], axes: number[]): string => b.apply(Slice, [x, starts, ends, axes])[0]!,
  // Zero padding around dy; the pads are worked out from the shapes so symbolic dims work too.
  gradient: ({ b, node, x, y, dy }) => {
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
} satisfies OpRecord;

/** Written only as raw nodes, but known to carry no gradient: their outputs are indices. */
export const OTHER_INDEX_OPS = nonDifferentiable('NonZero', 'ArgMax', 'ArgMin', 'TopK', 'OneHot');
