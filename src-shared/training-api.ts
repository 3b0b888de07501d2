// The training calls' types (the Training page, the training service): a run's settings,
// its progress events and its state. Node-free, like everything in src-shared/.
import type { EvalLogLine, StepLog } from './trainer-log-line.js';
import type { OnPolicySettings } from './on-policy-api.js';
import type { LoraTarget, LossAgg, OptimizerKind, Precision, Quantize, RecomputeMode, TrainDevice, TrainMethod } from './training.js';

/** Whether an optional part (the trainer, an LLM judge) is present in this build, and why not. */
export interface Availability {
  available: boolean;
  reason: string | null;
}

export interface TrainConfig {
  modelDir: string;
  outDir: string;
  method: TrainMethod;
  steps: number;
  batchSize: number;
  lr: number;
  optimizer: OptimizerKind;
  loraR: number;
  loraAlpha: number;
  targets: LoraTarget[];
  device: TrainDevice;
  seed: number;
  checkpointEvery: number;
  /**
   * Tokens per sample (prompt + reply); absent: min(2,048, the model's positions). Longer chats
   * keep their system turn and latest turns; a longer reply is skipped with a note.
   */
  maxLength?: number;
  /**
   * The frozen base stored quantised in the run (docs/design.md §QLoRA); absent: 'none'. The
   * adapter it trains is fp32 and applies to the original weights.
   */
  quantize?: Quantize;
  /**
   * The frozen base's projections in fp16 or fp32 (docs/design.md §Precision); absent: the
   * device's default (defaultPrecision: fp16 on CUDA). A quantised base (`quantize`) ignores it.
   */
  precision?: Precision;
  /**
   * Activation recomputation in the step (docs/design.md §Memory): less memory, more time per
   * step; absent: 'auto', on from max length 1,024 (src-shared/training.ts recomputeOn).
   */
  recompute?: RecomputeMode;
  /** How the per-token loss is averaged (docs/design.md §Losses, "Aggregation"); absent: the trainer's default (TRAIN_DEFAULTS.lossAgg). */
  lossAgg?: LossAgg;
  /** Top-K on-policy distillation's K (opd, combine; docs/design.md §Top-K distillation); absent or 0: the sampled token. */
  opdTopK?: number;
  /**
   * Rows per pass of the training step (gradient accumulation, docs/design.md §Micro-batches):
   * the batch's gradients are summed over passes of this many rows before its one update.
   * Absent: the most the memory estimate fits (src-shared/memory-verdict.ts chooseMicroBatch).
   */
  microBatch?: number;
  /**
   * Start even when the memory estimate says the run cannot fit in the machine's memory
   * (src-shared/train-memory.ts): the page's Start anyway, the CLI's --ignore-memory.
   */
  ignoreMemory?: boolean;
  /** Train on the model's own samples (docs/design.md §On-policy settings); absent: on the labelled samples as they are. */
  onPolicy?: OnPolicySettings;
}

/**
 * One trainer step as the `train.progress` event: the trainer's `trainer_log.jsonl` line (its
 * fields are defined there) less what the charts do not draw, with the run it belongs to.
 */
export interface TrainProgress extends Omit<StepLog, 'epoch' | 'tokens' | 'execution_provider'> {
  runId: string;
}

/** A held-out evaluation during a run (the trainer's `"type":"eval"` log line), as the `train.eval` event. */
export type TrainEval = EvalLogLine & { runId: string };

export type TrainStatus = 'running' | 'cancelling' | 'cancelled' | 'finished' | 'failed';

export interface TrainRunInfo {
  runId: string;
  status: TrainStatus;
  config: TrainConfig;
  startedAt: number;
  /** The execution provider that actually runs (never a silent fallback). */
  executionProvider: string | null;
  /** What the trainer is doing before and between steps, e.g. "compiling the training graph". */
  phase: string | null;
  /** What the run left out, e.g. "3 samples over 2,048 tokens skipped; …" (absent when nothing). */
  notice?: string;
  lastProgress: TrainProgress | null;
  adapterDir: string | null;
  error: string | null;
}

export interface TrainingState {
  engine: Availability;
  runs: TrainRunInfo[];
}
