/**
 * The decoder's softmax attention, in the graph IR, in one of four shapes:
 * - in one piece: softmax(q·kᵀ·scale + mask)·v (Gemma 2: softmax(c·tanh(q·kᵀ·scale / c) + mask)·v);
 * - after a decode cache (inference): the cache's slots, then the current tokens, without
 *   joining them (docs/design.md §Batched generation);
 * - over a written decode cache (inference, the GPU-resident cache): the graph writes the
 *   current tokens' keys and values into the cache's slots ({@link cacheWriter}), and attention
 *   reads the whole cache, keys stored as q·kᵀ reads them (docs/design.md §Devices);
 * - in chunks of query rows (long rows): no [heads, T, T] value is made; in training each
 *   chunk's nodes are a span that the backward pass recomputes on its own (docs/design.md
 *   §Memory), and in an inference graph each chunk reads only the keys it may see.
 *
 * An inference graph (`inference`: only run, never differentiated) computes q·kᵀ with ONNX
 * Runtime's FusedMatMul instead of MatMul against transposed keys (docs/design.md §Scoring),
 * unless `fusedScores` is off for an execution provider without that op (§Devices).
 *
 * Queries are grouped [B, kv, rep, T, d] and keys and values [B, kv, S, d] broadcast across
 * each group in MatMul, so they are never copied per head.
 */
import { float, int, type GraphBuilder } from '../graph/ir.js';
import { softcap } from './softcap.js';

export interface AttentionInputs {
  /** Grouped queries [B, kv, rep, T, d]. */
  q: string;
  /** The current tokens' keys and values [B, kv, T, d]. */
  k: string;
  v: string;
  /** 1/√d. */
  scale: number;
  /** Gemma 2's cap c on the scaled scores, c·tanh(s / c) before the mask; absent: none. */
  softcap?: number;
  /** Additive mask [B, 1, 1, T, S]: 0 where a query may look, a large negative number elsewhere. */
  maskBias: string;
}

export interface AttentionOptions {
  /** A decode cache's keys and values [B, kv, P, d], before the current tokens. */
  past?: { keys: string; values: string };
  /** A written decode cache ({@link cacheWriter}): the only keys and values read; `k` and `v` are ignored. */
  written?: WrittenCache;
  /** Query chunks (from {@link queryChunks}); not with `past`. */
  chunks?: QueryChunks;
  /** Receives each chunk's node span [start, end) in graph.nodes, for recomputation. */
  blockSpans?: { start: number; end: number }[];
  /**
   * The graph is only run, never differentiated (docs/design.md §Scoring, "Attention in an
   * inference graph"): q·kᵀ is ONNX Runtime's FusedMatMul, reading the keys untransposed, which
   * autodiff has no rule for. Its chunks come from {@link queryChunks} with `causalKeys`, so
   * each reads only the keys its rows may see.
   */
  inference?: boolean;
  /**
   * With `inference`: q·kᵀ as FusedMatMul (default true). Off for an execution provider that has
   * no kernel for it (WebGPU), where ONNX Runtime would run every layer's scores on the CPU
   * (docs/design.md §Devices); the keys are then transposed for a MatMul, as in training.
   */
  fusedScores?: boolean;
}

export interface AttentionChunking {
  /** Query rows per chunk. */
  rows: number;
  /** The row length up to which attention stays in one piece. */
  above: number;
  /**
   * Bytes of one layer's fp32 [heads, T, T] value past which attention is chunked at shorter
   * rows too (more than `rows` tokens), for models with many heads; default: by length only.
   */
  scoreBytes?: number;
}

/**
 * Attention in chunks of 1,024 query rows past 2,048 tokens, or past 256 MiB per [heads, T, T]
 * value (docs/design.md §Memory). Past 2,048 tokens one layer's [heads, T, T] attention values
 * outgrow the rest of a training step or a score (Qwen3-0.6B shape at 8,192 tokens: 4.3 GB
 * each); in chunks each is [heads, 1,024, T]. Up to 2,048 they are small beside the rest at 16
 * heads (0.27 GB), and chunks would cost the step a third pass through attention for nothing;
 * at 32 heads (Qwen3-8B, Llama 3.1 8B) they are 0.5 GB each at 2,048 tokens, and two chunks took
 * 1.1 GB off the 8B shape's step (docs/design.md §QLoRA).
 */
