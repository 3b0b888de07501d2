/**
 * Builds the decoder of a Llama (Mistral, Phi-3, Granite, OLMo, GLM-4) / Qwen2 / Qwen3 / Gemma 2 and 3 checkpoint in the graph IR (./graph/ir.ts).
 *
 * Written for autodiff as much as for inference: only standard ONNX ops (but for an inference
 * graph's fused ones: FusedMatMul in attention, `fusedNorms`, `fusedRope`), attention as MatMul →
 * Softmax → MatMul, RMSNorm from Mul/ReduceMean/Add/Sqrt/Reciprocal (./norms.ts), RoPE as
 * x·cos + rotate_half(x)·sin (./rope.ts; GLM-4's over adjacent pairs), SiLU as x·Sigmoid(x)
 * (Gemma's GELU from Tanh). Gemma and GLM-4 norm each residual branch on both sides
 * (ModelConfig.sandwichNorms); Gemma (ModelConfig.gemma, ./gemma-config.ts) adds its sliding
 * layers' masks and RoPE tables (./attention-masks.ts) and Gemma 2's soft-caps (./softcap.ts). The cos/sin tables and the
 * attention mask are computed in the graph from the inputs, upstream of every weight: autodiff prunes them.
 *
 * Graph inputs
 *   input_ids       int64 [B, T]
 *   attention_mask  int64 [B, S]  1 = real token, 0 = padding, over past + current (S = P + T);
 *                                 left or right padding both work
 *   position_ids    int64 [B, T]  positions of the current tokens (padding-aware: the caller
 *                                 counts real tokens, see ./cache-slots.ts positionIdsFromMask)
 *   past_key_<i>, past_value_<i>  float32 [B, kvHeads, P, headDim]  (kvCache only; float16 with
 *                                 `halfCache`, read as fp32 a layer at a time; P ≥ 1: the
 *                                 cache's slots, filled or not, as attention_mask says; see
 *                                 ./kv-cache.ts). kvCache 'written': keys [B, kvHeads, headDim,
 *                                 C] and values [B, kvHeads, C, headDim], C slots that will
 *                                 hold the current tokens too (S = C; ./device-kv-cache.ts)
 *   write_slots     int64 [T]     (kvCache 'written' only) the slots the current tokens go in
 *   target_positions int64 [N]    (output 'target_logprobs' only) flat indices into [B·T] of
 *                                 the positions to score: only these rows go through the LM head
 *   target_ids      int64 [N]     (output 'target_logprobs' only) the token whose log-prob to
 *                                 read at each of those positions (the next token)
 * Graph outputs, by `output`
 *   'logits'           logits float32 [B, T, V]
 *   'last_logprobs'    last_logprobs float32 [B, V] = log_softmax(logits) at the last position
 *                      only (generation; pad left), computed here rather than by the caller
 *   'target_logprobs'  logprobs float32 [N] = log_softmax(logits)[target] at the target
 *                      positions, in fp32 (./score-feeds.ts builds the inputs)
 *   'hidden'           the final norm's output float32 [B, T, H], before the LM head (the
 *                      training step applies the head itself, in vocabulary chunks: see
 *                      {@link headRows} and ./chunked-head.ts); with `hiddenRows`, only
 *                      those rows of it, [N, H]
 *   new_key_<i>, new_value_<i> float32 [B, kvHeads, T, headDim]  (kvCache 'appended'; float16 with `halfCache`) the
 *                      current tokens' keys and values, which the caller writes into its cache
 *   present_key_<i>, present_value_<i>  (kvCache 'written') the cache with the current tokens
 *                      written in, laid out as past_key_<i>, past_value_<i>
 *
 * Weights are initializers named after the Hugging Face tensors. Linear weights are stored
 * transposed, as `<hf name>.T` with shape [in, out], so each linear is one MatMul. The LM head
 * is read as stored, [V, H] rows (the embedding when tied), by a Gemm with transB.
 *
 * LoRA hook: every q/k/v/o/gate/up/down projection goes through `options.linear`, which
 * receives the site (layer, target, HF module path, input value, sizes) and the base
 * output value (x·Wᵀ + b) and returns the value to use instead, e.g. base + x·Aᵀ·Bᵀ·s.
 */
