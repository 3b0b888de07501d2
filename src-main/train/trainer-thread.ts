/**
 * Starting a training run from the app or the CLI: the trainer (./trainer.ts) runs in a
 * worker thread (./trainer-worker.ts), so the caller's event loop never blocks on ONNX Runtime.
 * The training step runs in that same thread.
 *
 *     const result = await startTraining({ modelDir, outDir, method: 'rl', samples }, {
 *       onEvent: (e) => e.type === 'step' && chart(e.log),
 *       signal: abortController.signal, // Cancel: stops after the current step, checkpoint kept
 *     });
 *
 * Cancel goes through a SharedArrayBuffer flag rather than a message, so the worker sees it
 * between two steps even while its event loop is busy inside ONNX Runtime calls.
 */
import { runStoppableJob, type StoppableJobMessage } from '../model/worker-host.js';
import type { TrainResult, TrainerEvent, TrainerOptions } from './trainer.js';

export interface StartOptions {
  onEvent?: (event: TrainerEvent) => void;
  signal?: AbortSignal;
}

/** Messages from the worker. */
export type WorkerMessage = StoppableJobMessage<TrainerEvent, TrainResult>;

export function startTraining(options: TrainerOptions, start: StartOptions = {}): Promise<TrainResult> {
  const files = { compiled: new URL('./trainer-worker.js', import.meta.url), source: new URL('./trainer-worker.ts', import.meta.url) };
  return runStoppableJob<TrainerEvent, TrainResult>(files, options, 'trainer', start);
}
