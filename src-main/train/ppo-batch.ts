/**
 * One batch of rows → its optimizer updates (docs/design.md §Advantage estimators, §Losses):
 * the trainer's step for `--data` and database rows, and the call `train --on-policy` makes
 * with the rows of its rollouts (which carry old_logprobs, response_mask, rewards and group).
 *
 *     const { weights, optimizer, valueHead, metrics } = await trainBatch({
 *       step, rows, weights, optimizer, valueHead,        // valueHead: with `gae` only
 *       settings: { method, wOpd, wRl, klBeta, ppo },     // ppo: src-shared/rollout.ts PpoSettings
 *       random,                                           // shuffles the minibatches
 *     });
 *
 * Two ways through, with the same semantics:
 *
 * - One update, estimator `reward`, no normalisation (one epoch, the whole batch one
 *   minibatch): the step computes old = stopgrad(logp) and the OPD part of the advantages
 *   in its own forward pass (./step-loss.ts, in-step old), as every run did before PPO epochs.
 * - Otherwise: old is fixed once for the batch (a row's own old_logprobs, else one forward
 *   pass of the policy, which with `gae` also gives V_old), the advantages are computed on
 *   the host (./advantages.ts, ./grpo-gae.ts), and `ppoEpochs` epochs run over the batch
 *   in minibatches of `minibatch` rows (0: the whole batch), shuffled per epoch by `random`,
 *   each minibatch one optimizer update against that fixed old.
 *
 * Top-K OPD (`opdTopK` K > 0, a method that uses hints): the teacher pass gives each reply
 * token the base model's top K with the hint in context ({@link teacherTopK}), laid on the
 * student's grid (batch.teacherTopK), and the advantages leave the teacher term to the step's
 * distillation term (./advantages.ts `distill`).
 *
 * Metrics: the mean over the updates of loss, grad norm, clip fraction, approx KL, value
 * loss and top-K KL; `drift`, the mean |logp − old| over the tokens whose old came from a row, before any
 * update (from the start-of-batch forward pass when there is one, else the first update's
 * own forward pass); with `gae`, the explained variance of the returns by V_old.
 */
import type { PpoSettings } from '../../src-shared/rollout.js';
import { methodLoss, methodRecord } from '../../src-shared/training-methods.js';
import { UserError } from '../../src-shared/types.js';
import { seededRandom } from '../model/sampling.js';
import { fillAdvantages, fillInStepAdvantages, inStepAdvantageMetrics } from './advantages.js';
import { padBatch, responseValues, type TrainRow } from './batches.js';
import { explainedVariance, gaeRow, grpoAdvantages, missingGroup, normalizeMasked } from './grpo-gae.js';
import type { LoraWeights, OptimizerState, StepBatch, StepResult, TeacherTopK, TrainMethod, TrainStep } from './training-step.js';
import { splitValueHead, withValueHead, type ValueHead } from './value-head.js';

export interface BatchSettings {
  method: TrainMethod;
  wOpd: number;
  wRl: number;
  /** β of the k3 penalty against the base model: > 0 scores the batch under the base too. */
  klBeta: number;
  ppo: PpoSettings;
  /** Top-K OPD's K (the step's LossConfig.opdTopK); absent or 0: the sampled token's advantage. */
  opdTopK?: number;
}

/** What a batch updates. */
export interface BatchState {
  weights: LoraWeights;
  optimizer: OptimizerState;
  /** The value head, with `gae` only (./value-head.ts). */
  valueHead?: ValueHead;
}

export interface BatchMetrics {
  /** The metrics the method's loss declares (./losses.ts; PPO-clip: clipfrac, approxKl), by key: means over the batch's updates. */
  readonly [lossMetric: string]: number | null | undefined;
  /** Means over the batch's updates. */
  loss: number;
  gradNorm: number;
  valueLoss?: number;
  /** Top-K OPD: the mean over the updates of the token mean of the top-K KL. */
  topkKl?: number;
  /** Trained tokens (Σ response mask) and real tokens (Σ attention mask) of the batch. */
  tokens: number;
  inputTokens: number;
  rewardMean: number;
  /** Token mean of the advantages trained on (after normalisation, when asked for). */
  advMean: number;
  teacherStudentGap: number | null;
  drift?: number;
  explainedVariance?: number;
  /** Optimizer updates made; fewer than planned when one was not finite (the run stops). */
  updates: number;
}

