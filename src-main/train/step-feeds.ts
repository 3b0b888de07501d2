/**
 * What the training step's sessions are fed, and how their answers go back to the batch's
 * [B, T] token grid (./step-graph.ts describes the graph side).
 *
 * Only some positions go through the LM head: the response tokens for the training graph
 * (every other position has mask 0, so the loss does not read it), every token after the
 * first for the forward graph. The host picks them: `positions` are flat indices into the
 * graph's [B, T] grid, whose position t holds the log-prob of token t+1 (so token k of the
 * flat token grid is graph position k − 1, in the same row since k is never a row's first
 * token), `targets` the tokens to score there. The loss inputs are gathered at the same
 * positions, and the [N] log-probs that come back are scattered onto the token grid (0 at
 * every position not picked).
 */
import { UserError } from '../../src-shared/types.js';
import { ort } from '../model/ort-session.js';
import type { LossAgg, StepBatch } from './training-step.js';
import { LOSS_WEIGHTS, TOPK_INPUTS } from './step-graph.js';

/** Token-grid indices whose log-probs a pass computes. */
export interface Picked {
  tokens: Int32Array;
  /** True when nothing was to be picked and `tokens` holds one stand-in (mask 0, result unused). */
  standIn: boolean;
}

/** Response tokens (mask ≠ 0): what the loss reads. */
export function pickResponse(batch: StepBatch): Picked {
  checkArrays(batch, [['responseMask', batch.responseMask]]);
  const picked: number[] = [];
  batch.responseMask.forEach((m, k) => {
    if (m !== 0 && k % batch.seqLen !== 0) picked.push(k);
  });
  // ONNX Runtime handles empty tensors unevenly across ops; one masked stand-in keeps N ≥ 1.
  return picked.length ? { tokens: Int32Array.from(picked), standIn: false } : { tokens: Int32Array.of(1), standIn: true };
}

/** Every token after each row's first: the whole grid, as the forward pass returns it. */
export function pickAll(batch: StepBatch): Picked {
  const { batch: B, seqLen: T } = batch;
  const tokens = new Int32Array(B * (T - 1));
  for (let r = 0, i = 0; r < B; r++) for (let t = 1; t < T; t++) tokens[i++] = r * T + t;
  return { tokens, standIn: false };
}

/** The model's inputs at the picked positions; the caller has checked the whole batch ({@link checkTokens}) before cutting it. */
export function modelFeeds(batch: StepBatch, picked: Picked): Record<string, ort.Tensor> {
  const n = picked.tokens.length;
  const positions = new BigInt64Array(n), targets = new BigInt64Array(n);
  picked.tokens.forEach((k, i) => {
    positions[i] = BigInt(k - 1);
    targets[i] = batch.inputIds[k]!;
  });
  const dims = [batch.batch, batch.seqLen];
  return {
    input_ids: new ort.Tensor('int64', batch.inputIds, dims),
    attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
    position_ids: new ort.Tensor('int64', batch.positionIds, dims),
    positions: new ort.Tensor('int64', positions, [n]),
    targets: new ort.Tensor('int64', targets, [n]),
  };
}

/**
 * What a training graph takes besides every loss's inputs: `ref` the KL reference, `value` the
 * value head's returns and old values, `lossAgg` how the loss weights are made (--loss-agg),
 * `topK` the top-K OPD teacher (K).
 */
export interface LossNeeds {
  ref: boolean;
  value?: boolean;
  lossAgg: LossAgg;
  topK?: number;
}

/**
 * Refuses a batch that lacks what the training graph reads, or has it in the wrong size: once,
 * on the whole batch, before any micro-batch is cut (the feeds below do not check again).
 */
export function checkLossBatch(batch: StepBatch, needs: LossNeeds, vocabSize: number): void {
  checkTokens(batch, vocabSize);
  checkLossArrays(batch, needs);
  if (needs.topK) checkTopK(batch, needs.topK);
}