export const ATTENTION_CHUNKING: AttentionChunking = { rows: 1024, above: 2048, scoreBytes: 256 * 2 ** 20 };

/**
 * Scoring's attention chunks: 512 query rows each, past 1,024 tokens. In an inference graph each
 * chunk reads only the keys its rows can see ({@link attend}), so chunks skip work as well as
 * memory; but a chunked fp32 session reads the weights unpacked (./inference-engine.ts),
 * which costs about what the skipped keys save up to about 1,280 tokens. Measured through the
 * engine on the Qwen3-0.6B shape, 2 threads, one row (chunked vs one piece): 1,024 tokens
 * 9.3–10.1 s vs 8.3–9.4 s; 1,280 tokens 10.5–11.8 s vs 10.7–11.7 s; 2,048 tokens 19.6–21.6 s vs
 * 24.2–24.4 s.
 */
export const SCORE_ATTENTION_CHUNKING: AttentionChunking = { rows: 512, above: 1024 };

/**
 * How many query chunks an inference graph (score, evaluation's scorer) for rows of up to
 * `length` tokens uses: none up to `above`, else a power of two with chunks of at most `rows`
 * rows, so a few graphs serve every length (the chunks' sizes follow the run's T).
 */
export function attentionChunksFor(length: number, chunking: AttentionChunking = ATTENTION_CHUNKING): number | undefined {
  if (!chunksAttention(length, chunking)) return undefined;
  return 2 ** Math.ceil(Math.log2(Math.ceil(length / chunking.rows)));
}

/**
 * Whether rows of `length` tokens are past the length up to which attention stays in one piece:
 * `chunking.above`, or for a model of `heads` query heads, the length whose [heads, T, T] fp32
 * value passes `chunking.scoreBytes`.
 */
export function chunksAttention(length: number, chunking: AttentionChunking = ATTENTION_CHUNKING, heads?: number): boolean {
  if (length <= chunking.rows) return false;
  return length > chunking.above || (heads !== undefined && chunking.scoreBytes !== undefined && 4 * heads * length ** 2 > chunking.scoreBytes);
}

/** The attention context [B, kv, rep, T, d]. */
export function attend(b: GraphBuilder, x: AttentionInputs, options: AttentionOptions = {}): string {
  const fused = (options.inference ?? false) && (options.fusedScores ?? true);
  const scores = (q: string, keys: string) => softcap(b, scaledScores(b, q, keys, x.scale, fused), x.softcap);
  if (options.past) return attendAfterCache(b, x, options.past, fused, scores);
  if (options.written) {
    const keys = b.unsqueeze(options.written.keys, [2]); // [B, kv, 1, d, C], as q·kᵀ reads them
    return b.matmul(b.softmax(b.add(softcap(b, scaledScores(b, x.q, keys, x.scale, fused, true), x.softcap), x.maskBias), -1), valueRows(b, options.written.values));
  }
  const keys = keyOperand(b, x.k, fused);
  const v = valueRows(b, x.v);
  const block = (rows: string, k: string, mask: string, values: string) => b.matmul(b.softmax(b.add(scores(rows, k), mask), -1), values);
  const chunks = options.chunks;
  if (!chunks) return block(x.q, keys, x.maskBias, v);
  // Keys, values and mask cover the same positions: saying so lets each chunk's gradients know
  // their shapes while the graph is built, with no run-time sum-to-shape (see withDim).
  const keyCount = b.shapeOf(x.maskBias)?.[4];
  withDim(b, keys, keyAxis(fused), keyCount);
  withDim(b, v, 3, keyCount);
  const count = chunks.dims.length;
  const qChunks = splitRows(b, withZeroRows(b, x.q, count, QUERY_AXIS), chunks.sizes, chunks.dims, QUERY_AXIS);
  const contexts = qChunks.map((qc, c) => {
    const start = b.graph.nodes.length;
    const mask = chunks.masks[c]!;
    let context: string;
    const seen = chunks.seenKeys?.[c];
    if (seen) {
      // Only the keys this chunk's rows may see (its mask is cut to them once, in queryChunks):
      // the rest of its q·kᵀ would be masked to zero.
      context = block(qc, sliceUpTo(b, keys, seen, keyAxis(fused)), mask, sliceUpTo(b, v, seen, 3));
    } else {
      context = block(qc, keys, mask, v);
    }
    options.blockSpans?.push({ start, end: b.graph.nodes.length });
    return context;
  });
  const context = b.concat(contexts, QUERY_AXIS);
  return splitRows(b, context, chunks.realRows, [b.shapeOf(x.q)?.[QUERY_AXIS] ?? 'T', count], QUERY_AXIS)[0]!;
}