export interface TrainBatchInput extends BatchState {
  step: TrainStep;
  rows: readonly TrainRow[];
  settings: BatchSettings;
  /** Uniform in [0, 1): shuffles each epoch's minibatches (unused with the whole batch as one). */
  random: () => number;
  /**
   * The rows whose rewards make up GRPO's groups; default `rows`. An offline run passes all
   * its rows, so a group's baseline does not depend on how the batches cut it.
   */
  groupPool?: readonly TrainRow[];
  /**
   * The teacher's log-probs of each row's response tokens, when the caller has them already
   * (the on-policy trainer scores each episode's teacher as the episode finishes); absent:
   * computed here from each row's `teacher` span ({@link teacherLogprobs}).
   */
  teacher?: readonly (Float32Array | undefined)[];
}

/** The minibatch order's randomness for step `step` of a run: a pure function of (seed, step), so a resumed run shuffles as the straight one did. */
export function minibatchRandom(seed: number, step: number): () => number {
  return seededRandom((Math.imul(seed >>> 0, 0x27d4eb2f) ^ Math.imul(step + 1, 0x165667b1)) >>> 0);
}

/** Whether a batch is the single update with in-step old (see the module comment). */
export function isSingleUpdate(ppo: PpoSettings, rows: number): boolean {
  return ppo.advantage === 'reward' && !ppo.normalizeAdvantages && ppo.ppoEpochs === 1 && (ppo.minibatch === 0 || ppo.minibatch >= rows);
}

export async function trainBatch(input: TrainBatchInput): Promise<BatchState & { metrics: BatchMetrics }> {
  checkInput(input);
  const { step, rows, settings } = input;
  const batch = padBatch(rows);
  const k = distillK(settings);
  let teacher: (Float32Array | undefined)[];
  if (k > 0) {
    if (input.teacher) throw new Error('trainBatch: top-K distillation scores its own teacher; a batch with teacher log-probs given has no top K');
    const scored = await teacherTopK(step, rows, k);
    teacher = scored.logprobs;
    batch.teacherTopK = layTopK(batch, rows, scored.topK, k);
  } else teacher = input.teacher ? [...input.teacher] : await teacherLogprobs(step, settings.method, rows);
  if (settings.klBeta > 0) batch.refLogprobs = await step.baseLogprobs(batch);
  return isSingleUpdate(settings.ppo, rows.length) ? singleUpdate(input, batch, teacher) : ppoUpdates(input, batch, teacher);
}

/** Top-K OPD's K for this batch: the setting's, for a method that learns from hints; else 0. */
const distillK = (s: BatchSettings): number => (s.opdTopK && methodRecord(s.method).uses.hint ? s.opdTopK : 0);

function checkInput({ step, rows, settings, valueHead, teacher }: TrainBatchInput): void {
  if (rows.length === 0) throw new Error('trainBatch: no rows');
  if (teacher && teacher.length !== rows.length) throw new Error('trainBatch: one teacher entry per row');
  const gae = settings.ppo.advantage === 'gae';
  if (gae !== step.valueHead) throw new Error(`trainBatch: the ${settings.ppo.advantage} estimator needs a training step ${gae ? 'with' : 'without'} a value head`);
  if (gae !== (valueHead !== undefined)) throw new Error(`trainBatch: a value head goes with the gae estimator only`);
  if (settings.ppo.advantage === 'grpo') {
    const missing = missingGroup(rows);
    if (missing) throw new UserError(missing);
  }
}

