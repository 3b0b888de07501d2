/**
 * The graphs of a training step, built from the decoder (../model/decoder.ts):
 *
 * - forward: decoder + LoRA → `logprobs` [N]. Used for the policy's log-probs, and with all
 *   LoRA tensors zero for the base model's (x·Aᵀ·Bᵀ with B = 0 adds exact zeros, so one session
 *   and one copy of the frozen weights serve both).
 * - train: decoder + LoRA → the method's loss (./losses.ts; PPO-clip: ./step-loss.ts) → autodiff (../graph/autodiff.ts) → the gradient
 *   of every LoRA tensor, plus the metrics; optionally the optimizer update too (./step-optimizer.ts).
 *
 * LoRA: each targeted projection y = x·Wᵀ (+ b) becomes y + ((x·Aᵀ)·s)·Bᵀ with A [r, in] and
 * B [out, r] as graph inputs named by their PEFT keys, s = alpha / r: the hook of
 * ../model/lora-inputs.ts, which generation with live adapter weights uses too.
 *
 * Positions: only N picked positions go through the LM head (docs/design.md §Memory): the
 * final hidden states [B, T, H] are gathered at `positions` (flat indices into the [B, T]
 * grid) and ../model/chunked-head.ts gives the log-prob of `targets` there, over vocabulary
 * chunks. Graph position t holds the log-prob of token t+1; ./step-feeds.ts picks the
 * positions and maps them to and from the batch's token grid.
 *
 * Graph inputs: input_ids, attention_mask, position_ids (int64 [B, T]), positions, targets
 * (int64 [N]), every LoRA tensor, and for train: response_mask, old_logprobs, advantages,
 * old_from_policy, teacher_logprobs, opd_weights (+ ref_logprobs when klBeta > 0), float32
 * [N] at the picked positions. The last three make `old` := stopgrad(logprobs) where
 * old_from_policy is 1 and add opd_weights·(teacher − old) to the advantages (./step-loss.ts,
 * in-step old); with them all zero the loss trains on old_logprobs and advantages exactly as given.
 * The training graph also takes `loss_weights` [N], each token's weight in the run's mean over
 * the trained tokens (--loss-agg; ./step-loss.ts aggregator, ./step-feeds.ts lossWeightGrid),
 * made for the whole batch so that a micro-batch's pass gives its share of it (./micro-batch.ts). With top-K
 * OPD (LossConfig.opdTopK = K > 0) it takes `teacher_topk_indices` (int64 [N, K]),
 * `teacher_topk_logprobs` [N, K] and `distill_weights` [N], gathers the student's log-probs of
 * those K tokens from the same head (../model/chunked-head.ts appendHeadLogprobs), adds the
 * distillation term (./step-loss.ts appendTopKDistillation) and outputs `topk_kl_sum`, the sum of
 * the per-token KL where distill_weights > 0 (the engine divides it by the batch's count of those
 * tokens, so that micro-batches add up). {@link buildTopKGraph} is the teacher's pass.
 * Train outputs: loss, the metrics its loss declares (./losses.ts; PPO-clip's approx_kl and
 * clipfrac), tokens (scalars), logprobs [N], `grad.<key>`
 * for every LoRA tensor, and with the in-graph optimizer its outputs (./step-optimizer.ts).
 *
 * Value head (the `gae` estimator, docs/design.md §Advantage estimators): with it, both graphs
 * also take `value_head.weight` [1, H] and `value_head.bias` [1] and output `values` [N], the
 * head applied to the same gathered hidden states that feed the LM head (so position t's
 * value goes with the log-prob of token t+1, as the log-probs do). The training graph then
 * takes `returns` and `values_old` [N] too, adds c_v · the clipped value loss to the loss
 * (./step-loss.ts), outputs `value_loss`, and its gradients include the value head's.
 *
 * Recomputation (`recompute`): every layer but the last is recomputed from its input during
 * the backward pass instead of keeping its activations (../graph/autodiff.ts, docs/design.md §Memory).
 */
import { GraphBuilder, type Graph } from '../graph/ir.js';
import { buildDecoder, headRows, type WeightSource } from '../model/decoder.js';
import { loraAKey, loraBKey, loraInputHook } from '../model/lora-inputs.js';
import { appendHeadLogprobs, appendHeadTopK } from '../model/chunked-head.js';
import { appendGradients } from '../graph/autodiff.js';
import type { LoraConfig, LoraTensorSpec, LossConfig, OptimizerConfig } from './training-step.js';
import { aggregator, appendInStepOld, appendTopKDistillation, appendValueLoss, sumAll, type ValueHeadConfig } from './step-loss.js';
import { checkLossConfig, lossRecord } from './losses.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import { appendUpdate } from './step-optimizer.js';
import { VALUE_HEAD_BIAS, VALUE_HEAD_WEIGHT } from './value-head.js';
import type { Precision, Quantize } from '../../src-shared/training.js';
import { quantScheme, type QuantScheme } from '../model/quantize.js';

