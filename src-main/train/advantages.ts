/**
 * Per-token advantages of docs/design.md §Advantages on the student's [B, T] grid, and the batch metrics that
 * come from them (reward mean, advantage mean, teacher–student gap). With the `grpo` and `gae`
 * estimators the reward part r is replaced by their advantage (`rewardTerm`, ./grpo-gae.ts).
 *
 *   rl       A_t = r
 *   opd      A_t = teacher_t − old_t   (a row without a teacher: teacher = old, so A = 0)
 *   combine  A_t = w_opd·(teacher_t − old_t) + w_rl·r
 *
 * In general: the teacher term when the method's record uses hints, the reward term when it
 * uses rewards, each weighted when the record is `weighted` (src-shared/training-methods.ts).
 *
 * Top-K distillation (`distill`, --opd-topk K > 0): the teacher teaches through the step's
 * top-K KL term instead (./step-loss.ts appendTopKDistillation), so A is the reward term alone
 * and the batch's distillWeights carry the teacher term's weight (w_opd for combine, 1 for
 * opd) on the trained tokens of rows with a teacher. The teacher–student gap is still measured.
 *
 * `old` is the rollout log-prob when the row carries one, else the policy's log-prob at the
 * start of the step. Teacher log-probs are the base model's on the teacher sequence, read
 * from its own response span and laid onto the student's (same tokens, maybe other positions).
 *
 * Two ways to get the policy's old, with the same values:
 * - {@link fillAdvantages}: old known before the step (a forward pass of its own, `policyOld`);
 *   the host computes the advantages.
 * - {@link fillInStepAdvantages}: the step computes old = stopgrad(logp) in its own forward
 *   pass and the advantages from it (./step-loss.ts, in-step old); the host only lays out the
 *   pieces that do not depend on old. The trainer uses this: it saves a forward pass per step.
 *   {@link inStepAdvantageMetrics} then gives the metrics from the log-probs the step returns.
 */
import { methodRecord, termWeights } from '../../src-shared/training-methods.js';
import { responseValues, type TrainRow } from './batches.js';
import type { StepBatch, TrainMethod } from './training-step.js';

export interface AdvantageWeights {
  wOpd: number;
  wRl: number;
}

export interface AdvantageInputs {
  method: TrainMethod;
  weights: AdvantageWeights;
  rows: readonly TrainRow[];
  batch: StepBatch;
  /** Policy log-probs on the student grid (used where a row has no rollout log-probs). */
  policyOld?: Float32Array;
  /** Base log-probs of each row's response tokens on its teacher sequence (undefined: no teacher). */
  teacher: (Float32Array | undefined)[];
  /**
   * Per row, the reward part's value on each response token, in place of r: the `grpo` and
   * `gae` estimators' advantages (docs/design.md §Advantage estimators). Absent: r everywhere.
   */
  rewardTerm?: readonly ArrayLike<number>[];
  /** The teacher distils through the top-K term, not the advantage (see the module comment); fills batch.distillWeights. */
  distill?: boolean;
}

export interface AdvantageMetrics {
  rewardMean: number;
  advMean: number;
  /** Token mean of teacher − old over rows with a teacher; null when none has one. */
  teacherStudentGap: number | null;
}

/**
 * Fills batch.oldLogprobs and batch.advantages; returns the metrics. Tokens the response
 * mask leaves out get A = 0 and no part in the metrics.
 */
