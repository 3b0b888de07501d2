/**
 * The parent side of the app's ONNX Runtime worker threads (the model in ./local-model.ts,
 * the trainer, with its training step, in ../train/run-in-worker.ts): starting a
 * worker, its ready handshake, request/response calls, and errors brought back to life.
 * The worker side is ./worker-serve.ts.
 *
 * Start-up: from TypeScript sources a worker is started through worker-boot.mjs, which
 * registers tsx (vitest and tsx do not pass their loaders to workers reliably); a compiled
 * build has the worker's .js beside the module that starts it, and starts that directly.
 */
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import type { ErrorPayload } from './worker-serve.js';
import { CudaUnavailableError } from './cuda-errors.js';
import { removeWeightFilesAtExit } from './weight-file.js';

/**
 * A worker's two forms, as URLs made in the module that starts it
 * (`new URL('./model-worker.js', import.meta.url)`): the build puts the compiled one beside that module.
 */
export interface WorkerFiles {
  compiled: URL;
  source: URL;
}

/** An error from a worker, as an Error again: a UserError stays one (and keeps no stack), with its app wording. */
export function reviveError(e: ErrorPayload): Error {
  if (e.cuda) return new CudaUnavailableError(e.cuda);
  if (e.app !== undefined) return new SurfaceError(e.message, e.app);
  const err = e.name === 'UserError' ? new UserError(e.message) : new Error(e.message);
  if (e.name !== 'UserError' && e.stack) err.stack = e.stack;
  return err;
}

/**
 * Loads onnxruntime-node's native binding on this (long-lived) thread once, through the one
 * module that imports it (./ort-session.ts). The binding is not context-aware: if the first
 * thread that loaded it exits, later workers fail with "Module did not self-register".
 * Holding it here keeps it registered for every worker.
 */
let pinned: Promise<unknown> | undefined;
function pinNativeBinding(): Promise<unknown> {
  return (pinned ??= import('./ort-session.js'));
}

/** Starts the worker (its compiled file if the build has one, else its source through tsx). */
export async function startWorker(files: WorkerFiles, workerData: Record<string, unknown>): Promise<Worker> {
  await pinNativeBinding();
  removeWeightFilesAtExit(); // the worker's sessions share weight files that only this thread may remove (./weight-file.ts)
  if (fs.existsSync(fileURLToPath(files.compiled))) return new Worker(files.compiled, { workerData });
  const entry = pathToFileURL(fileURLToPath(files.source)).href;
  return new Worker(new URL('./worker-boot.mjs', import.meta.url), { workerData: { entry, ...workerData } });
}

/**
 * Waits for the worker's `{ ready }` or `{ fatal }` (events it posts before, as a weights file
 * written while it opens, are not that); a worker that fails to start is terminated and its
 * error thrown.
 */
export async function waitUntilReady<Ready>(worker: Worker): Promise<Ready> {
  try {
    return await new Promise<Ready>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      const onMessage = (msg: { ready?: Ready; fatal?: ErrorPayload }) => {
        if (!msg.ready && !msg.fatal) return;
        worker.off('message', onMessage);
        worker.off('error', onError);
        if (msg.ready) resolve(msg.ready);
        else reject(reviveError(msg.fatal!));
      };
      worker.on('message', onMessage);
      worker.once('error', onError);
    });
  } catch (err) {
    await worker.terminate();
    throw err;
  }
}

/** A message a worker posts while a request runs (e.g. a generated token). */
export type WorkerEvent = { id: number; event: string } & Record<string, unknown>;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  onEvent?: (msg: WorkerEvent) => void;
}

/** Names used in the errors a WorkerClient raises, e.g. 'the model is closed'. */
export interface WorkerNames {
  /** 'the model': closed calls fail with "<subject> is closed". */
  subject: string;
  /** 'the model worker': an unexpected exit fails pending calls with "<worker> exited unexpectedly". */
  worker: string;
}

/** Request/response calls to a started worker; every pending call fails if the worker dies. */
export class WorkerClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  constructor(
    private readonly worker: Worker,
    private readonly names: WorkerNames,
    /** Events the worker posts outside any request (the model worker's `convert`). */
    onNotice?: (msg: { event: string } & Record<string, unknown>) => void,
  ) {
    worker.on('message', (msg: { id?: number; result?: unknown; error?: ErrorPayload; event?: string }) => {
      if (msg.id === undefined && msg.event) return onNotice?.(msg as { event: string });
      const p = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
      if (!p) return;
      if (msg.event) return p.onEvent?.(msg as WorkerEvent);
      this.pending.delete(msg.id!);
      if (msg.error) p.reject(reviveError(msg.error));
      else p.resolve(msg.result);
    });
    worker.on('error', (err) => this.failAll(err));
    worker.on('exit', (code) => {
      if (!this.closed) this.failAll(new Error(`${names.worker} exited unexpectedly (code ${code})`));
    });
  }

  call<T>(method: string, args: unknown[], onEvent?: (msg: WorkerEvent) => void): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`${this.names.subject} is closed`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      this.worker.postMessage({ id, method, args });
    });
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** Asks the worker to close its engine, then ends the thread (either way). */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.call('close', []);
    } catch {
      // closing anyway
    }
    this.closed = true;
    await this.worker.terminate();
  }
}

/** What a stoppable job's worker posts: events while it runs, then `done` or `error`. */
export type StoppableJobMessage<Event, Result> =
  | { type: 'event'; event: Event }
  | { type: 'done'; result: Result }
  | { type: 'error'; error: ErrorPayload };

/**
 * Runs one long job (a training run, an evaluation) in its own worker thread and resolves with
 * its result. The worker gets `{ options, stopFlag }` as workerData. Stopping goes through the
 * SharedArrayBuffer flag rather than a message, so the job sees it between two units of work
 * even while its event loop is busy inside ONNX Runtime calls. `what` names the worker in the
 * error for an unexpected exit.
 */
export async function runStoppableJob<Event, Result>(
  files: WorkerFiles,
  options: unknown,
  what: string,
  { onEvent, signal }: { onEvent?: (event: Event) => void; signal?: AbortSignal } = {},
): Promise<Result> {
  const stopFlag = new Int32Array(new SharedArrayBuffer(4));
  const worker = await startWorker(files, { options, stopFlag });
  const onAbort = () => Atomics.store(stopFlag, 0, 1);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort);
  try {
    return await new Promise<Result>((resolve, reject) => {
      let settled = false;
      worker.on('message', (msg: StoppableJobMessage<Event, Result>) => {
        if (msg.type === 'event') return onEvent?.(msg.event);
        settled = true;
        if (msg.type === 'done') resolve(msg.result);
        else reject(reviveError(msg.error));
      });
      worker.on('error', (err) => {
        settled = true;
        reject(err);
      });
      worker.on('exit', (code) => {
        if (!settled) reject(new Error(`the ${what} worker exited unexpectedly (code ${code})`));
      });
    });
  } finally {
    signal?.removeEventListener('abort', onAbort);
    await worker.terminate();
  }
}
