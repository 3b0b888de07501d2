/**
 * The worker-thread side of the app's ONNX Runtime workers (./model-worker.ts for the model,
 * ../train/trainer-worker.ts for the trainer and its training step).
 * The parent side is ./worker-host.ts. Protocol, all structured-clone messages:
 *   parent → worker  { id, method, args }
 *   worker → parent  { id, result } | { id, error: ErrorPayload } | { id, event, … }
 * Errors travel as plain objects (a structured clone drops an Error's class); the parent
 * turns them back into Errors, a UserError staying a UserError (a CudaUnavailableError
 * keeping its problem, and any other SurfaceError its app wording, so the app can word it
 * for its own page).
 */
import type { MessagePort } from 'node:worker_threads';
import { SurfaceError } from '../../src-shared/types.js';
import { CudaUnavailableError, type CudaProblem } from './cuda-errors.js';

export interface ErrorPayload {
  name: string;
  message: string;
  stack?: string;
  cuda?: CudaProblem;
  /** A SurfaceError's wording for the app (the message is the command line's). */
  app?: string;
}

export interface Request {
  id: number;
  method: string;
  args: unknown[];
}

/** Anything thrown, as a message can carry it. */
export function errorPayload(err: unknown): ErrorPayload {
  const e = err as Error;
  const payload: ErrorPayload = { name: e?.name ?? 'Error', message: e?.message ?? String(err), stack: e?.stack };
  if (err instanceof CudaUnavailableError) payload.cuda = err.problem;
  else if (err instanceof SurfaceError) payload.app = err.forApp();
  return payload;
}

/**
 * {@link errorPayload}, except that a failed file operation (no space, no permission, a path
 * that is a file) is the user's situation, not a bug: it travels as a UserError, reported in
 * one line with no stack trace. Node's message names the operation and the path. For the
 * long jobs (training) whose files are the user's.
 */
export function userFacingPayload(err: unknown): ErrorPayload {
  const payload = errorPayload(err);
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code === 'string' && typeof e.syscall === 'string') return { ...payload, name: 'UserError', stack: undefined };
  return payload;
}

/**
 * Answers the parent's requests with `handle`'s result or error. Requests run one at a time,
 * in order: ONNX Runtime sessions are not re-entrant here, and the caller's promises resolve
 * in the order they were made.
 */
export function serveRequests(port: MessagePort, handle: (request: Request) => Promise<unknown>): void {
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (request: Request) => {
    queue = queue.then(async () => {
      try {
        port.postMessage({ id: request.id, result: await handle(request) });
      } catch (err) {
        port.postMessage({ id: request.id, error: errorPayload(err) });
      }
    });
  });
}