import { GraphBuilder, int, tensorValues, type Graph } from '../graph/ir.js';
import type { Checkpoint } from './hf-checkpoint.js';
import { applyRope, ropeTables } from './rope.js';
import { normBuilders } from './norms.js';
import { attend, cacheWriter, queryChunks, writtenCacheDims } from './attention.js';
import { attentionMasks } from './attention-masks.js';
import { DEFAULT_VOCAB_CHUNK, appendTargetLogprobs } from './chunked-head.js';
import { HEAD_SCHEME, type QuantScheme } from './quantize.js';
import { halfPrecisionMatmul, halfTable } from './half-matmul.js';
import type { Precision } from '../../src-shared/training.js';
import { nativeBlocksOf, quantizedMatmul, quantizedTargetLogprobs } from './quantized-matmul.js';
import type { WeightSource } from './weight-source.js';
import { firstOutputRow, positionsFrom, rowsFrom } from './output-rows.js';
import { applyHead, headName, headRows } from './lm-head.js';
import { SANDWICH_NORMS } from './model-config.js';
import { softcap } from './softcap.js';

export { headRows };

export type { WeightSource };

export type LinearTarget = 'q' | 'k' | 'v' | 'o' | 'gate' | 'up' | 'down';
export const LINEAR_TARGETS: readonly LinearTarget[] = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'];

export interface LinearSite {
  layer: number;
  target: LinearTarget;
  /** HF module path, e.g. `model.layers.3.self_attn.q_proj` (PEFT keys are built from it). */
  module: string;
  /** The projection's input value, [B, T, inFeatures]. */
  input: string;
  inFeatures: number;
  outFeatures: number;
}

/** Returns the value that replaces the projection's output `base` ([B, T, outFeatures]). */
export type LinearHook = (b: GraphBuilder, site: LinearSite, base: string) => string;

export type DecoderOutput = 'logits' | 'last_logprobs' | 'target_logprobs' | 'hidden';

export interface DecoderOptions {
  output: DecoderOutput;
  /**
   * A decode cache before the current tokens (docs/design.md §Batched generation): 'appended',
   * the graph returns the tokens' keys and values for the caller to append (the host cache,
   * ./kv-cache.ts); 'written', it writes them into the cache it is given and returns that
   * (the GPU-resident cache, ./device-kv-cache.ts; attention.ts cacheWriter).
   */
  kvCache?: 'appended' | 'written';
  /**
   * With kvCache 'appended': the cache's keys and values in fp16 (half the memory, ./kv-cache.ts),
   * read as fp32 one layer at a time (so an fp32 copy of one layer's, not of the cache, is alive),
   * and the new ones returned in fp16. Attention itself stays fp32.
   */
  halfCache?: boolean;
  linear?: LinearHook;
  /**
   * Weight-only quantised projections (docs/design.md §Quantisation): each q/k/v/o/gate/up/down
   * weight becomes a MatMulNBits node, and so does an inference graph's LM head, at
   * {@link HEAD_SCHEME} (int8 whatever the layers use). The norms stay fp32. With `linear` (a
   * training step, docs/design.md §QLoRA) LoRA's branch adds to the quantised product, and the
   * op's gradient rule (../graph/ops/quantized.ts) gives the input's gradient.
   */
  quantize?: QuantScheme;
  /** The embedding (and headRows' LM head) in fp16, cast to fp32 where read: a quantised step's tables (docs/design.md §QLoRA). */
  halfTables?: boolean;
  /**
   * Attention in this many chunks of query rows, so a [heads, T / count, S] block is the
   * largest attention value instead of [heads, T, S] (docs/design.md §Memory).
   */
  attentionChunks?: number;
  /**
   * The graph is only run, never differentiated: attention may use ONNX Runtime's FusedMatMul
   * and skip the keys a query chunk cannot see (./attention.ts, docs/design.md §Scoring).
   * {@link decoderGraph} and the training step's forward-only graph set it; the step's own
   * graph, which autodiff differentiates, leaves it off.
   */
  inference?: boolean;
  /** With `inference`: attention's q·kᵀ as FusedMatMul (default true; off for WebGPU, ./attention.ts). */
  fusedScores?: boolean;
  /** With `inference`: each RMSNorm, with the residual add before it, one ONNX Runtime op (./norms.ts; default false; on for WebGPU, ./ort-session.ts inferenceFusions). */
  fusedNorms?: boolean;
  /** With `inference`: RoPE as ONNX Runtime's RotaryEmbedding, one kernel (default false; on for WebGPU, ./rope.ts). */
  fusedRope?: boolean;
  /** `fp16`: each q/k/v/o/gate/up/down projection in half precision (./half-matmul.ts); default fp32; `quantize` wins. */
  precision?: Precision;
  /** Scoring: vocabulary rows per chunk of the head's log-sum-exp (default {@link DEFAULT_VOCAB_CHUNK}; docs/design.md §Scoring). */
  vocabChunk?: number;
  /**
   * Output 'hidden' at these rows only: a value int64 [N] of flat indices into [B·T]. An
   * inference graph's last layer then computes only from the first row they reach
   * (docs/design.md §Scoring, "The last layer's rows").
   */
  hiddenRows?: string;
}


