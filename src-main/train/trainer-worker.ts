/**
 * The trainer's worker thread (started by ./trainer-thread.ts): runs `train` with the options from
 * workerData and posts events, then `done` or `error`. Structured-clone messages only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { train, type TrainerOptions } from './trainer.js';
import type { WorkerMessage } from './trainer-thread.js';
import { errorPayload } from '../model/worker-serve.js';

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
  post({ type: 'error', error: asUserFacing(err) });
}

/**
 * A failed file operation (no space, no permission, a path that is a file) is the user's
 * situation, not a bug: it travels as a UserError, so it is reported in one line with no
 * stack trace. Node's message names the operation and the path.
 */
function asUserFacing(err: unknown): ReturnType<typeof errorPayload> {
  const payload = errorPayload(err);
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code === 'string' && typeof e.syscall === 'string') return { ...payload, name: 'UserError', stack: undefined };
  return payload;
}
