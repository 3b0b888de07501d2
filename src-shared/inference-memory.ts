/**
 * What a model needs in memory to answer or be measured: the Chat page, `/v1`, the local judge,
 * evaluations, the token view, `score`, `generate` and `rollout` (docs/design.md §Memory for
 * inference). Training has its own
 * estimate (./train-memory.ts); this one prices a loaded inference engine, and picks the form
 * of its weights that fits: a 7–8B GGUF is 4–5 GB as its user runs it in Ollama, but 33 GB once
 * dequantised to fp32, which a 16 GB laptop cannot hold.
 *
 * The estimate, in bytes (each part as the engine holds it, src-main/model/inference-engine.ts):
 * - weights: the seven projections in fp32 (fp16 where the base runs in half precision), or as
 *   int8 / int4 MatMulNBits blocks of 128 under `--quantize`; the LM head's rows in fp32 (tied:
 *   the embedding itself, which the head reads whole every token; with what ONNX Runtime keeps
 *   beside them, {@link FP32_HEAD_COPIES}), or as int8 blocks under
 *   either quantisation (src-main/model/quantize.ts HEAD_SCHEME). An untied embedding table is
 *   read only at the rows a prompt gathers, so its other pages of the mapped weight file are
 *   never resident (as the training estimate counts it).
 * - cache: the decode cache, the keys and values of every layer (fp32, or fp16 under
 *   `cachePrecision`), for `rows` rows of `contextTokens` slots in whole blocks (a chat of
 *   {@link INFERENCE_CONTEXT} tokens by default; the chat's limit, {@link fittingChat}, holds it there).
 * - runtime: Node and ONNX Runtime, the tokenizer, the allocator's share that grows with the
 *   vocabulary (the training estimate's coefficients); activations: a prefill step's, a piece
 *   of {@link PREFILL_PIECE} prompt tokens (fewer at long chats: prefillPieceAt) through a layer
 *   and its attention scores over the context (with an fp16 cache, that layer's keys and values
 *   read as fp32 too).
 * A CUDA load needs room on the card too ({@link cudaInferenceBytes}).
 *
 * Fitted to the decode peaks docs/benchmarks.md quotes (*Real-size models*: the 125M and the
 * Qwen2.5-1.5B shape in fp32, int8 and int4, and the Qwen3-0.6B shape prefilling 8,192 tokens);
 * test/model/inference-fit.test.ts holds it within {@link INFERENCE_MARGIN} of them.
 */
import { COEFFICIENTS, PREFILL_PIECE, SLOT_BLOCK, prefillPieceAt, quantizedBytes, targetDims, type ModelShape } from './train-memory.js';
import { LORA_TARGETS, QUANTIZE_CHOICES, type Precision, type Quantize } from './training.js';
import { CHUNK_CACHE_COPIES, CUDA_CONTEXT_BYTES } from './memory-verdict.js';

/** The chat length a load plans its decode cache for, in tokens (capped at the model's positions). */
export const INFERENCE_CONTEXT = 4096;

/**
 * The decode cache's values: fp32, or fp16 (half the memory, so chats twice as long) where fp32
 * would cut the model's chats short on the CPU (src-main/model/kv-cache.ts, {@link fittingChat}).
 */
export type CachePrecision = 'fp32' | 'fp16';

/** How far the estimate may be from a measured peak, either way (the test holds it to this). */
export const INFERENCE_MARGIN = 0.2;

/**
 * The fp32 head's rows, in copies of the table: the measured fp32 peaks hold some 0.6–0.8 of the
 * table more than its one copy (the 125M, the 0.6B and 1.5B shapes), which the quantised ones,
 * whose head is its int8 blocks, do not.
 */
const FP32_HEAD_COPIES = 1.7;
/** Copies of one layer's per-token values, and of its attention scores, alive in a prefill step (fitted; see the module comment). */
const PREFILL_LAYER_COPIES = 2;
const PREFILL_SCORE_COPIES = 4.5;