/**
 * Attention over a decode cache's P slots, then the T current tokens. The cache is read where it
 * lies, never joined to the new keys (a copy of the whole cache per step and layer): the two
 * parts' scores are joined instead (small), and the context is the sum of the two parts' products.
 */
function attendAfterCache(b: GraphBuilder, x: AttentionInputs, past: { keys: string; values: string }, fused: boolean, scores: (q: string, keys: string) => string): string {
  const raw = b.concat([scores(x.q, keyOperand(b, past.keys, fused)), scores(x.q, keyOperand(b, x.k, fused))], -1);
  const probs = b.softmax(b.add(raw, x.maskBias), -1); // [B, kv, rep, T, P + T]
  const slots = b.slice(b.shape(past.keys), [2], [3], [0]); // [P]
  const sizes = b.concat([slots, b.slice(b.shape(x.k), [2], [3], [0])], 0); // [P, T]
  const shape = b.shapeOf(probs);
  const part = (last: string | number) => ({ dtype: 'float32' as const, shape: shape && [...shape.slice(0, -1), last] });
  const [pastProbs, newProbs] = b.op('Split', [probs, sizes], { axis: int(-1) }, 2, [part('P'), part('T')]);
  return b.add(b.matmul(pastProbs!, valueRows(b, past.values)), b.matmul(newProbs!, valueRows(b, x.v)));
}

/**
 * Keys [B, kv, S, d] as q·kᵀ's right operand, broadcast across each query group: as they lie,
 * [B, kv, 1, S, d], for FusedMatMul (transB); transposed, [B, kv, 1, d, S], for a MatMul (the
 * graphs autodiff differentiates, and inference graphs without `fusedScores`).
 */
function keyOperand(b: GraphBuilder, k: string, fused: boolean): string {
  const rows = b.unsqueeze(k, [2]);
  return fused ? rows : b.transpose(rows, [0, 1, 2, 4, 3]);
}

/** The keys' axis in {@link keyOperand}'s value. */
function keyAxis(fused: boolean): number {
  return fused ? 3 : 4;
}

/**
 * q·kᵀ·scale for grouped queries q [B, kv, rep, T, d] and keys [B, kv, 1, S, d] (`transposed`
 * false: FusedMatMul reads them with transB) or [B, kv, 1, d, S] (true): [B, kv, rep, T, S].
 */
function scaledScores(b: GraphBuilder, q: string, keys: string, scale: number, fused: boolean, transposed = !fused): string {
  if (!fused) return b.mul(b.matmul(q, keys), b.scalar(scale));
  const qShape = b.shapeOf(q), kShape = b.shapeOf(keys);
  const shape = qShape && kShape && [...qShape.slice(0, -1), kShape[transposed ? 4 : 3]!];
  return b.contribOp('FusedMatMul', [q, keys], { transB: int(transposed ? 0 : 1), alpha: float(scale) }, { dtype: 'float32', shape });
}