export function checkpointWeights(ckpt: Checkpoint): WeightSource {
  return {
    config: ckpt.config,
    identity: ckpt.identity(), identityFor: (variant) => ckpt.identity(variant), ...nativeBlocksOf(ckpt), // a GGUF's Q8_0/Q4_0 blocks, used as they are under --quantize
    has: (name) => ckpt.has(name),
    lazyFloat32(name, shape, transpose2d = false) {
      ckpt.checkShape(name, shape);
      const dims = transpose2d ? [shape[1]!, shape[0]!] : shape;
      return { dtype: 'float32', dims, data: () => {
        const data = ckpt.readFloat32(name, shape);
        return transpose2d ? transpose2dF32(data, shape[0]!, shape[1]!) : data;
      } };
    },
  };
}

/** [rows, cols] → [cols, rows], in cache-friendly blocks. */
export function transpose2dF32(src: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(src.length);
  const BS = 32;
  for (let r0 = 0; r0 < rows; r0 += BS) {
    for (let c0 = 0; c0 < cols; c0 += BS) {
      const rEnd = Math.min(rows, r0 + BS), cEnd = Math.min(cols, c0 + BS);
      for (let r = r0; r < rEnd; r++) for (let c = c0; c < cEnd; c++) out[c * rows + r] = src[r * cols + c]!;
    }
  }
  return out;
}

export interface DecoderValues {
  inputIds: string;
  attentionMask: string;
  positionIds: string;
  targetIds?: string;
  /** The requested output (logits, last_logprobs or logprobs). */
  output: string;
  pastKeys: string[];
  pastValues: string[];
  /** kvCache: this step's keys and values, [B, kvHeads, T, headDim] per layer ('written': the caches written). */
  newKeys: string[];
  newValues: string[];
  /** Each layer's nodes as [start, end) indices into graph.nodes: what per-layer recomputation (../graph/autodiff.ts) clones. */
  layerSpans: { start: number; end: number }[];
  /** With attentionChunks: each query chunk's attention nodes, [start, end), inside its layer's span. */
  attentionSpans: { start: number; end: number }[];
}

/**
 * Adds the decoder to `b` (inputs, computation) and returns its value names. Does not mark
 * graph outputs, so training code can keep building on `output`.
 */
