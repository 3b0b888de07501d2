/**
 * Running an evaluation off the caller's thread: ./evaluate.ts runs in a worker
 * (./eval-worker.ts), so the app's main process and the CLI's Ctrl-C handler stay responsive
 * while ONNX Runtime scores.
 *
 *     const report = await startEvaluation(options, {
 *       onProgress: (p) => console.error(p.message),
 *       signal: abortController.signal, // stops between batches; the report keeps what was measured
 *     });
 *
 * Stop goes through a SharedArrayBuffer flag, which the worker reads between batches even
 * while its event loop is busy.
 */
import type { EvalReport } from '../../src-shared/eval-report.js';
import { reviveError, startWorker } from '../model/worker-host.js';
import type { ErrorPayload } from '../model/worker-serve.js';
import type { EvalOptions, EvalProgress } from './evaluate.js';

export interface EvalStartOptions {
  onProgress?: (progress: EvalProgress) => void;
  signal?: AbortSignal;
}

/** Messages from the worker. */
export type EvalWorkerMessage =
  | { type: 'progress'; progress: EvalProgress }
  | { type: 'done'; report: EvalReport }
  | { type: 'error'; error: ErrorPayload };

export async function startEvaluation(options: EvalOptions, { onProgress, signal }: EvalStartOptions = {}): Promise<EvalReport> {
  const stopFlag = new Int32Array(new SharedArrayBuffer(4));
  const worker = await startWorker(
    { compiled: new URL('./eval-worker.js', import.meta.url), source: new URL('./eval-worker.ts', import.meta.url) },
    { options, stopFlag },
  );
  const onAbort = () => Atomics.store(stopFlag, 0, 1);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort);
  try {
    return await new Promise<EvalReport>((resolve, reject) => {
      let settled = false;
      worker.on('message', (msg: EvalWorkerMessage) => {
        if (msg.type === 'progress') onProgress?.(msg.progress);
        else {
          settled = true;
          if (msg.type === 'done') resolve(msg.report);
          else reject(reviveError(msg.error));
        }
      });
      worker.on('error', (err) => {
        settled = true;
        reject(err);
      });
      worker.on('exit', (code) => {
        if (!settled) reject(new Error(`the evaluation worker exited unexpectedly (code ${code})`));
      });
    });
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await worker.terminate();
  }
}
