/**
 * The non-finite stop shared by the offline and the on-policy trainers: a batch whose loss,
 * gradient norm or new weights hold a NaN or ±Infinity stops the run with one line that names
 * the step, the learning rate and the checkpoint on disk, which is the last one saved (with
 * `saveEvery` > 1 it can be several steps back).
 */
import { UserError } from '../../src-shared/types.js';
import type { BatchMetrics, BatchState } from './ppo-batch.js';
import type { LoraWeights } from './training-step.js';

/** The first tensor holding a NaN or ±Infinity, or null. */
export function firstNonFinite(weights: LoraWeights): string | null {
  for (const [k, v] of weights) for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i]!)) return k;
  return null;
}

export interface StopPoint {
  /** The step the batch was for, counted from 1. */
  step: number;
  lr: number;
  /** The step of the checkpoint on disk and its folder. */
  savedStep: number;
  checkpointDir: string;
}

/** Throws the run's one-line stop when the batch's result is not finite. */
export function checkFiniteBatch(result: BatchState & { metrics: Pick<BatchMetrics, 'loss' | 'gradNorm'> }, at: StopPoint): void {
  const { loss, gradNorm } = result.metrics;
  const badWeight = firstNonFinite(result.weights) ?? (result.valueHead ? firstNonFinite(result.valueHead) : null);
  if (Number.isFinite(loss) && Number.isFinite(gradNorm) && !badWeight) return;
  const what = !Number.isFinite(loss) ? `the loss is ${loss}` : !Number.isFinite(gradNorm) ? `the gradient norm is ${gradNorm}` : `the update made ${badWeight} non-finite`;
  throw new UserError(`training stopped at step ${at.step}: ${what} (lr ${at.lr}); the last good checkpoint (step ${at.savedStep}) is kept in ${at.checkpointDir}`);
}