export function buildDecoder(b: GraphBuilder, weights: WeightSource, options: DecoderOptions): DecoderValues {
  const c = weights.config;
  const { numHeads, numKvHeads, headDim, hiddenSize: H } = c;
  const rep = numHeads / numKvHeads;
  const inputIds = b.input('input_ids', 'int64', ['B', 'T']);
  const attentionMask = b.input('attention_mask', 'int64', ['B', 'S']);
  const positionIds = b.input('position_ids', 'int64', ['B', 'T']);
  const scoring = options.output === 'target_logprobs';
  const targetPositions = scoring ? b.input('target_positions', 'int64', ['N']) : undefined;
  const targetIds = scoring ? b.input('target_ids', 'int64', ['N']) : undefined;
  const pastKeys: string[] = [], pastValues: string[] = [], newKeys: string[] = [], newValues: string[] = [];
  const writesCache = options.kvCache === 'written';
  if (options.halfCache && options.kvCache !== 'appended') throw new Error("halfCache: only with kvCache 'appended'");
  const cacheType = options.halfCache ? 'float16' : 'float32';
  const cacheDims = (kind: 'key' | 'value') => (writesCache ? writtenCacheDims(kind, 'B', numKvHeads, headDim, 'C') : ['B', numKvHeads, 'P', headDim]);
  for (let i = 0; options.kvCache && i < c.numLayers; i++) {
    pastKeys.push(b.input(`past_key_${i}`, cacheType, cacheDims('key')));
    pastValues.push(b.input(`past_value_${i}`, cacheType, cacheDims('value')));
  }
  const writeSlots = writesCache ? b.input('write_slots', 'int64', ['T']) : undefined;
  const writeCache = writeSlots ? cacheWriter(b, writeSlots) : undefined;

  const weight = (name: string, shape: number[], transpose = false) => {
    const key = transpose ? `${name}.T` : name;
    return b.graph.initializers.has(key) ? key : b.initializer(key, weights.lazyFloat32(name, shape, transpose));
  };
  const g = c.gemma;
  // Gemma's norms scale by 1 + w (w as stored), made once when the weight is read, in fp32 as transformers adds it.
  const normWeight = (name: string, shape: number[]) => {
    if (!g) return weight(name, shape);
    const key = `${name}.plus_one`;
    if (b.graph.initializers.has(key)) return key;
    const stored = weights.lazyFloat32(name, shape);
    return b.initializer(key, { ...stored, data: () => (tensorValues(stored) as Float32Array).map((w) => w + 1) });
  };
  const { rmsNorm, addNorm, fusesResidual } = normBuilders(b, c.rmsNormEps, normWeight, (options.inference ?? false) && (options.fusedNorms ?? false));
  const project = (x: string, module: string, inF: number, outF: number) => {
    if (options.quantize) return quantizedMatmul(b, x, weights, `${module}.weight`, outF, inF, options.quantize);
    if (options.precision === 'fp16') return halfPrecisionMatmul(b, x, weights, `${module}.weight`, outF, inF);
    return b.matmul(x, weight(`${module}.weight`, [outF, inF], true));
  };
  const linear = (x: string, layer: number, target: LinearTarget, module: string, inF: number, outF: number, bias: boolean) => {
    let y = project(x, module, inF, outF);
    if (bias) y = b.add(y, weight(`${module}.bias`, [outF]));
    return options.linear ? options.linear(b, { layer, target, module, input: x, inFeatures: inF, outFeatures: outF }, y) : y;
  };

  const seqLen = b.gather(b.shape(inputIds), b.scalar(1, 'int64'), 0);
  const one = b.scalar(1, 'int64');
  const sw = c.sliding?.layers.some(Boolean) ? c.sliding : undefined; // Gemma 3's and OLMo 3's sliding layers
  const masks = attentionMasks(b, attentionMask, seqLen, writeSlots, sw?.window);
  const maskChunks = (mask: string) => queryChunks(b, mask, options.attentionChunks, options.inference);
  const chunks = maskChunks(masks.causal), slidingChunks = masks.sliding ? maskChunks(masks.sliding) : undefined;

  const fusedRope = options.inference && options.fusedRope;
  const ropes = ropeTables(b, c, positionIds, headDim, fusedRope); // shared by every layer
  const queryScale = c.queryTemperature && queryTemperature(b, positionIds, c.queryTemperature); // Ministral 3's
  // The sliding layers': their own base, unscaled.
  const localRopes = sw && ropeTables(b, { ...c, ropeTheta: sw.ropeTheta, ropeScaling: undefined }, positionIds, headDim, fusedRope);
  // An inference graph's last layer makes queries, o and MLP only for the rows the output reads.
  const gatheredRows = scoring ? targetPositions : options.hiddenRows;
  const outputFrom = options.inference ? firstOutputRow(b, options.output === 'last_logprobs', seqLen, gatheredRows) : undefined;
  const outputRows = outputFrom && {
    from: outputFrom,
    rows: (x: string, axis = 1) => rowsFrom(b, x, outputFrom, axis),
  };

  const m = c.multipliers; // Granite's (ModelConfig.multipliers): the scalars below are all 1 elsewhere
  const residual = (x: string) => (m ? b.mul(x, b.scalar(m.residual)) : x);
  let h = options.halfTables
    ? b.cast(b.gather(halfTable(b, weights, 'model.embed_tokens.weight'), inputIds, 0), 'float32')
    : b.gather(weight('model.embed_tokens.weight', [c.vocabSize, H]), inputIds, 0); // [B, T, H]
  if (m || g) h = b.mul(h, b.scalar(m?.embedding ?? Math.sqrt(H))); // Gemma's: √hidden
  const scale = m?.attention ?? g?.attentionScale ?? 1 / Math.sqrt(headDim);

  // Each layer's norms past its input norm: OLMo 2's after each branch only (ModelConfig.postNorms),
  // Gemma's and GLM-4's on both sides (ModelConfig.sandwichNorms), Llama's before the MLP.
  const norms: { afterAttention?: string; beforeMlp?: string; afterMlp?: string } = c.postNorms
    ? { afterAttention: 'post_attention_layernorm', afterMlp: 'post_feedforward_layernorm' }
    : c.sandwichNorms ? SANDWICH_NORMS[c.sandwichNorms] : { beforeMlp: 'post_attention_layernorm' };
  const layerSpans: { start: number; end: number }[] = [];
  const attentionSpans: { start: number; end: number }[] = [];
  // With fused norms, each layer's last residual add is left to the next norm, one op with it.
  let pending: string | undefined;
  for (let i = 0; i < c.numLayers; i++) {
    const start = b.graph.nodes.length;
    const p = `model.layers.${i}`;
    let x: string;
    if (c.postNorms) x = h; // OLMo 2: attention reads the residual stream itself
    else if (pending) ({ sum: h, normed: x } = addNorm(h, pending, `${p}.input_layernorm.weight`, H));
    else x = rmsNorm(h, `${p}.input_layernorm.weight`, H);
    // Keys and values need every row; past them, the last layer needs only the output's rows.
    const cut = i === c.numLayers - 1 ? outputRows : undefined;
    const xq = cut ? cut.rows(x) : x;
    // A projection split into heads, q and k normed before RoPE: per head (Qwen3, Gemma 3) or across the whole projection (OLMo 2).
    const headsOf = (y: string, norm: string, count: number) => {
      const weightName = `${p}.self_attn.${norm}.weight`;
      if (c.qkNorm && c.qkNormWhole) y = rmsNorm(y, weightName, count * headDim);
      const split = b.reshape(y, [0, 0, count, headDim]);
      return c.qkNorm && !c.qkNormWhole ? rmsNorm(split, weightName, headDim) : split;
    };
    let q = headsOf(linear(xq, i, 'q', `${p}.self_attn.q_proj`, H, numHeads * headDim, c.qkvBias), 'q_norm', numHeads);
    let k = headsOf(linear(x, i, 'k', `${p}.self_attn.k_proj`, H, numKvHeads * headDim, c.qkvBias), 'k_norm', numKvHeads);
    const v = b.reshape(linear(x, i, 'v', `${p}.self_attn.v_proj`, H, numKvHeads * headDim, c.qkvBias), [0, 0, numKvHeads, headDim]);
    const slides = sw?.layers[i] ?? false;
    const layerRopes = slides ? localRopes! : ropes;
    if (!c.noRopeLayers?.[i]) {
      q = applyRope(b, q, layerRopes, numHeads, headDim, cut ? cut.rows : undefined);
      k = applyRope(b, k, layerRopes, numKvHeads, headDim);
    }
    if (queryScale) q = b.mul(q, cut ? cut.rows(queryScale) : queryScale);
    // Grouped-query attention without copying K/V: q heads are grouped [B, kv, rep, T, d]
    // and K/V [B, kv, 1, S, d] broadcast across the group in MatMul.
    const qGrouped = b.transpose(b.reshape(q, [0, 0, numKvHeads, rep, headDim]), [0, 2, 3, 1, 4]);
    const vHeads = b.transpose(v, [0, 2, 1, 3]); // [B, kv, T, d]
    const kHeads = b.transpose(k, writesCache ? [0, 2, 3, 1] : [0, 2, 1, 3]); // [B, kv, d, T] for the written cache, else [B, kv, T, d]
    const read = (cached: string) => (options.halfCache ? b.cast(cached, 'float32') : cached);
    const past = options.kvCache ? { keys: read(pastKeys[i]!), values: read(pastValues[i]!) } : undefined;
    const written = writeCache?.(past!, kHeads, vHeads); // the whole cache, this step's tokens in
    if (past) {
      newKeys.push(written?.keys ?? kHeads);
      newValues.push(written?.values ?? vHeads);
    }
    // The cut's queries are still the last rows of the keys, as queryChunks requires.
    const maskBias = slides ? masks.sliding! : masks.causal;
    const queryMask = cut ? cut.rows(maskBias, 3) : maskBias;
    const layerChunks = slides ? slidingChunks : chunks;
    const queryChunking = cut && layerChunks ? maskChunks(queryMask) : layerChunks;
    const context = attend(b, { q: qGrouped, k: kHeads, v: vHeads, scale, softcap: g?.attentionSoftcap, maskBias: queryMask }, { past: written ? undefined : past, written, chunks: queryChunking, blockSpans: attentionSpans, inference: options.inference, fusedScores: options.fusedScores }); // [B, kv, rep, T, d]
    const merged = b.reshape(b.transpose(context, [0, 3, 1, 2, 4]), [0, 0, numHeads * headDim]);
    if (cut) h = cut.rows(h);
    // A residual branch's output: Gemma, GLM-4 and OLMo 2 norm it, Granite scales it.
    const branch = (x: string, norm: string | undefined) => (norm ? rmsNorm(x, `${p}.${norm}.weight`, H) : residual(x));
    let y: string;
    const attended = branch(linear(merged, i, 'o', `${p}.self_attn.o_proj`, numHeads * headDim, H, c.oBias), norms.afterAttention);
    if (c.postNorms) y = h = b.add(h, attended); // the MLP reads the residual stream itself
    else ({ sum: h, normed: y } = addNorm(h, attended, `${p}.${norms.beforeMlp!}.weight`, H)); // every layout but OLMo 2's has it
    const gate = linear(y, i, 'gate', `${p}.mlp.gate_proj`, H, c.intermediateSize, c.mlpBias);
    const up = linear(y, i, 'up', `${p}.mlp.up_proj`, H, c.intermediateSize, c.mlpBias);
    const act = b.mul(g ? geluTanh(b, gate) : b.mul(gate, b.sigmoid(gate)), up);
    const down = branch(linear(act, i, 'down', `${p}.mlp.down_proj`, c.intermediateSize, H, c.mlpBias), norms.afterMlp);
    if (fusesResidual && !c.postNorms) pending = down; // no norm follows OLMo 2's add to carry it
    else h = b.add(h, down);
    layerSpans.push({ start, end: b.graph.nodes.length });
  }
  let final = pending ? addNorm(h, pending, 'model.norm.weight', H).normed : rmsNorm(h, 'model.norm.weight', H);
  if (m) final = b.mul(final, b.scalar(1 / m.logits)); // logits / s, applied before every head (the step's own too)
  const values = { inputIds, attentionMask, positionIds, targetIds, pastKeys, pastValues, newKeys, newValues, layerSpans, attentionSpans };
  // The output's rows [N, H] of the final norm, at flat positions into [B·T].
  const rowsAt = (positions: string) => b.gather(b.reshape(final, [-1, H]), outputRows ? positionsFrom(b, positions, seqLen, outputRows.from) : positions, 0);
  if (options.output === 'hidden') return { ...values, output: options.hiddenRows ? rowsAt(options.hiddenRows) : final };
  if (options.output === 'last_logprobs') final = b.gather(final, outputRows ? b.scalar(-1, 'int64') : b.sub(seqLen, one), 1); // [B, H]
  if (scoring) {
    // Only the target positions' rows reach the head, in vocabulary chunks (docs/design.md §Scoring).
    const rows = rowsAt(targetPositions!); // [N, H]
    const chunk = options.vocabChunk ?? DEFAULT_VOCAB_CHUNK;
    const output = options.quantize
      ? quantizedTargetLogprobs(b, rows, targetIds!, weights, headName(weights), c.vocabSize, HEAD_SCHEME, chunk, g?.finalSoftcap)
      : appendTargetLogprobs(b, { hidden: rows, rows: headRows(b, weights), targets: targetIds!, vocabSize: c.vocabSize, softcap: g?.finalSoftcap }, { chunk, withGradient: false });
    return { ...values, output };
  }

  const logits = softcap(b, options.quantize
    ? quantizedMatmul(b, final, weights, headName(weights), c.vocabSize, H, HEAD_SCHEME)
    : applyHead(b, final, headRows(b, weights), c.vocabSize), g?.finalSoftcap); // Gemma 2's cap
  // Vectorised here, the log-softmax spares the sampler a pass of exp over the vocabulary per token.
  return { ...values, output: options.output === 'last_logprobs' ? b.logSoftmax(logits, -1) : logits };
}

