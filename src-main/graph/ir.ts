/**
 * Hindsight's graph IR: a tiny, ONNX-shaped dataflow graph that the decoder builder writes
 * and that reverse-mode autodiff (./autodiff.ts) reads and extends.
 *
 * Why our own IR and not ModelProto directly: ModelProto is a wire format (tagged
 * attributes, Long ints, bytes). Autodiff wants plain data it can walk and append to, with
 * the shape of every value where it is known, so that broadcasting in gradient rules can be
 * resolved statically.
 *
 * The model
 * - `Value`: a named tensor flowing between nodes: `{ name, dtype?, shape? }`. A shape is a
 *   list of dims; a dim is a number (static) or a string (symbolic: 'B', 'T', 'S', 'P' …).
 *   Two equal strings mean the same size. `shape === undefined` means unknown rank.
 * - `Node`: `{ op, inputs, outputs, attrs, name }`. `op` is a standard ONNX op type in the
 *   default domain (opset {@link OPSET}, so every Reduce* op takes `axes` as an input). An
 *   empty string in `inputs` is ONNX's "optional input left out".
 * - `Attr`: tagged, because ONNX distinguishes int from float attributes and JS cannot:
 *   `{ kind: 'int' | 'float' | 'string' | 'ints' | 'floats' | 'tensor', value }`.
 *   Read them with {@link attrInt}, {@link attrInts}, {@link attrFloat}.
 * - Initializers: named constant tensors (frozen weights, shape constants, RoPE tables).
 *   Their data may be held in memory or loaded lazily (`data` is a function) so that a
 *   multi-GB checkpoint streams into the external-data file one tensor at a time.
 * - Graph inputs and outputs are `Value`s with dtype and shape.
 *
 * The builder ({@link GraphBuilder}) makes fresh unique names, records each node, and infers
 * output dtype/shape for the ops it knows (best effort; unknown stays undefined). Every op
 * helper returns the output value's name, so code reads like the math:
 *
 *     const h = b.add(x, b.matmul(x, w));
 *
 * Each op is defined once, in a record with its shape rule, forward builder and gradient rule
 * (./op-record.ts, ./ops/, collected in ./op-table.ts); the helpers here only forward to
 * those records. The plain data types and helpers live in ./ir-data.ts and are re-exported.
 *
 * Serialise with `toModelProto` / `saveModel` in ./onnx.ts.
 */

import { CONTRIB_DOMAIN, f32Tensor, i64Tensor, tensorValues, type Attr, type DType, type Graph, type Node, type Shape, type Tensor, type Value } from './ir-data.js';
import type { InputInfo, OpRecord } from './op-record.js';
import { Abs, Clip, Cos, LogSoftmax, Relu, Sigmoid, Sin, Softmax, Tanh } from './ops/activations.js';
import { Add, Cast, Div, Exp, Identity, Log, Max, Min, Mul, Neg, Pow, Reciprocal, Sqrt, Sub } from './ops/arithmetic.js';
import { Concat, Gather, GatherElements, Slice, Split } from './ops/indexing.js';
import { And, Equal, Greater, Less, LessOrEqual, Not, Where } from './ops/logic.js';
import { MatMul } from './ops/matmul.js';
import { ReduceMean, ReduceSum } from './ops/reductions.js';
import { Expand, Flatten, Range, Reshape, ShapeOf, Squeeze, Transpose, Unsqueeze } from './ops/shape.js';

export * from './ir-data.js';

/**
 * Builds a {@link Graph}. Op helpers take value names and return the output value name.
 * Helpers for ops with several outputs return an array. `op()` adds any ONNX op.
 */
export class GraphBuilder {
  readonly graph: Graph;
  private counter = 0;
  private readonly constCache = new Map<string, string>();

  constructor(name = 'graph') {
    this.graph = { name, inputs: [], outputs: [], nodes: [], initializers: new Map(), values: new Map() };
  }

  /** A fresh value name that is not yet used in the graph. */
  fresh(prefix: string): string {
    let name: string;
    do name = `${prefix}_${this.counter++}`; while (this.graph.values.has(name) || this.graph.initializers.has(name));
    return name;
  }

  valueInfo(name: string): Value | undefined {
    return this.graph.values.get(name);
  }
  shapeOf(name: string): Shape | undefined {
    return this.graph.values.get(name)?.shape;
  }
  dtypeOf(name: string): DType | undefined {
    return this.graph.values.get(name)?.dtype;
  }

  input(name: string, dtype: DType, shape: Shape): string {
    const v = { name, dtype, shape };
    this.graph.inputs.push(v);
    this.graph.values.set(name, v);
    return name;
  }