export interface InferenceLoad {
  quantize: Quantize;
  /** The base's arithmetic where not quantised; default fp32. */
  precision?: Precision;
  /** Slots per row the decode cache is planned for; default {@link INFERENCE_CONTEXT} (at most the model's positions). */
  contextTokens?: number;
  /** Rows decoded together; default 1. */
  rows?: number;
  /**
   * Engines of the model loaded together (a chat's base and adapter sides), each with its own
   * cache and runtime; the weights are one mapped file that all of them read. Default 1.
   */
  engines?: number;
  /** A live adapter's parameters, fed in fp32 beside the base. Default 0. */
  loraParameters?: number;
  /** The decode cache's values; default fp32. */
  cachePrecision?: CachePrecision;
}

export interface InferenceEstimate {
  weights: number;
  cache: number;
  /** Node, ONNX Runtime, the tokenizer and the allocator's share that grows with the vocabulary. */
  runtime: number;
  /** A prefill step's activations and attention scores. */
  activations: number;
  /** What the host's memory holds: all of the above (a CUDA load's weights are also in the mapped file, its cache in host memory). */
  total: number;
}

/** The projections, the head and the norms as an inference engine holds them (see the module comment). */
export function inferenceWeightBytes(shape: ModelShape, quantize: Quantize, precision: Precision = 'fp32'): number {
  let projections = 0;
  for (const t of LORA_TARGETS) {
    const [inF, outF] = targetDims(shape, t);
    projections += quantize === 'none' ? inF * outF * (precision === 'fp16' ? 2 : 4) : quantizedBytes(outF, inF, quantize === 'int8' ? 8 : 4);
  }
  const head = quantize === 'none' ? FP32_HEAD_COPIES * shape.vocabSize * shape.hiddenSize * 4 : quantizedBytes(shape.vocabSize, shape.hiddenSize, 8);
  const norms = shape.numLayers * (2 * shape.hiddenSize + 2 * shape.headDim) + shape.hiddenSize;
  return shape.numLayers * projections + head + norms * 4;
}

/** The estimate for `load.engines` engines of the model loaded together (see the module comment). */
export function estimateInferenceMemory(shape: ModelShape, load: InferenceLoad): InferenceEstimate {
  const rows = load.rows ?? 1;
  const context = Math.min(load.contextTokens ?? INFERENCE_CONTEXT, shape.maxPositionEmbeddings);
  const slots = Math.max(1, Math.ceil(context / SLOT_BLOCK)) * SLOT_BLOCK;
  const engines = load.engines ?? 1;
  const weights = inferenceWeightBytes(shape, load.quantize, load.precision) + 4 * (load.loraParameters ?? 0);
  const half = load.cachePrecision === 'fp16';
  const layerCache = 2 * shape.numKvHeads * shape.headDim * slots * rows; // keys and values, one layer
  const cache = engines * shape.numLayers * layerCache * (half ? 2 : 4);
  const H = shape.hiddenSize, q = shape.numHeads * shape.headDim, kv = shape.numKvHeads * shape.headDim, I = shape.intermediateSize;
  // A prefill step of a chat as long as the cache: its piece shrinks as the keys grow (prefillPieceAt).
  const piece = prefillPieceAt(rows, Math.min(PREFILL_PIECE, context), shape.numHeads, slots) * rows;
  // An fp16 cache is read a layer at a time as fp32 (src-main/model/decoder.ts halfCache).
  const activations = engines * 4 * (piece * (PREFILL_LAYER_COPIES * (6 * H + 5 * q + 4 * kv + 5 * I) + PREFILL_SCORE_COPIES * shape.numHeads * slots) + (half ? layerCache : 0));
  const c = COEFFICIENTS;
  const runtime = engines * (c.runtime + c.tableCopies * shape.vocabSize * H * 4 + c.tokenizerPerToken * shape.vocabSize);
  return { weights, cache, runtime, activations, total: weights + cache + runtime + activations };
}

/**
 * What the same engines need on a CUDA card: each engine's generation session holds its own copy
 * of the weights (ONNX Runtime's CUDA provider copies a session's initializers to the card), the
 * decode chunk run takes the rows' cache to the card and carries it grown inside its Loop
 * ({@link CHUNK_CACHE_COPIES} copies: src-main/model/decode-chunk-graph.ts), a prefill step's
 * activations, and the CUDA context once ({@link CUDA_CONTEXT_BYTES}). Read from the engine's
 * graphs, as the training step's card estimate is; not measured on a card.
 */