export const loraKeys = (spec: LoraTensorSpec) => ({ a: loraAKey(spec), b: loraBKey(spec) });
export const gradName = (key: string) => `grad.${key}`;

/**
 * The inputs every loss is built on: the response mask, and what in-step old (./step-loss.ts
 * appendInStepOld) makes old and the advantages from. The loss itself comes from the method's
 * record (./losses.ts), which may also read ref_logprobs.
 */
export const LOSS_INPUTS = ['response_mask', 'old_logprobs', 'advantages', 'old_from_policy', 'teacher_logprobs', 'opd_weights'] as const;
/** The value loss's inputs, with a value head: GAE's returns R and the values at the start of the step. */
export const VALUE_INPUTS = ['returns', 'values_old'] as const;
/** Each token's weight in the run's mean over the trained tokens (token-mean or sample-mean, normalised over the whole batch). */
export const LOSS_WEIGHTS = 'loss_weights';
/** Top-K OPD's inputs (float32 [N, K], int64 [N, K], float32 [N]) and its metric's output: Σ KL over the distilled tokens. */
export const TOPK_INPUTS = { logprobs: 'teacher_topk_logprobs', indices: 'teacher_topk_indices', weights: 'distill_weights' } as const;
export const TOPK_KL_SUM = 'topk_kl_sum';

/** How the head and the backward pass are built (docs/design.md §Memory). */
export interface MemoryOptions {
  /** Vocabulary rows per chunk of the LM head; 0: unchunked. */
  vocabChunk: number;
  /** Recompute each layer's activations in the backward pass (train graph only). */
  recompute?: boolean;
  /** Attention in this many chunks of query rows (../model/attention.ts); default: one piece. */
  attentionChunks?: number;
  /** The frozen base's projections in fp16 (half their weights' memory, and a GPU's tensor cores); default fp32. */
  precision?: Precision;
  /**
   * The frozen base quantised (QLoRA, docs/design.md §QLoRA): its projections as MatMulNBits on
   * int8 / int4 codes with fp32 activations ({@link trainingScheme}), the embedding and the LM
   * head's rows in fp16; default 'none'. Wins over `precision`.
   */
  quantize?: Quantize;
}

/**
 * A training step's scheme: the inference scheme's codes (so the rollouts' and the scorer's
 * sessions share the step's quantised copy by name, ../model/weight-file.ts) with accuracy_level 0:
 * the activations stay fp32, so the step computes exactly with the dequantised weights.
 */
export function trainingScheme(quantize: Quantize | undefined): QuantScheme | undefined {
  const scheme = quantScheme(quantize ?? 'none');
  return scheme && { ...scheme, accuracyLevel: 0 };
}

/** One LogSoftmax over the vocabulary, no recomputation: the plain graph. */
const DEFAULT_MEMORY: MemoryOptions = { vocabChunk: 0 };

interface LoraDecoder {
  b: GraphBuilder;
  logprobs: string;
  layerSpans: { start: number; end: number }[];
  attentionSpans: { start: number; end: number }[];
  specs: LoraTensorSpec[];
  /** Trained tensor key (LoRA, then the value head's) → graph input name (they are equal; kept explicit for readers). */
  params: Map<string, string>;
  /** The value head's output [N], when the graph has one. */
  values?: string;
  /** With `topK`: the log-probs [N, K] of the tokens fed as `teacher_topk_indices`. */
  columns?: string;
}

interface DecoderParts {
  withGradient: boolean;
  valueHead?: boolean;
  fusedScores?: boolean;
  /** The student's log-probs of K fed tokens per position (the training graph of top-K OPD). */
  topK?: number;
  /** The head's own top K per position instead (the teacher's pass, forward only). */
  teacherTopK?: number;
}

