/**
 * The shape of one `trainer_log.jsonl` line (written by src-main/train/trainer-log.ts). It lives apart from the log's writer
 * because the API contract, which the sandboxed preload and the browser bundle load, builds its
 * `train.progress` event from it and must not reach Node modules, even for type checking.
 */
import type { DeltaEstimate, HintMetrics, LikelihoodMetrics } from './eval-report.js';
import type { BuiltInMetricField, LossSpec } from './training-methods.js';

/**
 * A step's line. Between the advantages' and the gradient's fields come the metrics the run's
 * loss declares (./training-methods.ts), in its order: PPO-clip, every built-in method's loss,
 * writes `approx_kl` and `clipfrac` (typed here); a loss registered by a test writes its own.
 */
export interface StepLog extends Record<BuiltInMetricField, number> {
  step: number;
  total_steps: number;
  epoch: number;
  loss: number;
  reward_mean: number;
  adv_mean: number;
  /** Token mean of teacher − old where a teacher exists; null for rl or a batch without hints. */
  teacher_student_gap: number | null;
  grad_norm: number;
  lr: number;
  tokens: number;
  tokens_per_s: number;
  elapsed_s: number;
  eta_s: number;
  execution_provider: string;
  /**
   * PPO over several epochs or on rollouts (docs/design.md §Advantage estimators): the first
   * epoch's mean |logp − old| before any update (≈ 0 when the same engine generated the
   * rollouts), and with `gae` the value loss and the explained variance 1 − Var(R − V)/Var(R).
   */
  drift?: number;
  value_loss?: number;
  explained_variance?: number;
  /** Top-K OPD (--opd-topk): the token mean, over the tokens that distil, of the reverse KL over the teacher's top K and the tail. */
  topk_kl?: number;
  /** On-policy steps: the rollouts generated for this step and their mean reward. */
  episodes?: number;
  /** On-policy steps: episodes skipped because they do not fit the run's max length (never cut). */
  skipped_over_length?: number;
  episode_reward_mean?: number | null;
}

/**
 * The other lines of `trainer_log.jsonl` carry a `type` (a line without one is a StepLog, as
 * logs were before these existed). `held_out` comes first in a run: how many held-out sessions
 * and samples the database had, none of which the run trains on. `eval` lines measure the
 * held-out samples under the adapter of `step` (step 0: before any update) against the base
 * model (docs/design.md §Evaluation).
 */
export interface HeldOutLogLine {
  type: 'held_out';
  sessions: number;
  samples: number;
}

export interface EvalLogLine {
  type: 'eval';
  step: number;
  total_steps: number;
  split: { sessions: number; samples: number };
  likelihood: LikelihoodMetrics;
  hints: HintMetrics;
  /** margin(adapter at this step) − margin(base), paired over the held-out samples. */
  margin_delta: DeltaEstimate;
  /** hint gap(adapter at this step) − gap(base). */
  gap_delta: DeltaEstimate;
  seconds: number;
}

export type TrainerLogLine = StepLog | HeldOutLogLine | EvalLogLine;

/**
 * The fields of the metrics `loss` declares, in its order, from a batch's metrics by key (0 for
 * a step that trained nothing). Typed as the built-in losses' fields; a registered loss's are its own.
 */
export function lossMetricFields(loss: LossSpec, metrics: Readonly<Record<string, unknown>> | null): Record<BuiltInMetricField, number> {
  return Object.fromEntries(loss.metrics.map((m) => [m.field, (metrics?.[m.key] as number | undefined) ?? 0])) as Record<BuiltInMetricField, number>;
}
