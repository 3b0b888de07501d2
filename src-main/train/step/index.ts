/**
 * The training step for the rest of the app (the seam is ../step-api.ts):
 *
 *     const step = await createTrainStep(modelDir, {
 *       lora: { r: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] },
 *       loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
 *       optimizer: { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
 *       device: 'cpu',
 *     });
 *     batch.oldFromPolicy = batch.responseMask;   // old := stopgrad(logp), in the step's own run
 *     const { weights: next, state, metrics, logprobs } = await step.step(batch, weights, state0);
 *     console.log(step.executionProvider, metrics.loss);
 *     await step.close();
 *
 * `createTrainStep` runs the sessions in a worker thread, so the caller's event loop never
 * blocks. Code that already runs in a worker (a trainer thread) can use
 * `createTrainStepInProcess` and skip the second hop: same interface, same results.
 */
import { Checkpoint } from '../../model/hf-checkpoint.js';
import type { Device } from '../../model/ort-session.js';
import { startWorker, waitUntilReady, WorkerClient } from '../../model/worker-host.js';
import type { LoraTensorSpec, LoraWeights, OptimizerState, StepBatch, StepResult, TrainStep } from '../step-api.js';
import { TrainStepEngine, type Gradients, type OptimizerPlacement, type TrainStepOptions } from './engine.js';

export type { TrainStepOptions, OptimizerPlacement, Gradients } from './engine.js';
export { TrainStepEngine, DEFAULT_PLACEMENT } from './engine.js';
export { emptyState } from './optimizer.js';

/** A TrainStep with the extras both implementations offer. */
export interface TrainStepHandle extends TrainStep {
  readonly placement: OptimizerPlacement;
  /** Loss, metrics and gradients without an update (diagnostics and tests). */
  gradients(batch: StepBatch, weights: LoraWeights): Promise<Gradients>;
}

const dirOf = (model: string | Checkpoint) => (typeof model === 'string' ? model : model.dir);

/** In this thread: for callers that already live in a worker. */
export function createTrainStepInProcess(model: string | Checkpoint, options: TrainStepOptions): Promise<TrainStepHandle> {
  return TrainStepEngine.create(model, options);
}

/** In a worker thread (the default for the app and the CLI). */
export async function createTrainStep(model: string | Checkpoint, options: TrainStepOptions): Promise<TrainStepHandle> {
  const worker = await startWorker(
    { compiled: new URL('./worker.js', import.meta.url), source: new URL('./worker.ts', import.meta.url) },
    { model: dirOf(model), options },
  );
  const ready = await waitUntilReady<{ specs: LoraTensorSpec[]; executionProvider: Device; placement: OptimizerPlacement }>(worker);
  const client = new WorkerClient(worker, { subject: 'the training step', worker: 'the training-step worker' });
  return new WorkerTrainStep(client, ready.specs, ready.executionProvider, ready.placement);
}

class WorkerTrainStep implements TrainStepHandle {
  constructor(
    private readonly worker: WorkerClient,
    readonly specs: LoraTensorSpec[],
    readonly executionProvider: Device,
    readonly placement: OptimizerPlacement,
  ) {}

  policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array> {
    return this.worker.call('policyLogprobs', [batch, weights]);
  }
  baseLogprobs(batch: StepBatch): Promise<Float32Array> {
    return this.worker.call('baseLogprobs', [batch]);
  }
  gradients(batch: StepBatch, weights: LoraWeights): Promise<Gradients> {
    return this.worker.call('gradients', [batch, weights]);
  }
  step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    return this.worker.call('step', [batch, weights, state]);
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}