function loraDecoder(weights: WeightSource, lora: LoraConfig, memory: MemoryOptions & DecoderParts, name: string): LoraDecoder {
  const b = new GraphBuilder(name);
  const specs: LoraTensorSpec[] = [];
  const params = new Map<string, string>();
  const linear = loraInputHook(lora, (spec, a, bb) => {
    specs.push(spec);
    const keys = loraKeys(spec);
    params.set(keys.a, a).set(keys.b, bb);
  });
  const positions = b.input('positions', 'int64', ['N']);
  // A forward-only graph takes the inference form of attention and cuts its last layer to the
  // scored rows (the same values; ../model/attention.ts, ../model/decoder.ts).
  const quantize = trainingScheme(memory.quantize);
  const values = buildDecoder(b, weights, {
    output: 'hidden', hiddenRows: positions, linear, attentionChunks: memory.attentionChunks, inference: !memory.withGradient, fusedScores: memory.fusedScores,
    precision: memory.precision, ...(quantize ? { quantize, halfTables: true } : {}),
  });
  sameDim(b.graph, 'S', 'T');
  const H = weights.config.hiddenSize;
  const targetIds = b.input('targets', 'int64', ['N']);
  const hidden = values.output; // [N, H]
  const head = { hidden, rows: headRows(b, weights, quantize !== undefined), targets: targetIds, vocabSize: weights.config.vocabSize, softcap: weights.config.gemma?.finalSoftcap };
  let scored: { logprobs: string; columns?: string };
  if (memory.teacherTopK) {
    const top = appendHeadTopK(b, head, { chunk: memory.vocabChunk }, memory.teacherTopK);
    b.output(b.identityAs(top.topLogprobs, 'topk_logprobs'));
    b.output(b.identityAs(top.topIndices, 'topk_indices'));
    scored = top;
  } else {
    const columnIds = memory.topK ? b.input(TOPK_INPUTS.indices, 'int64', ['N', memory.topK]) : undefined;
    scored = appendHeadLogprobs(b, head, { chunk: memory.vocabChunk, withGradient: memory.withGradient }, columnIds);
  }
  const logprobs = b.identityAs(scored.logprobs, 'logprobs');
  const valueHead = memory.valueHead ? appendValueHead(b, hidden, H, params) : undefined;
  return { b, logprobs, specs, params, layerSpans: values.layerSpans, attentionSpans: values.attentionSpans, values: valueHead, columns: scored.columns };
}

/** values [N] = hidden [N, H] · weightᵀ + bias. */
function appendValueHead(b: GraphBuilder, hidden: string, H: number, params: Map<string, string>): string {
  const w = b.input(VALUE_HEAD_WEIGHT, 'float32', [1, H]);
  const bias = b.input(VALUE_HEAD_BIAS, 'float32', [1]);
  params.set(VALUE_HEAD_WEIGHT, w).set(VALUE_HEAD_BIAS, bias);
  return b.identityAs(b.reshape(b.add(b.matmul(hidden, b.transpose(w, [1, 0])), bias), [-1]), 'values');
}

/** The forward-only graph; `fusedScores` as ../model/attention.ts has it (off for WebGPU). */
export function buildForwardGraph(weights: WeightSource, lora: LoraConfig, memory: MemoryOptions, options: { valueHead?: boolean; fusedScores?: boolean } = {}): { graph: Graph; specs: LoraTensorSpec[] } {
  const d = loraDecoder(weights, lora, { ...memory, withGradient: false, valueHead: options.valueHead, fusedScores: options.fusedScores }, 'lora_forward');
  d.b.output(d.logprobs);
  if (d.values) d.b.output(d.values);
  return { graph: d.b.graph, specs: d.specs };
}

/**
 * The top-K OPD teacher's pass: the forward graph (its LoRA fed as zeros gives the base model)
 * with the head's top K at each scored position, `topk_logprobs` [N, K] and `topk_indices`
 * (int64 [N, K]), beside `logprobs` [N], the vocabulary taken a chunk at a time
 * (../model/chunked-head.ts appendHeadTopK).
 */
export function buildTopKGraph(weights: WeightSource, lora: LoraConfig, memory: MemoryOptions, k: number, options: { fusedScores?: boolean } = {}): { graph: Graph; specs: LoraTensorSpec[] } {
  const d = loraDecoder(weights, lora, { ...memory, withGradient: false, fusedScores: options.fusedScores, teacherTopK: k }, 'lora_topk');
  d.b.output(d.logprobs);
  return { graph: d.b.graph, specs: d.specs };
}

export interface TrainGraphOptions {
  lora: LoraConfig;
  /** Default: unchunked head, no recomputation (the engine passes its own defaults). */
  memory?: MemoryOptions;
  loss: LossConfig;
  /** Append the optimizer update (else the graph ends at the gradients). */
  optimizerInGraph?: OptimizerConfig;
  /** Add the value head and its loss (the `gae` estimator). */
  value?: ValueHeadConfig;
}