/** The loss's per-token inputs present (those it needs) and in the batch's size. */
function checkLossArrays(batch: StepBatch, needs: LossNeeds): void {
  type Named = [string, Float32Array | undefined];
  const optional: Named[] = [['oldFromPolicy', batch.oldFromPolicy], ['teacherLogprobs', batch.teacherLogprobs], ['opdWeights', batch.opdWeights]];
  checkArrays(batch, [
    ['responseMask', batch.responseMask], ['oldLogprobs', batch.oldLogprobs], ['advantages', batch.advantages],
    ...(needs.ref ? [['refLogprobs', batch.refLogprobs] as Named] : []),
    ...(needs.value ? [['returns', batch.returns], ['valuesOld', batch.valuesOld]] as Named[] : []),
    ...optional.filter(([, a]) => a !== undefined),
  ]);
}

/**
 * The loss inputs at the picked positions (see {@link LossNeeds}). `weights`: each cell's weight
 * in the run's mean ({@link lossWeightGrid}) on this batch's grid, made from the whole batch (a
 * micro-batch's weights are its share of the whole batch's, not its own mean).
 */
export function lossFeeds(batch: StepBatch, picked: Picked, needs: LossNeeds, weights: Float32Array): Record<string, ort.Tensor> {
  const n = picked.tokens.length;
  // Absent: zeros, so old and the advantages are exactly the ones given.
  const gathered = (a: Float32Array | undefined) => new ort.Tensor('float32', a ? Float32Array.from(picked.tokens, (k) => a[k]!) : new Float32Array(n), [n]);
  const zeros = () => new ort.Tensor('float32', new Float32Array(n), [n]);
  const feeds: Record<string, ort.Tensor> = {
    response_mask: picked.standIn ? zeros() : gathered(batch.responseMask),
    old_logprobs: gathered(batch.oldLogprobs),
    advantages: gathered(batch.advantages),
    old_from_policy: gathered(batch.oldFromPolicy),
    teacher_logprobs: gathered(batch.teacherLogprobs),
    opd_weights: gathered(batch.opdWeights),
    [LOSS_WEIGHTS]: picked.standIn ? zeros() : gathered(weights),
  };
  if (needs.ref) feeds.ref_logprobs = gathered(batch.refLogprobs!);
  if (needs.value) {
    feeds.returns = gathered(batch.returns!);
    feeds.values_old = gathered(batch.valuesOld!);
  }
  if (needs.topK) Object.assign(feeds, topKFeeds(batch, picked, needs.topK));
  return feeds;
}

/**
 * Each cell's weight in the run's mean over the trained tokens (./step-loss.ts aggregator), on
 * the batch's [B, T] grid, 0 where nothing trains: token-mean mask / max(Σ mask, 1);
 * sample-mean mask / (max(Σ mask of its row, 1) · B), B the batch's rows, each of its rows
 * counted whether it has a trained token or not (as OpenClaw-RL's slime divides by the global
 * batch size). Σ w·x is then the token mean, or Σ_b mean_b(x) / B. Made once for the whole
 * batch, the weights of a micro-batch's tokens are their share of the batch's mean, so the
 * micro-batches' sums add up to it (./micro-batch.ts). A row's first cell never trains (it has
 * no log-prob).
 */
export function lossWeightGrid(batch: StepBatch, lossAgg: LossAgg): Float32Array {
  const { batch: B, seqLen: T, responseMask: mask } = batch;
  const out = new Float32Array(B * T);
  const rows = new Float64Array(B);
  let all = 0;
  for (let r = 0; r < B; r++) for (let t = 1; t < T; t++) rows[r]! += mask[r * T + t]!;
  for (const n of rows) all += n;
  for (let r = 0; r < B; r++) {
    const denominator = lossAgg === 'sample-mean' ? Math.max(rows[r]!, 1) * B : Math.max(all, 1);
    for (let t = 1; t < T; t++) out[r * T + t] = mask[r * T + t]! / denominator;
  }
  return out;
}

