/**
 * The evaluation's worker thread (started by ./run-in-worker.ts): runs `evaluate` with the
 * options from workerData, posts progress, then `done` with the report or `error`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorPayload } from '../model/worker-serve.js';
import { evaluate, type EvalOptions } from './evaluate.js';
import type { EvalWorkerMessage } from './run-in-worker.js';

const port = parentPort!;
const { options, stopFlag } = workerData as { options: EvalOptions; stopFlag: Int32Array };
const post = (msg: EvalWorkerMessage) => port.postMessage(msg);

try {
  const report = await evaluate(options, {
    onProgress: (progress) => post({ type: 'event', event: progress }),
    shouldStop: () => Atomics.load(stopFlag, 0) === 1,
  });
  post({ type: 'done', result: report });
} catch (err) {
  post({ type: 'error', error: errorPayload(err) });
}
