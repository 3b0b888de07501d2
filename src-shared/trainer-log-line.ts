/**
 * The shape of one `trainer_log.jsonl` line (written by src-main/train/trainer-log.ts). It lives apart from the log's writer
 * because the API contract, which the sandboxed preload and the browser bundle load, builds its
 * `train.progress` event from it and must not reach Node modules, even for type checking.
 */
export interface StepLog {
  step: number;
  total_steps: number;
  epoch: number;
  loss: number;
  reward_mean: number;
  adv_mean: number;
  /** Token mean of teacher − old where a teacher exists; null for rl or a batch without hints. */
  teacher_student_gap: number | null;
  approx_kl: number;
  clipfrac: number;
  grad_norm: number;
  lr: number;
  tokens: number;
  tokens_per_s: number;
  elapsed_s: number;
  eta_s: number;
  execution_provider: string;
}