async function singleUpdate(input: TrainBatchInput, batch: StepBatch, teacher: (Float32Array | undefined)[]) {
  const { step, rows, settings } = input;
  const advantageInputs = { method: settings.method, weights: { wOpd: settings.wOpd, wRl: settings.wRl }, rows, batch, teacher, distill: distillK(settings) > 0 };
  fillInStepAdvantages(advantageInputs);
  const result = await step.step(batch, input.weights, input.optimizer);
  const adv = inStepAdvantageMetrics({ ...advantageInputs, policyOld: result.logprobs });
  const metrics: BatchMetrics = {
    ...updateMeans(settings.method, [result]), ...batchTokens(batch), rewardMean: adv.rewardMean, advMean: adv.advMean,
    teacherStudentGap: adv.teacherStudentGap, ...optional('drift', rowOldDrift(rows, batch, result.logprobs)),
  };
  return { weights: result.weights, optimizer: result.state, metrics };
}

async function ppoUpdates(input: TrainBatchInput, batch: StepBatch, teacher: (Float32Array | undefined)[]) {
  const { step, rows, settings } = input;
  const { ppo } = settings;
  const gae = ppo.advantage === 'gae';
  let params = withValueHead(input.weights, input.valueHead);
  let optimizer = input.optimizer;
  // old and V_old, fixed for every update of the batch.
  let policyOld: Float32Array | undefined;
  if (gae) {
    const scored = await step.policyValues(batch, params);
    policyOld = scored.logprobs;
    batch.valuesOld = scored.values;
  } else if (rows.some((r) => !r.oldLogprobs)) {
    policyOld = await step.policyLogprobs(batch, input.weights);
  }
  const rewardTerm = ppo.advantage === 'grpo' ? grpoTerms(rows, input.groupPool ?? rows, ppo.grpoStd)
    : gae ? gaeTerms(rows, batch, ppo) : undefined;
  const adv = fillAdvantages({ method: settings.method, weights: { wOpd: settings.wOpd, wRl: settings.wRl }, rows, batch, policyOld, teacher, rewardTerm, distill: distillK(settings) > 0 });
  if (ppo.normalizeAdvantages) normalizeMasked(batch.advantages, batch.responseMask);

  let drift = policyOld ? rowOldDrift(rows, batch, policyOld) : undefined;
  const results: StepResult[] = [];
  const size = ppo.minibatch > 0 ? Math.min(ppo.minibatch, rows.length) : rows.length;
  epochs: for (let epoch = 0; epoch < ppo.ppoEpochs; epoch++) {
    const order = size < rows.length ? shuffled(rows.length, input.random) : rows.map((_, i) => i);
    for (let start = 0; start < rows.length; start += size) {
      const picked = order.slice(start, start + size);
      const mb = size < rows.length ? minibatch(batch, rows, picked) : batch;
      const result = await step.step(mb, params, optimizer);
      if (results.length === 0 && !policyOld) drift = rowOldDrift(picked.map((i) => rows[i]!), mb, result.logprobs);
      results.push(result);
      if (!Number.isFinite(result.metrics.loss) || !Number.isFinite(result.metrics.gradNorm)) break epochs; // the caller stops the run
      params = result.weights;
      optimizer = result.state;
    }
  }
  const { weights, valueHead } = splitValueHead(params);
  const metrics: BatchMetrics = {
    ...updateMeans(settings.method, results), ...batchTokens(batch), rewardMean: adv.rewardMean, advMean: maskedMean(batch.advantages, batch.responseMask),
    teacherStudentGap: adv.teacherStudentGap, ...optional('drift', drift),
    ...optional('explainedVariance', gae ? explainedVariance(batch.returns!, batch.valuesOld!, batch.responseMask) : undefined),
  };
  return { weights, optimizer, valueHead, metrics };
}

/** GRPO's advantage of each row, the same on each of its response tokens. */
function grpoTerms(rows: readonly TrainRow[], pool: readonly TrainRow[], divideByStd: boolean): ArrayLike<number>[] {
  return grpoAdvantages(rows, pool, divideByStd).map((a, b) => new Float64Array(rows[b]!.inputIds.length - rows[b]!.responseStart).fill(a));
}

