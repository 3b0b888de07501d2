/**
 * Serialises the graph IR (./ir.ts) to an ONNX ModelProto with `onnx-proto` (protobufjs).
 *
 * Two ways out:
 * - {@link serializeModel}: one in-memory buffer with every initializer inline. Protobuf caps
 *   a message at 2 GiB, so this is for models whose weights fit comfortably below that.
 * - {@link saveModel}: `<name>.onnx` plus `<name>.onnx.data` next to it, with every large
 *   initializer in the data file (ONNX "external data", offsets 4 KiB-aligned so ONNX
 *   Runtime can map them). Tensors are written one at a time, so lazy initializers stream
 *   from the checkpoint without the whole model ever sitting in JS memory. Load it by path.
 *
 * {@link needsExternalData} tells which one a graph needs.
 */
import fs from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import type { onnx as Onnx } from 'onnx-proto';
import { CONTRIB_DOMAIN, CONTRIB_OPSET, OPSET, ONNX_DTYPE, bytesPerElement, numel, tensorValues, valuesNeededFor, type Attr, type Graph, type Tensor, type Value } from './ir-data.js';

// onnx-proto is CommonJS with a single `module.exports`, so Node ESM sees only a default export.
const { onnx } = onnxProto;

/** ONNX IR version 8 pairs with opset 18 (ONNX 1.13) and loads in ONNX Runtime 1.23. */
const IR_VERSION = 8;
/** Total initializer bytes above which the graph must go to disk with external data. */
export const INLINE_LIMIT_BYTES = 1.5 * 1024 ** 3;
const EXTERNAL_MIN_BYTES = 1024;
const ALIGN = 4096;

export function initializerBytes(graph: Graph): number {
  let total = 0;
  for (const t of graph.initializers.values()) total += numel(t.dims) * bytesPerElement(t.dtype);
  return total;
}

export function needsExternalData(graph: Graph): boolean {
  return initializerBytes(graph) > INLINE_LIMIT_BYTES;
}

function bytesOf(t: Tensor): Uint8Array {
  const v = tensorValues(t);
  const expected = numel(t.dims) * bytesPerElement(t.dtype);
  if (v.byteLength !== expected) {
    throw new Error(`tensor of dtype ${t.dtype} dims [${t.dims}] has ${v.byteLength} bytes, expected ${expected}`);
  }
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

function tensorProto(name: string, t: Tensor, external?: { location: string; offset: number; length: number }): Onnx.ITensorProto {
  const base: Onnx.ITensorProto = { name, dims: t.dims, dataType: ONNX_DTYPE[t.dtype] };
  if (!external) return { ...base, rawData: bytesOf(t) };
  return {
    ...base,
    dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
    externalData: [
      { key: 'location', value: external.location },
      { key: 'offset', value: String(external.offset) },
      { key: 'length', value: String(external.length) },
    ],
  };
}

function attributeProto(name: string, a: Attr): Onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  switch (a.kind) {
    case 'int': return { name, type: T.INT, i: a.value };
    case 'float': return { name, type: T.FLOAT, f: a.value };
    case 'string': return { name, type: T.STRING, s: new TextEncoder().encode(a.value) };
    case 'ints': return { name, type: T.INTS, ints: a.value };
    case 'floats': return { name, type: T.FLOATS, floats: a.value };
    case 'tensor': return { name, type: T.TENSOR, t: tensorProto('', a.value) };
    case 'graph': return { name, type: T.GRAPH, g: graphProto(a.value, []) };
  }
}

