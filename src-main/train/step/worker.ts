/**
 * The training-step worker thread: owns a TrainStepEngine (and so ONNX Runtime, which blocks
 * the thread that calls it) and answers WorkerTrainStep's requests (./index.ts).
 * Protocol, all structured-clone messages:
 *   start        workerData { model: dir, options: TrainStepOptions }; the worker posts
 *                { ready: { specs, executionProvider, placement } } or { fatal: error }
 *   parent → worker  { id, method: 'policyLogprobs' | 'baseLogprobs' | 'step' | 'gradients' | 'close', args }
 *   worker → parent  { id, result } | { id, error: { name, message, stack } }
 */
import { parentPort, workerData } from 'node:worker_threads';
import { TrainStepEngine, type TrainStepOptions } from './engine.js';

interface Request {
  id: number;
  method: string;
  args: unknown[];
}

function errorPayload(err: unknown) {
  const e = err as Error;
  return { name: e?.name ?? 'Error', message: e?.message ?? String(err), stack: e?.stack };
}

const port = parentPort!;
const { model, options } = workerData as { model: string; options: TrainStepOptions };

let engine: TrainStepEngine | undefined;
try {
  engine = await TrainStepEngine.create(model, options);
  port.postMessage({ ready: { specs: engine.specs, executionProvider: engine.executionProvider, placement: engine.placement } });
} catch (err) {
  port.postMessage({ fatal: errorPayload(err) });
}

// One request at a time, in order: a session is not re-entrant, and results come back in call order.
let queue: Promise<void> = Promise.resolve();
port.on('message', (req: Request) => {
  queue = queue.then(() => handle(req));
});

async function handle({ id, method, args }: Request): Promise<void> {
  try {
    const e = engine!;
    let result: unknown;
    switch (method) {
      case 'policyLogprobs': result = await e.policyLogprobs(args[0] as never, args[1] as never); break;
      case 'baseLogprobs': result = await e.baseLogprobs(args[0] as never); break;
      case 'gradients': result = await e.gradients(args[0] as never, args[1] as never); break;
      case 'step': result = await e.step(args[0] as never, args[1] as never, args[2] as never); break;
      case 'close': await e.close(); result = true; break;
      default: throw new Error(`unknown method ${method}`);
    }
    port.postMessage({ id, result });
  } catch (err) {
    port.postMessage({ id, error: errorPayload(err) });
  }
}