/**
 * A decode cache that the graph writes into (the GPU-resident cache, ./device-kv-cache.ts):
 * every layer's keys [B, kv, d, C], stored transposed as q·kᵀ reads them (no Transpose of the
 * whole cache per step and layer), and values [B, kv, C, d]; C slots, filled or not, as the
 * attention mask says.
 */
export interface WrittenCache {
  keys: string;
  values: string;
}

/** The slot axis of a {@link WrittenCache}'s keys and values. */
export const WRITTEN_SLOT_AXIS = { key: 3, value: 2 } as const;

/** A {@link WrittenCache}'s dims, keys or values, for `rows` rows of `slots` slots. */
export function writtenCacheDims<D extends number | string>(kind: 'key' | 'value', rows: D, kvHeads: number, headDim: number, slots: D): (number | D)[] {
  return kind === 'key' ? [rows, kvHeads, headDim, slots] : [rows, kvHeads, slots, headDim];
}

/**
 * Writes a step's keys [B, kv, d, T] (transposed) and values [B, kv, T, d] into a
 * {@link WrittenCache} at `slots` (int64 [T], the same for every row): one ScatterElements per
 * tensor, which leaves the cache as it was elsewhere and returns it whole. The slots' indices,
 * expanded to the step's shapes, are made once and shared by every layer.
 */
export function cacheWriter(b: GraphBuilder, slots: string): (past: WrittenCache, keys: string, values: string) => WrittenCache {
  let indices: { keys: string; values: string } | undefined;
  // `slots` laid along `axis` and expanded to x's shape: each element's slot.
  const along = (x: string, axis: number) => b.expand(b.reshape(slots, [0, 1, 2, 3].map((a) => (a === axis ? -1 : 1))), b.shape(x), b.shapeOf(x));
  const scatter = (into: string, at: string, update: string, axis: number) =>
    b.op('ScatterElements', [into, at, update], { axis: int(axis) }, 1, [{ dtype: 'float32', shape: b.shapeOf(into) }])[0]!;
  const { key, value } = WRITTEN_SLOT_AXIS;
  return (past, keys, values) => {
    indices ??= { keys: along(keys, key), values: along(values, value) };
    return { keys: scatter(past.keys, indices.keys, keys, key), values: scatter(past.values, indices.values, values, value) };
  };
}

/** Values [B, kv, S, d] as [B, kv, 1, S, d], broadcast across each query group. */
function valueRows(b: GraphBuilder, v: string): string {
  return b.unsqueeze(v, [2]);
}

/**
 * How attention's query rows are cut (docs/design.md §Memory): `count` chunks over T + count
 * rows, chunk c starting at ⌊c·(T + count) / count⌋. The queries and the mask get `count` zero
 * rows at the end, whose results are dropped, so that no chunk is ever empty whatever T is
 * (ONNX Runtime computes a gradient through an empty chunk wrongly: a MatMul over zero rows
 * leaves its output unset). Made once per graph: every layer shares the sizes and the mask's
 * chunks (made per layer, a recomputed layer would remake its mask chunks at once, all of them).
 */
export interface QueryChunks {
  sizes: string;
  /** Each chunk's row count, named for shape inference. */
  dims: string[];
  /** Each chunk's rows of the mask; with `seenKeys`, only the columns of the keys it may see. */
  masks: string[];
  /**
   * With `causalKeys` (inference graphs only: a run-time Slice bound has no gradient): how many
   * keys each chunk's rows may see, int64 [1]; {@link attend} then reads only those.
   */
  seenKeys?: string[];
  /** The sizes that drop the padding rows again: [T, count]. */
  realRows: string;
}