/** GAE's advantages per row; fills batch.returns from batch.valuesOld. */
function gaeTerms(rows: readonly TrainRow[], batch: StepBatch, ppo: PpoSettings): ArrayLike<number>[] {
  const T = batch.seqLen;
  batch.returns = new Float32Array(batch.batch * T);
  return rows.map((row, b) => {
    const { advantages, returns } = gaeRow(row, responseValues(batch.valuesOld!, T, b, row), ppo.gamma, ppo.lambda);
    responseValues(batch.returns!, T, b, row).set(returns);
    return advantages;
  });
}

/** The rows `picked` of a batch as a batch of their own, its per-token grids carried over. */
function minibatch(batch: StepBatch, rows: readonly TrainRow[], picked: number[]): StepBatch {
  const mb = padBatch(picked.map((i) => rows[i]!));
  for (const key of ['oldLogprobs', 'advantages', 'refLogprobs', 'returns', 'valuesOld', 'distillWeights'] as const) {
    const from = batch[key];
    if (!from) continue;
    const to = new Float32Array(mb.batch * mb.seqLen);
    picked.forEach((i, j) => responseValues(to, mb.seqLen, j, rows[i]!).set(responseValues(from, batch.seqLen, i, rows[i]!)));
    mb[key] = to;
  }
  if (batch.teacherTopK) {
    const { k } = batch.teacherTopK;
    const to: TeacherTopK = { k, logprobs: new Float32Array(mb.batch * mb.seqLen * k), indices: new Int32Array(mb.batch * mb.seqLen * k) };
    picked.forEach((i, j) => {
      const row = rows[i]!, from = (i * batch.seqLen + row.responseStart) * k, at = (j * mb.seqLen + row.responseStart) * k;
      const cells = (row.inputIds.length - row.responseStart) * k;
      to.logprobs.set(batch.teacherTopK!.logprobs.subarray(from, from + cells), at);
      to.indices.set(batch.teacherTopK!.indices.subarray(from, from + cells), at);
    });
    mb.teacherTopK = to;
  }
  return mb;
}

