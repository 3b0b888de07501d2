/**
 * What a training run tells its caller, offline (./trainer.ts) or on-policy (../onpolicy/):
 * the events it sends while it runs, the hooks it polls, and the result it ends with.
 *
 * These types live apart from the run loop (./run-loop.ts) and the trainers so that the
 * modules the loop uses (./run-evaluations.ts sends `eval` events) can name them without
 * importing the loop back.
 */
import type { EvalLogLine, StepLog } from './trainer-log.js';

export type TrainerEvent =
  | { type: 'status'; phase: 'loading' | 'preparing' | 'compiling' | 'generating' | 'training' | 'evaluating' | 'saving' | 'exporting'; message: string }
  | { type: 'executionProvider'; name: string }
  /** Samples left out because they do not fit the run's max length (src-shared/training.ts overLengthNote). */
  | { type: 'overLength'; count: number; maxLength: number; /** The model's max_position_embeddings: how far max length can go. */ positions: number }
  | { type: 'step'; log: StepLog }
  | { type: 'eval'; log: EvalLogLine };

export type EmitEvent = (event: TrainerEvent) => void;

export interface TrainerHooks {
  onEvent?: EmitEvent;
  /** Polled between steps; true stops after the current step with a checkpoint. */
  shouldStop?: () => boolean;
}

export interface TrainResult {
  status: 'finished' | 'cancelled';
  steps: number;
  totalSteps: number;
  adapterDir: string;
  checkpointDir: string;
  logFile: string;
  executionProvider: string;
  /** Rows (offline) or contexts (on-policy) the run trains from. */
  rows: number;
  skipped: Record<string, number>;
  truncated: number;
  last: StepLog | null;
  mergedDir?: string;
  /** The held-out sessions and samples the caller named (none trained on). */
  heldOut: { sessions: number; samples: number };
  /** The last held-out evaluation, and eval.json, when there were held-out samples to measure. */
  lastEval: EvalLogLine | null;
  evalFile: string | null;
}
