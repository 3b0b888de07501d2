/**
 * Hindsight's graph IR: a tiny, ONNX-shaped dataflow graph that the decoder builder writes
 * and that reverse-mode autodiff (src-main/train) reads and extends.
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
 * Serialise with `toModelProto` / `saveModel` in ./onnx.ts.
 */

export const OPSET = 18;

export type DType = 'float32' | 'float16' | 'bfloat16' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool';
export type Dim = number | string;
export type Shape = Dim[];

export type TypedArray = Float32Array | Uint16Array | BigInt64Array | Int32Array | Int8Array | Uint8Array;

/** A constant tensor. `data` holds the values (bf16/fp16 as raw Uint16 bits, bool as Uint8). */
export interface Tensor {
  dtype: DType;
  dims: number[];
  data: TypedArray | (() => TypedArray);
}

export interface Value {
  name: string;
  dtype?: DType;
  shape?: Shape;
}

export type Attr =
  | { kind: 'int'; value: number }
  | { kind: 'float'; value: number }
  | { kind: 'string'; value: string }
  | { kind: 'ints'; value: number[] }
  | { kind: 'floats'; value: number[] }
  | { kind: 'tensor'; value: Tensor };

export interface Node {
  op: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attrs: Record<string, Attr>;
}

/** A complete graph: what the serialiser writes and what autodiff transforms. */
export interface Graph {
  name: string;
  inputs: Value[];
  outputs: Value[];
  nodes: Node[];
  initializers: Map<string, Tensor>;
  /** dtype/shape of every value where known: inputs, initializers and node outputs. */
  values: Map<string, Value>;
}

export const int = (value: number): Attr => ({ kind: 'int', value });
export const float = (value: number): Attr => ({ kind: 'float', value });
export const ints = (value: number[]): Attr => ({ kind: 'ints', value });
export const floats = (value: number[]): Attr => ({ kind: 'floats', value });
export const str = (value: string): Attr => ({ kind: 'string', value });

export function attrInt(node: Node, name: string, fallback?: number): number {
  const a = node.attrs[name];
  if (a?.kind === 'int') return a.value;
  if (fallback !== undefined) return fallback;
  throw new Error(`node ${node.name} (${node.op}) has no int attribute '${name}'`);
}
export function attrInts(node: Node, name: string, fallback?: number[]): number[] {
  const a = node.attrs[name];
  if (a?.kind === 'ints') return a.value;
  if (fallback !== undefined) return fallback;
  throw new Error(`node ${node.name} (${node.op}) has no ints attribute '${name}'`);
}
export function attrFloat(node: Node, name: string, fallback?: number): number {
  const a = node.attrs[name];
  if (a?.kind === 'float') return a.value;
  if (fallback !== undefined) return fallback;
  throw new Error(`node ${node.name} (${node.op}) has no float attribute '${name}'`);
}

/** The values of a tensor, loading lazy data. */
export function tensorValues(t: Tensor): TypedArray {
  return typeof t.data === 'function' ? t.data() : t.data;
}

export function numel(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

export function bytesPerElement(dtype: DType): number {
  switch (dtype) {
    case 'float32': case 'int32': return 4;
    case 'int64': return 8;
    case 'float16': case 'bfloat16': return 2;
    case 'int8': case 'uint8': case 'bool': return 1;
  }
}

export function f32Tensor(dims: number[], data: ArrayLike<number>): Tensor {
  return { dtype: 'float32', dims, data: Float32Array.from(data) };
}
export function i64Tensor(dims: number[], data: ArrayLike<number>): Tensor {
  return { dtype: 'int64', dims, data: BigInt64Array.from(Array.from(data, (v) => BigInt(v))) };
}

/** Rank and dims after NumPy broadcasting; symbolic dims broadcast against 1 and themselves. */
export function broadcastShapes(a?: Shape, b?: Shape): Shape | undefined {
  if (!a || !b) return undefined;
  const rank = Math.max(a.length, b.length);
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da === 1) out.push(db);
    else if (db === 1 || da === db) out.push(da);
    else if (typeof da === 'number' && typeof db === 'number') {
      throw new Error(`cannot broadcast shapes [${a}] and [${b}]`);
    } else out.push(typeof da === 'number' ? da : db); // symbolic vs other: trust the model
  }
  return out;
}