function valueInfoProto(v: Value): Onnx.IValueInfoProto {
  if (!v.dtype) return { name: v.name };
  return {
    name: v.name,
    type: {
      tensorType: {
        elemType: ONNX_DTYPE[v.dtype],
        shape: v.shape && { dim: v.shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/**
 * The nodes that lead to a graph output, in order. ONNX Runtime runs every node of a model,
 * and runs one whose result nothing reads last of all, keeping its inputs alive until then: a
 * gradient rule's unused by-product (the attention mask's gradient) kept every layer's
 * [heads, T, T] attention gradient to the end of the training step (docs/design.md §Memory).
 */
export function liveNodes(graph: Graph): Graph['nodes'] {
  const needed = valuesNeededFor(graph.nodes, graph.outputs.map((o) => o.name));
  return graph.nodes.filter((node) => node.outputs.some((o) => needed.has(o)));
}

/** Whether a node of the graph, or of a subgraph (a Loop's body), is one of ONNX Runtime's contrib ops. */
function usesContribOps(graph: Graph): boolean {
  return graph.nodes.some((n) => n.domain === CONTRIB_DOMAIN || Object.values(n.attrs).some((a) => a.kind === 'graph' && usesContribOps(a.value)));
}

function graphProto(graph: Graph, initializers: Onnx.ITensorProto[]): Onnx.IGraphProto {
  return {
    name: graph.name,
    node: liveNodes(graph).map((n) => ({
      name: n.name,
      opType: n.op,
      ...(n.domain ? { domain: n.domain } : {}),
      input: n.inputs,
      output: n.outputs,
      attribute: Object.entries(n.attrs).map(([k, a]) => attributeProto(k, a)),
    })),
    input: graph.inputs.map(valueInfoProto),
    output: graph.outputs.map(valueInfoProto),
    initializer: initializers,
  };
}

function modelProto(graph: Graph, initializers: Onnx.ITensorProto[]): Onnx.IModelProto {
  return {
    irVersion: IR_VERSION,
    producerName: 'hindsight',
    opsetImport: [
      { domain: '', version: OPSET },
      // Only where a node uses one of ONNX Runtime's contrib ops (quantised MatMul: docs/design.md §Quantisation).
      ...(usesContribOps(graph) ? [{ domain: CONTRIB_DOMAIN, version: CONTRIB_OPSET }] : []),
    ],
    graph: graphProto(graph, initializers),
  };
}

/** The whole model as one buffer, weights inline. */
export function serializeModel(graph: Graph): Uint8Array {
  if (needsExternalData(graph)) {
    throw new Error(`graph '${graph.name}' has ${(initializerBytes(graph) / 1024 ** 3).toFixed(2)} GiB of weights: save it with external data (saveModel)`);
  }
  const inits = [...graph.initializers].map(([name, t]) => tensorProto(name, t));
  return onnx.ModelProto.encode(modelProto(graph, inits)).finish();
}

/** Where an initializer's bytes already lie: a file next to the .onnx, at an offset. */
export interface ExternalRef {
  location: string;
  offset: number;
  length: number;
}

/**
 * Writes `onnxPath` and, for initializers of 1 KiB or more, `dataPath` (default `onnxPath +
 * '.data'`; it must be in the same folder, which the model names it relative to).
 * Returns the paths written. Load the model with `InferenceSession.create(onnxPath)`.
 * `placed` names initializers already written elsewhere (a data file shared by several
 * graphs, see ../model/weight-file.ts): they are referenced there, not written again.
 */
export function saveModel(
  graph: Graph,
  onnxPath: string,
  placed?: (name: string, t: Tensor) => ExternalRef | undefined,
  dataPath = onnxPath + '.data',
): { onnxPath: string; dataPath: string } {
  fs.mkdirSync(path.dirname(onnxPath), { recursive: true });
  if (path.dirname(path.resolve(dataPath)) !== path.dirname(path.resolve(onnxPath))) throw new Error(`saveModel: ${dataPath} is not beside ${onnxPath}`);
  const location = path.basename(dataPath);
  const fd = fs.openSync(dataPath, 'w', 0o600);
  const inits: Onnx.ITensorProto[] = [];
  try {
    let offset = 0;
    for (const [name, t] of graph.initializers) {
      const shared = placed?.(name, t);
      if (shared) {
        inits.push(tensorProto(name, t, shared));
        continue;
      }
      const length = numel(t.dims) * bytesPerElement(t.dtype);
      if (length < EXTERNAL_MIN_BYTES) {
        inits.push(tensorProto(name, t));
        continue;
      }
      const bytes = bytesOf(t);
      // store/atomic-file.ts's writeAllSync, which this layer may not import: short writes continued, at most 1 GiB a call.
      for (let done = 0; done < bytes.byteLength; ) done += fs.writeSync(fd, bytes, done, Math.min(1 << 30, bytes.byteLength - done), offset + done);
      inits.push(tensorProto(name, t, { location, offset, length }));
      offset = Math.ceil((offset + length) / ALIGN) * ALIGN;
    }
  } finally {
    fs.closeSync(fd);
  }
  fs.writeFileSync(onnxPath, onnx.ModelProto.encode(modelProto(graph, inits)).finish(), { mode: 0o600 });
  return { onnxPath, dataPath };
}