/** Ministral 3's query temperature per token, [B, T, 1, 1]: 1 + β·ln(1 + ⌊position / floorScale⌋) (ModelConfig.queryTemperature). */
function queryTemperature(b: GraphBuilder, positionIds: string, { beta, floorScale }: { beta: number; floorScale: number }): string {
  const ratio = b.div(b.cast(positionIds, 'float32'), b.scalar(floorScale));
  const [whole] = b.op('Floor', [ratio], {}, 1, [{ dtype: 'float32', shape: b.shapeOf(ratio) }]);
  const scale = b.add(b.mul(b.log(b.add(whole!, b.scalar(1))), b.scalar(beta)), b.scalar(1));
  return b.unsqueeze(scale, [2, 3]);
}

/** GELU, tanh form (Gemma's gelu_pytorch_tanh): x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
function geluTanh(b: GraphBuilder, x: string): string {
  const inner = b.mul(b.add(x, b.mul(b.mul(b.mul(x, x), x), b.scalar(0.044715))), b.scalar(Math.sqrt(2 / Math.PI)));
  return b.mul(b.mul(x, b.scalar(0.5)), b.add(b.tanh(inner), b.scalar(1)));
}

/** A complete decoder graph with its outputs marked. */
export function decoderGraph(weights: WeightSource, options: DecoderOptions, name = 'decoder'): { graph: Graph; values: DecoderValues } {
  const b = new GraphBuilder(name);
  const values = buildDecoder(b, weights, { ...options, inference: true });
  const outName = { target_logprobs: 'logprobs', last_logprobs: 'last_logprobs', logits: 'logits', hidden: 'hidden' }[options.output];
  const out = b.identityAs(values.output, outName);
  b.output(out);
  values.output = out;
  const cacheOut = options.kvCache === 'written' ? 'present' : 'new';
  const stored = (v: string) => (options.halfCache ? b.cast(v, 'float16') : v);
  values.newKeys = values.newKeys.map((v, i) => b.output(b.identityAs(stored(v), `${cacheOut}_key_${i}`)));
  values.newValues = values.newValues.map((v, i) => b.output(b.identityAs(stored(v), `${cacheOut}_value_${i}`)));
  return { graph: b.graph, values };
}