const normAxis = (axis: number, rank: number) => (axis < 0 ? axis + rank : axis);

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
   * names. The caller may pass `infer` output infos; otherwise they stay unknown.
   */
  op(op: string, inputs: string[], attrs: Record<string, Attr> = {}, outputs: number | string[] = 1, infer?: Omit<Value, 'name'>[]): string[] {
    for (const i of inputs) {
      if (i !== '' && !this.graph.values.has(i)) throw new Error(`${op}: unknown input value '${i}'`);
    }
    const names = typeof outputs === 'number' ? Array.from({ length: outputs }, () => this.fresh(op.toLowerCase())) : outputs;
    const node: Node = { op, name: this.fresh(`n_${op}`), inputs, outputs: names, attrs };
    this.graph.nodes.push(node);
    names.forEach((name, k) => this.graph.values.set(name, { name, ...(infer?.[k] ?? {}) }));
    return names;
  }

  private op1(op: string, inputs: string[], attrs: Record<string, Attr>, dtype?: DType, shape?: Shape): string {
    return this.op(op, inputs, attrs, 1, [{ dtype, shape }])[0]!;
  }

  // ---- element-wise -------------------------------------------------------------------
  private unary(op: string, x: string): string {
    return this.op1(op, [x], {}, this.dtypeOf(x), this.shapeOf(x));
  }
  neg = (x: string) => this.unary('Neg', x);
  exp = (x: string) => this.unary('Exp', x);
  log = (x: string) => this.unary('Log', x);
  sqrt = (x: string) => this.unary('Sqrt', x);
  reciprocal = (x: string) => this.unary('Reciprocal', x);
  sigmoid = (x: string) => this.unary('Sigmoid', x);
  tanh = (x: string) => this.unary('Tanh', x);
  cos = (x: string) => this.unary('Cos', x);
  sin = (x: string) => this.unary('Sin', x);
  identity = (x: string) => this.unary('Identity', x);
  /** Identity with a chosen output name: gives graph outputs stable names. */
  identityAs(x: string, name: string): string {
    if (this.graph.values.has(name)) throw new Error(`value name '${name}' is already used`);
    return this.op('Identity', [x], {}, [name], [{ dtype: this.dtypeOf(x), shape: this.shapeOf(x) }])[0]!;
  }
  not = (x: string) => this.unary('Not', x);

  private binary(op: string, a: string, b: string, dtype?: DType): string {
    return this.op1(op, [a, b], {}, dtype ?? this.dtypeOf(a), broadcastShapes(this.shapeOf(a), this.shapeOf(b)));
  }
  add = (a: string, b: string) => this.binary('Add', a, b);
  sub = (a: string, b: string) => this.binary('Sub', a, b);
  mul = (a: string, b: string) => this.binary('Mul', a, b);
  div = (a: string, b: string) => this.binary('Div', a, b);
  pow = (a: string, b: string) => this.binary('Pow', a, b);
  equal = (a: string, b: string) => this.binary('Equal', a, b, 'bool');
  less = (a: string, b: string) => this.binary('Less', a, b, 'bool');
  lessOrEqual = (a: string, b: string) => this.binary('LessOrEqual', a, b, 'bool');
  greater = (a: string, b: string) => this.binary('Greater', a, b, 'bool');
  and = (a: string, b: string) => this.binary('And', a, b, 'bool');
  max = (a: string, b: string) => this.binary('Max', a, b);
  min = (a: string, b: string) => this.binary('Min', a, b);

  where(cond: string, a: string, b: string): string {
    const shape = broadcastShapes(broadcastShapes(this.shapeOf(cond), this.shapeOf(a)), this.shapeOf(b));
    return this.op1('Where', [cond, a, b], {}, this.dtypeOf(a), shape);
  }

  cast(x: string, to: DType): string {
    return this.op1('Cast', [x], { to: int(ONNX_DTYPE[to]) }, to, this.shapeOf(x));
  }

  // ---- linear algebra -----------------------------------------------------------------
  /** NumPy matmul: batch dims broadcast, last two contract. */
  matmul(a: string, b: string): string {
    const sa = this.shapeOf(a), sb = this.shapeOf(b);
    let shape: Shape | undefined;
    if (sa && sb && sa.length >= 2 && sb.length >= 2) {
      const batch = broadcastShapes(sa.slice(0, -2), sb.slice(0, -2))!;
      shape = [...batch, sa[sa.length - 2]!, sb[sb.length - 1]!];
    } else if (sa && sb && sb.length === 1) shape = sa.slice(0, -1);
    return this.op1('MatMul', [a, b], {}, this.dtypeOf(a), shape);
  }

  // ---- normalisation-style ops ---------------------------------------------------------
  softmax(x: string, axis = -1): string {
    return this.op1('Softmax', [x], { axis: int(axis) }, this.dtypeOf(x), this.shapeOf(x));
  }
  logSoftmax(x: string, axis = -1): string {
    return this.op1('LogSoftmax', [x], { axis: int(axis) }, this.dtypeOf(x), this.shapeOf(x));
  }

  private reduce(op: string, x: string, axes: number[], keepdims: boolean): string {
    const s = this.shapeOf(x);
    let shape: Shape | undefined;
    if (s) {
      const ax = new Set(axes.map((a) => normAxis(a, s.length)));
      shape = keepdims ? s.map((d, i) => (ax.has(i) ? 1 : d)) : s.filter((_, i) => !ax.has(i));
    }
    return this.op1(op, [x, this.int64s(axes)], { keepdims: int(keepdims ? 1 : 0) }, this.dtypeOf(x), shape);
  }
  reduceSum = (x: string, axes: number[], keepdims = true) => this.reduce('ReduceSum', x, axes, keepdims);
  reduceMean = (x: string, axes: number[], keepdims = true) => this.reduce('ReduceMean', x, axes, keepdims);
  reduceMax = (x: string, axes: number[], keepdims = true) => this.reduce('ReduceMax', x, axes, keepdims);

  // ---- indexing -----------------------------------------------------------------------
  /** Gather along `axis` (embedding lookup with axis 0). */
  gather(data: string, indices: string, axis = 0): string {
    const sd = this.shapeOf(data), si = this.shapeOf(indices);
    let shape: Shape | undefined;
    if (sd && si) {
      const ax = normAxis(axis, sd.length);
      shape = [...sd.slice(0, ax), ...si, ...sd.slice(ax + 1)];
    }
    return this.op1('Gather', [data, indices], { axis: int(axis) }, this.dtypeOf(data), shape);
  }
  gatherElements(data: string, indices: string, axis: number): string {
    return this.op1('GatherElements', [data, indices], { axis: int(axis) }, this.dtypeOf(data), this.shapeOf(indices));
  }

  // ---- shape ops ----------------------------------------------------------------------
  /** Reshape to a constant target; 0 copies the input dim, -1 is inferred. */
  reshape(x: string, target: number[]): string {
    const s = this.shapeOf(x);
    let shape: Shape | undefined;
    if (s) {
      shape = target.map((d, i) => (d === 0 ? s[i]! : d));
      const minus = shape.indexOf(-1);
      if (minus >= 0) {
        const known = shape.filter((d, i) => i !== minus);
        const allStatic = s.every((d) => typeof d === 'number') && known.every((d) => typeof d === 'number');
        shape[minus] = allStatic ? numel(s as number[]) / numel(known as number[]) : this.fresh('dim');
      }
    }
    return this.op1('Reshape', [x, this.int64s(target)], {}, this.dtypeOf(x), shape);
  }
  /** Reshape to a runtime shape value (int64 [rank]). */
  reshapeTo(x: string, shapeValue: string, inferShape?: Shape): string {
    return this.op1('Reshape', [x, shapeValue], {}, this.dtypeOf(x), inferShape);
  }
  transpose(x: string, perm: number[]): string {
    const s = this.shapeOf(x);
    return this.op1('Transpose', [x], { perm: ints(perm) }, this.dtypeOf(x), s && perm.map((p) => s[p]!));
  }
  unsqueeze(x: string, axes: number[]): string {
    const s = this.shapeOf(x);
    let shape: Shape | undefined;
    if (s) {
      const rank = s.length + axes.length;
      const ax = new Set(axes.map((a) => normAxis(a, rank)));
      const rest = [...s];
      shape = Array.from({ length: rank }, (_, i) => (ax.has(i) ? 1 : rest.shift()!));
    }
    return this.op1('Unsqueeze', [x, this.int64s(axes)], {}, this.dtypeOf(x), shape);
  }
  squeeze(x: string, axes: number[]): string {
    const s = this.shapeOf(x);
    const ax = s && new Set(axes.map((a) => normAxis(a, s.length)));
    return this.op1('Squeeze', [x, this.int64s(axes)], {}, this.dtypeOf(x), s && s.filter((_, i) => !ax!.has(i)));
  }
  concat(xs: string[], axis: number): string {
    const shapes = xs.map((x) => this.shapeOf(x));
    let shape: Shape | undefined;
    if (shapes.every((s) => s)) {
      const first = shapes[0]!;
      const ax = normAxis(axis, first.length);
      const parts = shapes.map((s) => s![ax]!);
      const total = parts.every((p) => typeof p === 'number') ? (parts as number[]).reduce((a, b) => a + b, 0) : this.fresh('dim');
      shape = first.map((d, i) => (i === ax ? total : d));
    }
    return this.op1('Concat', xs, { axis: int(axis) }, this.dtypeOf(xs[0]!), shape);
  }
  /** Split along `axis` into pieces of the given static sizes. */
  split(x: string, axis: number, sizes: number[]): string[] {
    const s = this.shapeOf(x);
    const infos = sizes.map((n) => {
      if (!s) return { dtype: this.dtypeOf(x) };
      const ax = normAxis(axis, s.length);
      return { dtype: this.dtypeOf(x), shape: s.map((d, i) => (i === ax ? n : d)) };
    });
    return this.op('Split', [x, this.int64s(sizes)], { axis: int(axis) }, sizes.length, infos);
  }
  /** Static slice along the given axes (ends may exceed the dim, as in ONNX). */
  slice(x: string, starts: number[], ends: number[], axes: number[]): string {
    const s = this.shapeOf(x);
    let shape: Shape | undefined;
    if (s) {
      shape = [...s];
      axes.forEach((a, k) => {
        const ax = normAxis(a, s.length);
        const d = s[ax];
        if (typeof d === 'number') {
          const clamp = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
          shape![ax] = Math.max(0, clamp(ends[k]!) - clamp(starts[k]!));
        } else shape![ax] = this.fresh('dim');
      });
    }
    return this.op1('Slice', [x, this.int64s(starts), this.int64s(ends), this.int64s(axes)], {}, this.dtypeOf(x), shape);
  }
  shape(x: string): string {
    const s = this.shapeOf(x);
    return this.op1('Shape', [x], {}, 'int64', s ? [s.length] : undefined);
  }
  expand(x: string, shapeValue: string, inferShape?: Shape): string {
    return this.op1('Expand', [x, shapeValue], {}, this.dtypeOf(x), inferShape);
  }
  /** Range(start, limit, delta) over scalar values of one dtype. */
  range(start: string, limit: string, delta: string, inferShape?: Shape): string {
    return this.op1('Range', [start, limit, delta], {}, this.dtypeOf(start), inferShape);
  }
}

/** ONNX TensorProto.DataType codes. */
export const ONNX_DTYPE: Record<DType, number> = {
  float32: 1, uint8: 2, int8: 3, int32: 6, int64: 7, bool: 9, float16: 10, bfloat16: 16,
};
