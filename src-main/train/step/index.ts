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
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { UserError } from '../../core/types.js';
import { Checkpoint } from '../../model/checkpoint.js';
import type { Device } from '../../model/ort-session.js';
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
  await pinNativeBinding();
  const entry = workerEntry();
  const worker = new Worker(entry.file, { workerData: { ...entry.workerData, model: dirOf(model), options } });
  type Ready = { specs: LoraTensorSpec[]; executionProvider: Device; placement: OptimizerPlacement };
  const ready = await new Promise<Ready>((resolve, reject) => {
    worker.once('message', (msg: { ready?: Ready; fatal?: ErrorPayload }) => (msg.ready ? resolve(msg.ready) : reject(reviveError(msg.fatal!))));
    worker.once('error', reject);
  }).catch(async (err) => {
    await worker.terminate();
    throw err;
  });
  return new WorkerTrainStep(worker, ready.specs, ready.executionProvider, ready.placement);
}

interface ErrorPayload {
  name: string;
  message: string;
  stack?: string;
}

function reviveError(e: ErrorPayload): Error {
  const err = e.name === 'UserError' ? new UserError(e.message) : new Error(e.message);
  if (e.name !== 'UserError' && e.stack) err.stack = e.stack;
  return err;
}

function workerEntry(): { file: URL; workerData: Record<string, unknown> } {
  const compiled = new URL('./worker.js', import.meta.url);
  if (fs.existsSync(fileURLToPath(compiled))) return { file: compiled, workerData: {} };
  // From TypeScript sources: the model core's boot file registers tsx, then imports the entry.
  const source = new URL('./worker.ts', import.meta.url);
  return { file: new URL('../../model/worker-boot.mjs', import.meta.url), workerData: { entry: pathToFileURL(fileURLToPath(source)).href } };
}

/**
 * onnxruntime-node's binding is not context-aware: it must stay loaded on a long-lived thread
 * or later workers fail with "Module did not self-register" (see ../../model/local-model.ts).
 */
let pinned: Promise<unknown> | undefined;
function pinNativeBinding(): Promise<unknown> {
  return (pinned ??= import('onnxruntime-node'));
}

class WorkerTrainStep implements TrainStepHandle {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private closed = false;

  constructor(
    private readonly worker: Worker,
    readonly specs: LoraTensorSpec[],
    readonly executionProvider: Device,
    readonly placement: OptimizerPlacement,
  ) {
    worker.on('message', (msg: { id: number; result?: unknown; error?: ErrorPayload }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(reviveError(msg.error));
      else p.resolve(msg.result);
    });
    worker.on('error', (err) => this.failAll(err));
    worker.on('exit', (code) => {
      if (!this.closed) this.failAll(new Error(`the training-step worker exited unexpectedly (code ${code})`));
    });
  }

  private call<T>(method: string, args: unknown[]): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the training step is closed'));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ id, method, args });
    });
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array> {
    return this.call('policyLogprobs', [batch, weights]);
  }
  baseLogprobs(batch: StepBatch): Promise<Float32Array> {
    return this.call('baseLogprobs', [batch]);
  }
  gradients(batch: StepBatch, weights: LoraWeights): Promise<Gradients> {
    return this.call('gradients', [batch, weights]);
  }
  step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    return this.call('step', [batch, weights, state]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.call('close', []);
    } catch {
      // closing anyway
    }
    this.closed = true;
    await this.worker.terminate();
  }
}
