/**
 * The trainer's worker thread (started by ./trainer-thread.ts): runs `train` with the options from
 * workerData and posts events, then `done` or `error`. Structured-clone messages only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { train, type TrainerOptions } from './trainer.js';
import type { WorkerMessage } from './trainer-thread.js';
import { userFacingPayload } from '../model/worker-serve.js';

const port = parentPort!;
const { options, stopFlag } = workerData as { options: TrainerOptions; stopFlag: Int32Array };
const post = (msg: WorkerMessage) => port.postMessage(msg);

try {
  const result = await train(options, {
    onEvent: (event) => post({ type: 'event', event }),
    shouldStop: () => Atomics.load(stopFlag, 0) === 1,
  });
  post({ type: 'done', result });
} catch (err) {
  post({ type: 'error', error: userFacingPayload(err) });
}