export function cudaInferenceBytes(shape: ModelShape, load: InferenceLoad): number {
  const e = estimateInferenceMemory(shape, load);
  return (load.engines ?? 1) * e.weights + CHUNK_CACHE_COPIES * e.cache + e.activations + CUDA_CONTEXT_BYTES;
}

/** A form's name: the unquantised one is the base's precision (fp32; fp16 on CUDA by default). */
export const formName = (quantize: Quantize, precision: Precision = 'fp32'): string => (quantize === 'none' ? precision : quantize);

/** The weights' forms from the most exact to the smallest, as a load tries them. */
export const INFERENCE_FORMS: readonly Quantize[] = QUANTIZE_CHOICES;

/** The room a load must fit in: the host's available bytes, and a CUDA card's free bytes where it is read (else null). */
export interface InferenceRoom {
  host: number;
  gpu: number | null;
}

/** Whether `load` fits `room`: the host's memory, and the card's where it is known. */
export function fitsRoom(shape: ModelShape, load: InferenceLoad, room: InferenceRoom): boolean {
  return estimateInferenceMemory(shape, load).total <= room.host && (room.gpu === null || cudaInferenceBytes(shape, load) <= room.gpu);
}

/** `--quantize auto`: the most exact form (fp32 or the device's fp16, then int8, then int4) that fits `room`; null when not even int4 fits. */
export function fittingForm(shape: ModelShape, room: InferenceRoom, load: Omit<InferenceLoad, 'quantize'> = {}): Quantize | null {
  return INFERENCE_FORMS.find((quantize) => fitsRoom(shape, { ...load, quantize }, room)) ?? null;
}

/**
 * The longest chat, in tokens, whose decode cache (and prefill) fits `room` beside the rest of
 * `load`: the model's positions where they all fit, else a whole number of cache blocks. A load
 * that fits at all fits {@link INFERENCE_CONTEXT} tokens (or its positions), so the answer is at
 * least that; a model that answers within it is refused a longer prompt in one line rather than
 * growing its cache into swap or the OOM killer mid-chat (src-main/model/inference-fit.ts).
 */
function fittingContext(shape: ModelShape, load: InferenceLoad, room: InferenceRoom): number {
  const positions = shape.maxPositionEmbeddings;
  const fits = (tokens: number) => fitsRoom(shape, { ...load, contextTokens: tokens }, room);
  if (fits(positions)) return positions;
  // lo fits (or is the planned chat, which the form was chosen for), hi does not: bisect in whole blocks.
  let lo = Math.min(INFERENCE_CONTEXT, positions), hi = positions;
  while (hi - lo > SLOT_BLOCK) {
    const mid = Math.floor((lo + hi) / 2 / SLOT_BLOCK) * SLOT_BLOCK;
    if (mid <= lo) break;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** The longest chat a load answers ({@link fittingContext}) and the decode cache's precision for it. */
export interface FittingChat {
  tokens: number;
  cachePrecision: CachePrecision;
}

/**
 * The longest chat that fits `room` beside `load`, with its cache in fp32, or in fp16 where fp32
 * would hold fewer tokens than the model's positions and `halfCache` allows it (the CPU's host
 * cache: src-main/model/kv-cache.ts). Qwen3-8B in int4 with 10 GB available: 14,272 tokens in
 * fp32, 27,456 in fp16. An fp16 cache is read as fp32 a layer at a time, which ONNX Runtime's CPU
 * does in an extra pass (`npm run bench:decode-cache`), so a model whose positions fit in fp32 keeps it.
 */
export function fittingChat(shape: ModelShape, load: InferenceLoad, room: InferenceRoom, halfCache: boolean): FittingChat {
  const full = fittingContext(shape, { ...load, cachePrecision: 'fp32' }, room);
  if (!halfCache || full >= shape.maxPositionEmbeddings) return { tokens: full, cachePrecision: 'fp32' };
  const half = fittingContext(shape, { ...load, cachePrecision: 'fp16' }, room);
  return half > full ? { tokens: half, cachePrecision: 'fp16' } : { tokens: full, cachePrecision: 'fp32' };
}