/** The cells where top-K distillation trains (a trained token with a distillation weight): the count its metric is a mean over. */
export function distilledTokens(batch: StepBatch): number {
  const w = batch.distillWeights;
  if (!w) return 0;
  let n = 0;
  batch.responseMask.forEach((m, k) => {
    if (m !== 0 && k % batch.seqLen !== 0 && w[k]! > 0) n++;
  });
  return n;
}

function checkTopK(batch: StepBatch, k: number): void {
  const top = batch.teacherTopK;
  if (!top || !batch.distillWeights) throw new UserError('step batch: top-K distillation needs teacherTopK and distillWeights');
  if (top.k !== k) throw new UserError(`step batch: the teacher's top-K has K = ${top.k}, the step was built for K = ${k}`);
  const cells = batch.batch * batch.seqLen * k;
  if (top.logprobs.length !== cells || top.indices.length !== cells) throw new UserError(`step batch: teacherTopK has ${top.logprobs.length} log-probs and ${top.indices.length} ids, expected ${batch.batch} × ${batch.seqLen} × ${k} = ${cells}`);
  checkArrays(batch, [['distillWeights', batch.distillWeights]]);
}

/** The top-K OPD inputs at the picked positions: the teacher's K log-probs and token ids, and each token's distillation weight. */
function topKFeeds(batch: StepBatch, picked: Picked, k: number): Record<string, ort.Tensor> {
  const top = batch.teacherTopK!;
  const n = picked.tokens.length;
  const logprobs = new Float32Array(n * k), indices = new BigInt64Array(n * k);
  picked.tokens.forEach((cell, i) => {
    logprobs.set(top.logprobs.subarray(cell * k, (cell + 1) * k), i * k);
    for (let j = 0; j < k; j++) indices[i * k + j] = BigInt(top.indices[cell * k + j]!);
  });
  return {
    [TOPK_INPUTS.logprobs]: new ort.Tensor('float32', logprobs, [n, k]),
    [TOPK_INPUTS.indices]: new ort.Tensor('int64', indices, [n, k]),
    [TOPK_INPUTS.weights]: new ort.Tensor('float32', picked.standIn ? new Float32Array(n) : Float32Array.from(picked.tokens, (cell) => batch.distillWeights![cell]!), [n]),
  };
}

/** The [N] log-probs of the picked tokens on the token grid, 0 elsewhere (and at position 0 of each row). */
export function toGrid(values: Float32Array, picked: Picked, batch: StepBatch): Float32Array {
  const out = new Float32Array(batch.batch * batch.seqLen);
  if (!picked.standIn) picked.tokens.forEach((k, i) => (out[k] = values[i]!));
  return out;
}

export function checkArrays(batch: StepBatch, arrays: [string, { length: number } | undefined][]): void {
  const { batch: B, seqLen: T } = batch;
  if (!Number.isInteger(B) || B < 1 || !Number.isInteger(T) || T < 2) throw new UserError(`step batch: needs at least 1 row of 2 tokens, got ${B} × ${T}`);
  for (const [name, a] of arrays) {
    if (!a) throw new UserError(`step batch: ${name} is missing${name === 'refLogprobs' ? ' (the KL penalty needs it)' : name === 'returns' || name === 'valuesOld' ? ' (the value head needs it)' : ''}`);
    if (a.length !== B * T) throw new UserError(`step batch: ${name} has ${a.length} values, expected ${B} × ${T} = ${B * T}`);
  }
}

/** The model's inputs in their sizes, every token id in the vocabulary. */
export function checkTokens(batch: StepBatch, vocabSize: number): void {
  checkArrays(batch, [['inputIds', batch.inputIds], ['attentionMask', batch.attentionMask], ['positionIds', batch.positionIds]]);
  const T = batch.seqLen;
  for (let i = 0; i < batch.inputIds.length; i++) {
    const id = batch.inputIds[i]!;
    if (id < 0n || id >= BigInt(vocabSize)) throw new UserError(`step batch: token id ${id} at row ${Math.floor(i / T)}, position ${i % T} is outside the vocabulary [0, ${vocabSize})`);
  }
}