/** Fisher–Yates over 0…n−1. */
function shuffled(n: number, random: () => number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/**
 * Mean |logp − the rollout's log-prob| over the trained tokens of the rows that carry rollout
 * log-probs (as old, or beside it: TrainRow.rolloutLogprobs); undefined when no row has them.
 */
function rowOldDrift(rows: readonly TrainRow[], batch: StepBatch, logprobs: Float32Array): number | undefined {
  let sum = 0, n = 0;
  rows.forEach((row, b) => {
    const rollout = row.oldLogprobs ?? row.rolloutLogprobs;
    if (!rollout) return;
    const lp = responseValues(logprobs, batch.seqLen, b, row), mask = responseValues(batch.responseMask, batch.seqLen, b, row);
    rollout.forEach((old, i) => {
      if (mask[i] === 0) return;
      sum += Math.abs(lp[i]! - old);
      n++;
    });
  });
  return n ? sum / n : undefined;
}

/** The means over the batch's updates of the loss, the gradient norm, the value loss and the metrics `method`'s loss declares. */
function updateMeans(method: TrainMethod, results: readonly StepResult[]): Pick<BatchMetrics, string> & Pick<BatchMetrics, 'loss' | 'gradNorm' | 'valueLoss' | 'updates'> {
  const mean = (f: (r: StepResult) => number) => results.reduce((s, r) => s + f(r), 0) / results.length;
  const valueLoss = results[0]?.metrics.valueLoss !== undefined ? mean((r) => r.metrics.valueLoss!) : undefined;
  const topkKl = results[0]?.metrics.topkKl !== undefined ? mean((r) => r.metrics.topkKl!) : undefined;
  const declared = methodLoss(method).metrics.map((m) => [m.key, mean((r) => r.metrics[m.key]!)] as const);
  return {
    loss: mean((r) => r.metrics.loss), gradNorm: mean((r) => r.metrics.gradNorm), ...Object.fromEntries(declared), ...optional('valueLoss', valueLoss),
    ...optional('topkKl', topkKl), updates: results.length,
  };
}

function batchTokens(batch: StepBatch): Pick<BatchMetrics, 'tokens' | 'inputTokens'> {
  return { tokens: batch.responseMask.reduce((a, m) => a + m, 0), inputTokens: batch.attentionMask.reduce((a, m) => a + Number(m), 0) };
}

function maskedMean(grid: Float32Array, mask: Float32Array): number {
  let sum = 0, n = 0;
  mask.forEach((m, k) => {
    if (m === 0) return;
    sum += grid[k]!;
    n++;
  });
  return n ? sum / n : 0;
}

/** `{ key: value }`, or nothing when the value is undefined (so the log line leaves the field out). */
function optional<K extends string>(key: K, value: number | undefined): { [k in K]?: number } {
  return value === undefined ? {} : ({ [key]: value } as { [k in K]?: number });
}

/**
 * Top-K OPD's teacher: for each row with a teacher span, the base model's top K (log-probs and
 * token ids, K per reply token) and the reply tokens' own log-probs on its teacher sequence.
 */
export async function teacherTopK(step: TrainStep, rows: readonly TrainRow[], k: number): Promise<{ logprobs: (Float32Array | undefined)[]; topK: (TeacherTopK | undefined)[] }> {
  const logprobs: (Float32Array | undefined)[] = rows.map(() => undefined);
  const topK: (TeacherTopK | undefined)[] = rows.map(() => undefined);
  const withTeacher = rows.map((r, i) => [r, i] as const).filter(([r]) => r.teacher);
  if (!withTeacher.length) return { logprobs, topK };
  const spans = withTeacher.map(([r]) => r.teacher!);
  const tb = padBatch(spans);
  const scored = await step.baseTopK(tb, k);
  withTeacher.forEach(([, i], j) => {
    const span = spans[j]!;
    logprobs[i] = responseValues(scored.logprobs, tb.seqLen, j, span).slice();
    const from = (j * tb.seqLen + span.responseStart) * k, to = (j * tb.seqLen + span.inputIds.length) * k;
    topK[i] = { k, logprobs: scored.topK.logprobs.slice(from, to), indices: scored.topK.indices.slice(from, to) };
  });
  return { logprobs, topK };
}

/** Each row's teacher top K (one entry per reply token) laid on the student's grid, K per cell; zeros where a row has none. */
function layTopK(batch: StepBatch, rows: readonly TrainRow[], topK: readonly (TeacherTopK | undefined)[], k: number): TeacherTopK {
  const out: TeacherTopK = { k, logprobs: new Float32Array(batch.batch * batch.seqLen * k), indices: new Int32Array(batch.batch * batch.seqLen * k) };
  rows.forEach((row, b) => {
    const t = topK[b];
    if (!t) return;
    const at = (b * batch.seqLen + row.responseStart) * k;
    out.logprobs.set(t.logprobs, at);
    out.indices.set(t.indices, at);
  });
  return out;
}

/** Base-model log-probs of each row's reply on its teacher sequence (OPD); undefined where a row has none. */
export async function teacherLogprobs(step: TrainStep, method: TrainMethod, rows: readonly TrainRow[]): Promise<(Float32Array | undefined)[]> {
  const out: (Float32Array | undefined)[] = rows.map(() => undefined);
  if (!methodRecord(method).uses.hint) return out;
  const withTeacher = rows.map((r, i) => [r, i] as const).filter(([r]) => r.teacher);
  if (!withTeacher.length) return out;
  const spans = withTeacher.map(([r]) => r.teacher!);
  const tb = padBatch(spans);
  const base = await step.baseLogprobs(tb);
  withTeacher.forEach(([, i], j) => (out[i] = responseValues(base, tb.seqLen, j, spans[j]!).slice()));
  return out;
}
