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
import { runStoppableJob, type StoppableJobMessage } from '../model/worker-host.js';
import type { EvalOptions, EvalProgress } from './evaluate.js';

export interface EvalStartOptions {
  onProgress?: (progress: EvalProgress) => void;
  signal?: AbortSignal;
}

/** Messages from the worker: progress events, then the report or an error. */
export type EvalWorkerMessage = StoppableJobMessage<EvalProgress, EvalReport>;

export function startEvaluation(options: EvalOptions, { onProgress, signal }: EvalStartOptions = {}): Promise<EvalReport> {
  const files = { compiled: new URL('./eval-worker.js', import.meta.url), source: new URL('./eval-worker.ts', import.meta.url) };
  return runStoppableJob<EvalProgress, EvalReport>(files, options, 'evaluation', { onEvent: onProgress, signal });
}