export function fillAdvantages(input: AdvantageInputs): AdvantageMetrics {
  const { method, rows, batch, policyOld, teacher, rewardTerm, distill } = input;
  const T = batch.seqLen;
  const { hint: useOpd, reward: useRl } = methodRecord(method).uses;
  const { wOpd, wRl } = termWeights(method, input.weights);
  const wGap = distill ? 0 : wOpd;
  if (distill) batch.distillWeights = distillWeights(input);
  let advSum = 0, tokens = 0, gapSum = 0, gapTokens = 0, rewardSum = 0;
  rows.forEach((row, b) => {
    rewardSum += row.reward;
    const old = responseValues(batch.oldLogprobs, T, b, row);
    if (row.oldLogprobs) old.set(row.oldLogprobs);
    else if (policyOld) old.set(responseValues(policyOld, T, b, row));
    else throw new Error(`row ${row.origin}: no old log-probs (neither rollout nor policy)`);
    const adv = responseValues(batch.advantages, T, b, row);
    const mask = responseValues(batch.responseMask, T, b, row);
    const t = useOpd ? teacher[b] : undefined;
    const r = rewardTerm?.[b];
    for (let i = 0; i < adv.length; i++) {
      if (mask[i] === 0) {
        adv[i] = 0;
        continue;
      }
      const gap = t ? t[i]! - old[i]! : 0;
      if (t) {
        gapSum += gap;
        gapTokens++;
      }
      // Math.fround: the grid is fp32, and the metric should be the mean of what is trained on.
      const a = Math.fround((useOpd ? wGap * gap : 0) + (useRl ? wRl * (r ? r[i]! : row.reward) : 0));
      adv[i] = a;
      advSum += a;
      tokens++;
    }
  });
  return {
    rewardMean: rows.length ? rewardSum / rows.length : 0,
    advMean: tokens ? advSum / tokens : 0,
    teacherStudentGap: gapTokens ? gapSum / gapTokens : null,
  };
}

/**
 * Lays out what the step needs to compute old and the advantages itself: oldFromPolicy (1 on
 * rows without rollout log-probs), oldLogprobs (rollout rows), advantages (the w_rl·r part),
 * teacherLogprobs and opdWeights (w_opd on rows with a teacher; a row without one has
 * teacher = old, so its OPD term is 0).
 */
export function fillInStepAdvantages(input: Omit<AdvantageInputs, 'policyOld'>): void {
  const { method, rows, batch, teacher } = input;
  const T = batch.seqLen, n = batch.batch * T;
  const { hint: useOpd, reward: useRl } = methodRecord(method).uses;
  const { wOpd, wRl } = termWeights(method, input.weights);
  batch.oldFromPolicy = new Float32Array(n);
  batch.teacherLogprobs = new Float32Array(n);
  batch.opdWeights = new Float32Array(n);
  rows.forEach((row, b) => {
    if (row.oldLogprobs) responseValues(batch.oldLogprobs, T, b, row).set(row.oldLogprobs);
    else responseValues(batch.oldFromPolicy!, T, b, row).fill(1);
    responseValues(batch.advantages, T, b, row).fill(useRl ? wRl * row.reward : 0);
    const t = useOpd ? teacher[b] : undefined;
    if (t && !input.distill) {
      responseValues(batch.teacherLogprobs!, T, b, row).set(t);
      responseValues(batch.opdWeights!, T, b, row).fill(wOpd);
    }
  });
  if (input.distill) batch.distillWeights = distillWeights(input);
}

/** The top-K term's weight on each trained token of a row with a teacher: w_opd (1 for an unweighted method); 0 elsewhere. */
function distillWeights({ method, rows, batch, teacher, weights }: Omit<AdvantageInputs, 'policyOld'>): Float32Array {
  const out = new Float32Array(batch.batch * batch.seqLen);
  if (!methodRecord(method).uses.hint) return out;
  const { wOpd } = termWeights(method, weights);
  rows.forEach((row, b) => {
    if (!teacher[b]) return;
    const w = responseValues(out, batch.seqLen, b, row);
    responseValues(batch.responseMask, batch.seqLen, b, row).forEach((m, i) => (w[i] = m === 0 ? 0 : wOpd));
  });
  return out;
}

/**
 * The metrics of a step that computed old itself, from `policyOld` = the log-probs the step
 * returned (StepResult.logprobs): the same formula as {@link fillAdvantages}, on scratch grids.
 */
export function inStepAdvantageMetrics(input: AdvantageInputs & { policyOld: Float32Array }): AdvantageMetrics {
  const n = input.batch.batch * input.batch.seqLen;
  const scratch = { ...input.batch, oldLogprobs: new Float32Array(n), advantages: new Float32Array(n) };
  return fillAdvantages({ ...input, batch: scratch });
}