export function buildTrainGraph(weights: WeightSource, options: TrainGraphOptions): { graph: Graph; specs: LoraTensorSpec[] } {
  const topK = options.loss.opdTopK ?? 0;
  const d = loraDecoder(weights, options.lora, { ...(options.memory ?? DEFAULT_MEMORY), withGradient: true, valueHead: options.value !== undefined, topK }, 'lora_train');
  const { b } = d;
  const record = lossRecord(methodRecord(options.loss.method).loss);
  checkLossConfig(record, options.loss);
  const [mask, oldIn, advantagesIn, oldFromPolicy, teacher, opdWeights] = LOSS_INPUTS.map((n) => b.input(n, 'float32', ['N']));
  const ref = options.loss.klBeta > 0 ? b.input('ref_logprobs', 'float32', ['N']) : undefined;
  const { mean } = aggregator(b, mask!, b.input(LOSS_WEIGHTS, 'float32', ['N']));
  const { old, advantages } = appendInStepOld(b, {
    logprobs: d.logprobs, old: oldIn!, oldFromPolicy: oldFromPolicy!, advantages: advantagesIn!, teacher: teacher!, opdWeights: opdWeights!,
  });
  const loss = record.build(b, { logprobs: d.logprobs, mask: mask!, old, advantages, mean, ...(ref ? { ref } : {}) }, options.loss);
  b.output(d.logprobs);
  if (topK > 0) {
    const teacherTopK = b.input(TOPK_INPUTS.logprobs, 'float32', ['N', topK]);
    const distillWeights = b.input(TOPK_INPUTS.weights, 'float32', ['N']);
    const distill = appendTopKDistillation(b, { student: d.columns!, teacher: teacherTopK, weights: distillWeights }, mean);
    loss.loss = b.add(loss.loss, distill.loss);
    // The metric: Σ KL_t over the tokens that distil (no gradient is taken of it); the engine
    // divides by how many the whole batch has, so that the micro-batches' sums add up.
    const on = b.cast(b.greater(distillWeights, b.scalar(0)), 'float32');
    b.output(b.identityAs(sumAll(b, b.mul(on, distill.perToken)), TOPK_KL_SUM));
  }
  if (options.value) {
    const [returns, valuesOld] = VALUE_INPUTS.map((n) => b.input(n, 'float32', ['N']));
    const valueLoss = appendValueLoss(b, { values: d.values!, valuesOld: valuesOld!, returns: returns!, mask: mask!, mean }, options.value);
    loss.loss = b.add(loss.loss, b.mul(b.scalar(options.value.coef), valueLoss));
    b.output(d.values!);
    b.output(b.identityAs(valueLoss, 'value_loss'));
  }
  b.output(b.identityAs(loss.loss, 'loss'));
  // The metrics the loss declares, each as the output its log field names (PPO-clip: approx_kl, clipfrac).
  for (const m of record.metrics) b.output(b.identityAs(loss.metrics[m.key]!, m.field));
  b.output(b.identityAs(loss.tokens, 'tokens'));
  // The last layer's backward runs first, right after its forward: nothing to save there. Every
  // attention chunk is recomputed on its own, the last layer's too, so that one chunk's
  // probabilities are alive at a time in the backward pass (docs/design.md §Memory).
  const recompute = options.memory?.recompute ? [...d.layerSpans.slice(0, -1), ...d.attentionSpans.map((s) => ({ ...s, piece: true }))] : [];
  const grads = appendGradients(b, loss.loss, [...d.params.values()], { recompute });
  for (const [key, value] of d.params) b.output(b.identityAs(grads.get(value)!, gradName(key)));
  if (options.optimizerInGraph) appendUpdate(b, options.optimizerInGraph, d.params, grads);
  return { graph: b.graph, specs: d.specs };
}

/**
 * Records that two symbolic dims are equal. Without a KV cache the attention length S is the
 * sequence length T; telling the IR lets the attention gradients sum broadcast axes with
 * static axes instead of Shape/NonZero ops at run time.
 */
function sameDim(graph: Graph, from: string, to: string): void {
  for (const v of graph.values.values()) if (v.shape) v.shape = v.shape.map((d) => (d === from ? to : d));
  for (const v of graph.inputs) if (v.shape) v.shape = v.shape.map((d) => (d === from ? to : d));
}

/** Op types in a graph, for checks that no fused or training-unfriendly op slipped in. */
export function opTypes(graph: Graph): Set<string> {
  return new Set(graph.nodes.map((n) => n.op));
}
