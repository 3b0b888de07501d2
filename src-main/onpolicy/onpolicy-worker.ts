/**
 * The on-policy trainer's worker thread (started by ./onpolicy-thread.ts): runs `trainOnPolicy`
 * with the options from workerData and posts events, then `done` or `error`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { userFacingPayload } from '../model/worker-serve.js';
import type { OnPolicyTrainerOptions } from './options.js';
import { trainOnPolicy } from './onpolicy-trainer.js';
import type { OnPolicyWorkerMessage } from './onpolicy-thread.js';

const port = parentPort!;
const { options, stopFlag } = workerData as { options: OnPolicyTrainerOptions; stopFlag: Int32Array };
const post = (msg: OnPolicyWorkerMessage) => port.postMessage(msg);

try {
  const result = await trainOnPolicy(options, {
    onEvent: (event) => post({ type: 'event', event }),
    shouldStop: () => Atomics.load(stopFlag, 0) === 1,
  });
  post({ type: 'done', result });
} catch (err) {
  post({ type: 'error', error: userFacingPayload(err) });
}
