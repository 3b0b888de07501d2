/**
 * The graph IR as plain data: tensors, values, nodes, attributes and graphs, with the small
 * helpers every part of the IR uses (attribute readers, tensor constructors, broadcasting).
 * ./ir.ts explains the model and re-exports all of this next to the builder; this module
 * has no imports, so the op records (./ops/) can use it without going through the builder.
 */
export const OPSET = 18;
/** ONNX Runtime's contrib op domain, and the version of it that graphs using its ops import. */
export const CONTRIB_DOMAIN = 'com.microsoft';
export const CONTRIB_OPSET = 1;

export type DType = 'float32' | 'float64' | 'float16' | 'bfloat16' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool';
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
  | { kind: 'tensor'; value: Tensor }
  /** A subgraph (Loop's body): its nodes read outer values by name; its initializers stay in the outer graph. */
  | { kind: 'graph'; value: Graph };

export interface Node {
  op: string;
  /** The op's domain: absent for standard ONNX ops, CONTRIB_DOMAIN for ONNX Runtime's contrib ops. */
  domain?: typeof CONTRIB_DOMAIN;
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

/**
 * The values that `targets` depend on, themselves included: a walk back over `nodes` (in
 * topological order) from the targets through every node that makes one of them.
 */
export function valuesNeededFor(nodes: Node[], targets: Iterable<string>): Set<string> {
  const needed = new Set(targets);
  for (let i = nodes.length - 1; i >= 0; i--) {
    const node = nodes[i]!;
    if (node.outputs.some((o) => needed.has(o))) for (const input of node.inputs) if (input) needed.add(input);
  }
  return needed;
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
    case 'int64': case 'float64': return 8;
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

/** A negative axis counted from the end, as a plain index. */
export const normAxis = (axis: number, rank: number): number => (axis < 0 ? axis + rank : axis);

/** ONNX TensorProto.DataType codes. */
export const ONNX_DTYPE: Record<DType, number> = {
  float32: 1, uint8: 2, int8: 3, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11, bfloat16: 16,
};

/** The DType of an ONNX TensorProto.DataType code (Cast's `to`). */
export function dtypeOfCode(code: number): DType | undefined {
  return (Object.keys(ONNX_DTYPE) as DType[]).find((d) => ONNX_DTYPE[d] === code);
}