  /** Marks a value as a graph output (it must have a dtype; the shape may be refined here). */
  output(name: string, shape?: Shape): string {
    const known = this.graph.values.get(name);
    const dtype = known?.dtype;
    if (!dtype) throw new Error(`graph output '${name}' has no known dtype`);
    this.graph.outputs.push({ name, dtype, shape: shape ?? known?.shape });
    return name;
  }

  /** Adds a named initializer (a frozen weight). */
  initializer(name: string, tensor: Tensor): string {
    if (this.graph.initializers.has(name)) throw new Error(`duplicate initializer '${name}'`);
    this.graph.initializers.set(name, tensor);
    this.graph.values.set(name, { name, dtype: tensor.dtype, shape: [...tensor.dims] });
    return name;
  }

  /** A small constant, deduplicated by content (shape vectors, scalars, axes). */
  constant(tensor: Tensor, prefix = 'const'): string {
    const values = tensorValues(tensor);
    const key = `${tensor.dtype}|${tensor.dims}|${Array.from(values as ArrayLike<number | bigint>).join(',')}`;
    const cached = key.length < 4096 ? this.constCache.get(key) : undefined;
    if (cached) return cached;
    const name = this.initializer(this.fresh(prefix), { ...tensor, data: values });
    if (key.length < 4096) this.constCache.set(key, name);
    return name;
  }
  scalar(value: number, dtype: 'float32' | 'int64' = 'float32'): string {
    return this.constant(dtype === 'float32' ? f32Tensor([], [value]) : i64Tensor([], [value]));
  }
  int64s(values: number[]): string {
    return this.constant(i64Tensor([values.length], values));
  }

  /**
   * Adds any ONNX op. `outputs` is a count (fresh names made from the op type) or explicit
   * names, where '' leaves an optional output out (no value is made for it). The caller may pass
   * `infer` output infos; otherwise they stay unknown. `domain`: CONTRIB_DOMAIN for one of ONNX
   * Runtime's contrib ops (inference only: autodiff has no rules for them).
   */
  op(op: string, inputs: string[], attrs: Record<string, Attr> = {}, outputs: number | string[] = 1, infer?: Omit<Value, 'name'>[], domain?: Node['domain']): string[] {
    for (const i of inputs) {
      if (i !== '' && !this.graph.values.has(i)) throw new Error(`${op}: unknown input value '${i}'`);
    }
    const names = typeof outputs === 'number' ? Array.from({ length: outputs }, () => this.fresh(op.toLowerCase())) : outputs;
    const node: Node = { op, name: this.fresh(`n_${op}`), inputs, outputs: names, attrs, ...(domain ? { domain } : {}) };
    this.graph.nodes.push(node);
    names.forEach((name, k) => name !== '' && this.graph.values.set(name, { name, ...(infer?.[k] ?? {}) }));
    return names;
  }

  /**
   * Adds one of ONNX Runtime's single-output contrib ops, with the output info the caller
   * knows (op() with CONTRIB_DOMAIN takes those of several outputs).
   */
  contribOp(op: string, inputs: string[], attrs: Record<string, Attr>, infer: Omit<Value, 'name'>): string {
    return this.op(op, inputs, attrs, 1, [infer], CONTRIB_DOMAIN)[0]!;
  }

  /**
   * Adds a node for an op record: its shape rule describes the outputs first (so a fresh
   * symbolic dim is named before the node's constants), then every literal int64 list among
   * the inputs becomes a constant. `shape` gives output 0's shape where only the caller knows
   * it; `names` names the outputs.
   */
  apply(record: Pick<OpRecord, 'name' | 'inferShape'>, inputs: (string | number[])[], attrs: Record<string, Attr> = {}, options: { shape?: Shape; names?: string[] } = {}): string[] {
    if (!record.inferShape) throw new Error(`op ${record.name} has no shape rule; add it with op()`);
    const known = inputs.map((i): InputInfo => (typeof i === 'string' ? { dtype: this.dtypeOf(i), shape: this.shapeOf(i) } : { dtype: 'int64', shape: [i.length], ints: i }));
    const outputs = record.inferShape(known, attrs, () => this.fresh('dim'));
    if (options.shape) outputs[0] = { ...outputs[0], shape: options.shape };
    const names = inputs.map((i) => (typeof i === 'string' ? i : this.int64s(i)));
    return this.op(record.name, names, attrs, options.names ?? outputs.length, outputs);
  }

