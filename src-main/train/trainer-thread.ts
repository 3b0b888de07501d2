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
import { reviveError, startWorker } from '../model/worker-host.js';
import type { ErrorPayload } from '../model/worker-serve.js';
import type { TrainResult, TrainerEvent, TrainerOptions } from './trainer.js';

export interface StartOptions {
  onEvent?: (event: TrainerEvent) => void;
  signal?: AbortSignal;
}

/** Messages from the worker. */
export type WorkerMessage =
  | { type: 'event'; event: TrainerEvent }
  | { type: 'done'; result: TrainResult }
  | { type: 'error'; error: ErrorPayload };

export async function startTraining(options: TrainerOptions, { onEvent, signal }: StartOptions = {}): Promise<TrainResult> {
  const stopFlag = new Int32Array(new SharedArrayBuffer(4));
  const worker = await startWorker(
    { compiled: new URL('./trainer-worker.js', import.meta.url), source: new URL('./trainer-worker.ts', import.meta.url) },
    { options, stopFlag },
  );
  const onAbort = () => Atomics.store(stopFlag, 0, 1);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort);
  try {
    return await new Promise<TrainResult>((resolve, reject) => {
      let settled = false;
      worker.on('message', (msg: WorkerMessage) => {
        if (msg.type === 'event') onEvent?.(msg.event);
        else if (msg.type === 'done') {
          settled = true;
          resolve(msg.result);
        } else {
          settled = true;
          reject(reviveError(msg.error));
        }
      });
      worker.on('error', (err) => {
        settled = true;
        reject(err);
      });
      worker.on('exit', (code) => {
        if (!settled) reject(new Error(`the trainer worker exited unexpectedly (code ${code})`));
      });
    });
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await worker.terminate();
  }
}
