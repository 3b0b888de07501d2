/**
 * What one op is, in one record: its ONNX name, its shape rule, its forward builder and its
 * gradient rule, side by side. The records live in ./ops/, one file per family; ./op-table.ts
 * collects them into the one table that reverse mode (./autodiff.ts) reads, and the builder
 * (./ir.ts) forwards its op helpers to them.
 *
 * - `inferShape` sees what the builder knows of each input (dtype, shape, and the values of
 *   an int64 list the caller passed literally: axes, a reshape target, slice bounds) and the
 *   attributes, and returns each output's dtype and shape (best effort: unknown stays
 *   undefined). `freshDim` names a symbolic dim the rule cannot work out statically.
 * - `build` turns the friendly arguments of a builder method into inputs and attributes and
 *   adds the node with `b.apply(record, inputs, attrs)`.
 * - `gradient` sees the forward node and the gradient of each output and returns the gradient
 *   of each input it is asked for: `(c) => [dA, dB]`. Inputs it is not asked for
 *   (`c.needs(k)` false) may be left undefined, so integer inputs (indices, shapes, axes) and
 *   frozen branches cost nothing. An op whose outputs never carry a gradient (comparisons,
 *   shapes, index arithmetic) says {@link NOT_DIFFERENTIABLE}: reverse mode treats its
 *   outputs as constants.
 *
 * Gradient conventions
 * - `c.x[k]` is input k, `c.y[k]` output k, `c.dy[k]` the gradient of output k (undefined
 *   when that output does not reach the loss; only multi-output ops ever see that).
 * - Element-wise rules return gradients with the broadcast shape of the output; `c.reduce`
 *   sums them back to each input's shape.
 * - Formulas follow ONNX Runtime's gradient builder where it has one (Softmax, LogSoftmax,
 *   Gather, MatMul with broadcasting).
 */
import type { GraphBuilder } from './ir.js';
import { broadcastShapes, tensorValues, type Attr, type DType, type Node, type Shape } from './ir-data.js';

/** What a shape rule knows of one input; `ints` only for a literal int64 list. */
export interface InputInfo {
  dtype?: DType;
  shape?: Shape;
  ints?: number[];
}

/** What a shape rule says of one output. */
export interface OutputInfo {
  dtype?: DType;
  shape?: Shape;
}

export type ShapeRule = (inputs: InputInfo[], attrs: Record<string, Attr>, freshDim: () => string) => OutputInfo[];

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

/** The gradient of an op whose outputs never carry one, whatever their dtype. */
export const NOT_DIFFERENTIABLE = 'not differentiable';

export interface OpRecord {
  /** The ONNX op type (default domain). */
  readonly name: string;
  /** Absent only for ops the builder never writes itself (they are listed for autodiff). */
  readonly inferShape?: ShapeRule;
  readonly build?: (b: GraphBuilder, ...args: never[]) => string | string[];
  /** Mutable so that a test can swap in a wrong rule and see the finite-difference check fail. */
  gradient: GradRule | typeof NOT_DIFFERENTIABLE;
}

export const isOpRecord = (v: unknown): v is OpRecord =>
  typeof v === 'object' && v !== null && typeof (v as OpRecord).name === 'string' && 'gradient' in v;

/** Records for ops that the builder never writes but that autodiff must know carry no gradient. */
export const nonDifferentiable = (...names: string[]): OpRecord[] => names.map((name) => ({ name, gradient: NOT_DIFFERENTIABLE }));

// ---- shape rules shared by many ops ------------------------------------------------------

/** The output looks like input 0 (element-wise unary ops, Softmax, Clip …). */
export const likeInput: ShapeRule = ([x]) => [{ dtype: x!.dtype, shape: x!.shape }];

/** NumPy broadcasting of two inputs; the dtype is input 0's unless the op fixes it (bool). */
export const broadcastRule = (dtype?: DType): ShapeRule => ([a, c]) => [{ dtype: dtype ?? a!.dtype, shape: broadcastShapes(a!.shape, c!.shape) }];

// ---- record kinds --------------------------------------------------------------------------

/** An element-wise op of one input. */
export function unaryOp(name: string, gradient: OpRecord['gradient']) {
  const op = {
    name,
    inferShape: likeInput,
    build: (b: GraphBuilder, x: string): string => b.apply(op, [x])[0]!,
    gradient,
  };
  return op;
}

/** An element-wise op of two broadcast inputs. */
export function binaryOp(name: string, gradient: OpRecord['gradient'], dtype?: DType) {
  const op = {
    name,
    inferShape: broadcastRule(dtype),
    build: (b: GraphBuilder, a: string, c: string): string => b.apply(op, [a, c])[0]!,
    gradient,
  };
  return op;
}

// ---- helpers for gradient rules ----------------------------------------------------------

/** Constant int64 values of an initializer input (axes, starts …), or undefined when not constant. */
export function constInts(b: GraphBuilder, name: string | undefined): number[] | undefined {
  if (!name) return undefined;
  const t = b.graph.initializers.get(name);
  if (!t) return undefined;
  return Array.from(tensorValues(t) as ArrayLike<number | bigint>, Number);
}

/** The rank of a value a gradient rule needs to know it of. */
export function rankOf(b: GraphBuilder, v: string, node: Node): number {
  const s = b.shapeOf(v);
  if (!s) throw new Error(`autodiff: the rank of '${v}' (input of ${node.op} node ${node.name}) is unknown`);
  return s.length;
}