  // ---- element-wise (./ops/arithmetic.ts, ./ops/activations.ts, ./ops/logic.ts) ---------
  neg = (x: string) => Neg.build(this, x);
  exp = (x: string) => Exp.build(this, x);
  log = (x: string) => Log.build(this, x);
  sqrt = (x: string) => Sqrt.build(this, x);
  reciprocal = (x: string) => Reciprocal.build(this, x);
  sigmoid = (x: string) => Sigmoid.build(this, x);
  tanh = (x: string) => Tanh.build(this, x);
  cos = (x: string) => Cos.build(this, x);
  sin = (x: string) => Sin.build(this, x);
  relu = (x: string) => Relu.build(this, x);
  abs = (x: string) => Abs.build(this, x);
  identity = (x: string) => Identity.build(this, x);
  /** Identity with a chosen output name: gives graph outputs stable names. */
  identityAs(x: string, name: string): string {
    if (this.graph.values.has(name)) throw new Error(`value name '${name}' is already used`);
    return this.apply(Identity, [x], {}, { names: [name] })[0]!;
  }
  not = (x: string) => Not.build(this, x);

  add = (a: string, b: string) => Add.build(this, a, b);
  sub = (a: string, b: string) => Sub.build(this, a, b);
  mul = (a: string, b: string) => Mul.build(this, a, b);
  div = (a: string, b: string) => Div.build(this, a, b);
  pow = (a: string, b: string) => Pow.build(this, a, b);
  equal = (a: string, b: string) => Equal.build(this, a, b);
  less = (a: string, b: string) => Less.build(this, a, b);
  lessOrEqual = (a: string, b: string) => LessOrEqual.build(this, a, b);
  greater = (a: string, b: string) => Greater.build(this, a, b);
  and = (a: string, b: string) => And.build(this, a, b);
  max = (a: string, b: string) => Max.build(this, a, b);
  min = (a: string, b: string) => Min.build(this, a, b);

  where(cond: string, a: string, b: string): string {
    return Where.build(this, cond, a, b);
  }
  cast(x: string, to: DType): string {
    return Cast.build(this, x, to);
  }
  /** Clamps to [min, max] (scalar values); either bound may be left out. */
  clip(x: string, min?: string, max?: string): string {
    return Clip.build(this, x, min, max);
  }

  // ---- linear algebra, normalisation, reductions ------------------------------------------
  /** NumPy matmul: batch dims broadcast, last two contract. */
  matmul(a: string, b: string): string {
    return MatMul.build(this, a, b);
  }
  softmax(x: string, axis = -1): string {
    return Softmax.build(this, x, axis);
  }
  logSoftmax(x: string, axis = -1): string {
    return LogSoftmax.build(this, x, axis);
  }
  reduceSum = (x: string, axes: number[], keepdims = true) => ReduceSum.build(this, x, axes, keepdims);
  reduceMean = (x: string, axes: number[], keepdims = true) => ReduceMean.build(this, x, axes, keepdims);

  // ---- indexing (./ops/indexing.ts) -------------------------------------------------------
  /** Gather along `axis` (embedding lookup with axis 0). */
  gather(data: string, indices: string, axis = 0): string {
    return Gather.build(this, data, indices, axis);
  }
  gatherElements(data: string, indices: string, axis: number): string {
    return GatherElements.build(this, data, indices, axis);
  }
  concat(xs: string[], axis: number): string {
    return Concat.build(this, xs, axis);
  }
  /** Split along `axis` into pieces of the given static sizes. */
  split(x: string, axis: number, sizes: number[]): string[] {
    return Split.build(this, x, axis, sizes);
  }
  /** Static slice along the given axes (ends may exceed the dim, as in ONNX). */
  slice(x: string, starts: number[], ends: number[], axes: number[]): string {
    return Slice.build(this, x, starts, ends, axes);
  }

  // ---- shape ops (./ops/shape.ts) -----------------------------------------------------------
  /** Reshape to a constant target; 0 copies the input dim, -1 is inferred. */
  reshape(x: string, target: number[]): string {
    return Reshape.build(this, x, target);
  }
  /** Reshape to a runtime shape value (int64 [rank]). */
  reshapeTo(x: string, shapeValue: string, inferShape?: Shape): string {
    return Reshape.build(this, x, shapeValue, inferShape);
  }
  transpose(x: string, perm: number[]): string {
    return Transpose.build(this, x, perm);
  }
  unsqueeze(x: string, axes: number[]): string {
    return Unsqueeze.build(this, x, axes);
  }
  squeeze(x: string, axes: number[]): string {
    return Squeeze.build(this, x, axes);
  }
  flatten(x: string, axis = 1): string {
    return Flatten.build(this, x, axis);
  }
  shape(x: string): string {
    return ShapeOf.build(this, x);
  }
  expand(x: string, shapeValue: string, inferShape?: Shape): string {
    return Expand.build(this, x, shapeValue, inferShape);
  }
  /** Range(start, limit, delta) over scalar values of one dtype. */
  range(start: string, limit: string, delta: string, inferShape?: Shape): string {
    return Range.build(this, start, limit, delta, inferShape);
  }
}
