/**
 * Starting a training run from the app or the CLI: the trainer (./trainer.ts) runs in a
 * worker thread, so the caller's event loop never blocks on ONNX Runtime.
 *
 *     const result = await startTraining({ modelDir, outDir, method: 'rl', samples }, {
 *       onEvent: (e) => e.type === 'step' && chart(e.log),
 *       signal: abortController.signal, // Cancel: stops after the current step, checkpoint kept
 *     });
 *
 * Cancel goes through a SharedArrayBuffer flag rather than a message, so the worker sees it
 * between two steps even while its event loop is busy inside ONNX Runtime calls.
 */
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { UserError } from '../core/types.js';
import type { TrainResult, TrainerEvent, TrainerOptions } from './trainer.js';

export interface StartOptions {
  onEvent?: (event: TrainerEvent) => void;
  signal?: AbortSignal;
}

/** Messages from the worker. */
export type WorkerMessage =
  | { type: 'event'; event: TrainerEvent }
  | { type: 'done'; result: TrainResult }
  | { type: 'error'; error: { name: string; message: string; stack?: string } };

function workerEntry(): { file: URL; workerData: Record<string, unknown> } {
  const compiled = new URL('./trainer-worker.js', import.meta.url);
  if (fs.existsSync(fileURLToPath(compiled))) return { file: compiled, workerData: {} };
  const source = new URL('./trainer-worker.ts', import.meta.url);
  // The model core's boot file registers tsx inside the worker, then imports `entry`.
  return { file: new URL('../model/worker-boot.mjs', import.meta.url), workerData: { entry: pathToFileURL(fileURLToPath(source)).href } };
}

function revive(e: { name: string; message: string; stack?: string }): Error {
  if (e.name === 'UserError') return new UserError(e.message);
  const err = new Error(e.message);
  if (e.stack) err.stack = e.stack;
  return err;
}

export async function startTraining(options: TrainerOptions, { onEvent, signal }: StartOptions = {}): Promise<TrainResult> {
  // Load onnxruntime-node's native binding on this long-lived thread first: it is not
  // context-aware, and a worker that loaded it first would unregister it when it exits.
  await import('onnxruntime-node');
  const stopFlag = new Int32Array(new SharedArrayBuffer(4));
  const entry = workerEntry();
  const worker = new Worker(entry.file, { workerData: { ...entry.workerData, options, stopFlag } });
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
          reject(revive(msg.error));
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
