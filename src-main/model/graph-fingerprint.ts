/**
 * A fingerprint of a built graph for the graph cache (./graph-cache.ts): a hash of
 * everything its ONNX file holds except the checkpoint's weights, which the cache folder's
 * identity names. Two graphs with the same fingerprint serialise to the same model given the
 * same weights; any change to the builder's output (an op, an attribute, a constant such as
 * the RoPE frequencies, a shape, an initializer's name or dtype) changes it.
 *
 * What it cannot see is how a lazily loaded weight's values are computed from the checkpoint
 * (the transpose of the linears, the quantiser's codes): {@link GRAPH_CACHE_FORMAT} stands for
 * that, and goes up whenever such code changes.
 */
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { tensorValues, type Attr, type Graph, type Tensor, type Value } from '../graph/ir.js';

/**
 * Raise when what a cached file holds changes without the graph changing (weight layout,
 * quantisation). 2: quantised weights in blocks of 128 (older folders held blocks of 32; a new
 * format removes them).
 */
export const GRAPH_CACHE_FORMAT = 2;

/**
 * What a cache folder was written for: {@link GRAPH_CACHE_FORMAT} and the onnxruntime-node
 * version. A cached file holds contrib ops (MatMulNBits' block layout, FusedMatMul) whose
 * schemas belong to one ONNX Runtime, so an upgrade starts new folders and prunes the old ones
 * rather than trusting files an older runtime accepted. Read from the package's own
 * package.json, so this module does not load the native binding (ort-session.ts does).
 */
export const GRAPH_CACHE_VERSION = `${GRAPH_CACHE_FORMAT}/onnxruntime-node ${(createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version}`;

export function graphFingerprint(graph: Graph): string {
  const h = crypto.createHash('sha256');
  const text = (s: string) => h.update(`${s}\u0000`);
  const value = (v: Value) => text(`${v.name}:${v.dtype ?? ''}:${(v.shape ?? []).join(',')}`);
  const tensor = (t: Tensor, withData: boolean) => {
    text(`${t.dtype}[${t.dims.join(',')}]`);
    if (!withData) return text('lazy');
    const v = tensorValues(t);
    h.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  };
  const attr = (a: Attr) => (a.kind === 'tensor' ? tensor(a.value, true) : a.kind === 'graph' ? structure(a.value) : text(`${a.kind}=${JSON.stringify(a.value)}`));
  /** Names, inputs, outputs and nodes: all of a graph but its initializers (a subgraph has none of its own). */
  function structure(g: Graph): void {
    text(g.name);
    g.inputs.forEach(value);
    text('|');
    g.outputs.forEach(value);
    for (const n of g.nodes) {
      text(`${n.domain ?? ''}:${n.op}:${n.name}:${n.inputs.join(',')}>${n.outputs.join(',')}`);
      for (const key of Object.keys(n.attrs).sort()) {
        text(key);
        attr(n.attrs[key]!);
      }
    }
    text('end graph');
  }
  text(`format ${GRAPH_CACHE_VERSION}`);
  structure(graph);
  for (const [name, t] of graph.initializers) {
    text(name);
    // A checkpoint weight's values come from the folder the identity names; constants are hashed.
    tensor(t, typeof t.data !== 'function');
  }
  return h.digest('hex').slice(0, 20);
}