export function queryChunks(b: GraphBuilder, maskBias: string, count: number | undefined, causalKeys = false): QueryChunks | undefined {
  if (!count || count < 2) return undefined;
  const rows = b.gather(b.shape(maskBias), b.scalar(QUERY_AXIS, 'int64'), 0);
  const padded = b.add(rows, b.scalar(count, 'int64'));
  const bounds = Array.from({ length: count + 1 }, (_, c) => b.div(b.mul(padded, b.scalar(c, 'int64')), b.scalar(count, 'int64')));
  const sizes = b.concat(bounds.slice(1).map((end, c) => b.unsqueeze(b.sub(end, bounds[c]!), [0])), 0);
  const dims = Array.from({ length: count }, () => b.fresh('chunk_rows'));
  const masks = splitRows(b, withZeroRows(b, maskBias, count, QUERY_AXIS), sizes, dims, QUERY_AXIS);
  const realRows = b.concat([b.unsqueeze(rows, [0]), b.int64s([count])], 0);
  if (!causalKeys) return { sizes, dims, masks, realRows };
  // A chunk ending at padded row e may see keys [0, e + S − T); past S (padding rows), Slice clamps.
  const before = keysBeforeQueries(b, maskBias);
  const seenKeys = bounds.slice(1).map((end) => b.add(b.unsqueeze(end, [0]), before));
  return { sizes, dims, masks: masks.map((mask, c) => sliceUpTo(b, mask, seenKeys[c]!, 4)), seenKeys, realRows };
}

/**
 * S − T, int64 [1]: how many keys come before the first query. Keys are the mask's last axis,
 * queries its rows, and the queries are the last T of the S positions.
 */
function keysBeforeQueries(b: GraphBuilder, maskBias: string): string {
  const shape = b.shape(maskBias);
  return b.sub(b.slice(shape, [4], [5], [0]), b.slice(shape, [QUERY_AXIS], [QUERY_AXIS + 1], [0]));
}

/** x's first `count` entries (int64 [1], run-time) along `axis`. */
function sliceUpTo(b: GraphBuilder, x: string, count: string, axis: number): string {
  const shape = b.shapeOf(x)!;
  const info = { dtype: b.dtypeOf(x) ?? ('float32' as const), shape: shape.map((d, i) => (i === axis ? b.fresh('seen_keys') : d)) };
  return b.op('Slice', [x, b.int64s([0]), count, b.int64s([axis])], {}, 1, [info])[0]!;
}

/** The query axis of grouped queries [B, kv, rep, T, d] and of the mask bias [B, 1, 1, T, S]. */
const QUERY_AXIS = 3;

/** x with `count` rows of zeros appended along `axis`. */
function withZeroRows(b: GraphBuilder, x: string, count: number, axis: number): string {
  const shape = b.shape(x);
  const rank = b.shapeOf(x)!.length;
  const zerosShape = b.concat([b.slice(shape, [0], [axis], [0]), b.int64s([count]), b.slice(shape, [axis + 1], [rank], [0])], 0);
  const zeroValue = { kind: 'tensor' as const, value: { dtype: 'float32' as const, dims: [1], data: Float32Array.of(0) } };
  const zeros = b.op('ConstantOfShape', [zerosShape], { value: zeroValue }, 1, [{ dtype: 'float32', shape: b.shapeOf(x)!.map((d, i) => (i === axis ? count : d)) }])[0]!;
  return b.concat([x, zeros], axis);
}

/** x split along `axis` into pieces of the run-time `sizes`, each piece's size there named `dims`. */
function splitRows(b: GraphBuilder, x: string, sizes: string, dims: (string | number)[], axis: number): string[] {
  const shape = b.shapeOf(x)!;
  const infos = dims.map((dim) => ({ dtype: b.dtypeOf(x) ?? ('float32' as const), shape: shape.map((d, i) => (i === axis ? dim : d)) }));
  return b.op('Split', [x, sizes], { axis: int(axis) }, dims.length, infos);
}

/**
 * Records that `x` has size `dim` (symbolic) along `axis`, where the builder's shape inference
 * gave it a fresh name, so the gradients through it know their shapes while the graph is built.
 */
function withDim(b: GraphBuilder, x: string, axis: number, dim: string | number | undefined): string {
  const info = b.graph.values.get(x);
  if (info?.shape && dim !== undefined) info.shape = info.shape.map((d, i) => (i === axis ? dim : d));
  return x;
}
