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
import { errorPayload, serveRequests, type Request } from '../../model/worker-serve.js';
import { TrainStepEngine, type TrainStepOptions } from './engine.js';

const port = parentPort!;
const { model, options } = workerData as { model: string; options: TrainStepOptions };

let engine: TrainStepEngine | undefined;
try {
  engine = await TrainStepEngine.create(model, options);
  port.postMessage({ ready: { specs: engine.specs, executionProvider: engine.executionProvider, placement: engine.placement } });
} catch (err) {
  port.postMessage({ fatal: errorPayload(err) });
}

serveRequests(port, handle);

async function handle({ method, args }: Request): Promise<unknown> {
  const e = engine!;
  switch (method) {
    case 'policyLogprobs': return e.policyLogprobs(args[0] as never, args[1] as never);
    case 'baseLogprobs': return e.baseLogprobs(args[0] as never);
    case 'gradients': return e.gradients(args[0] as never, args[1] as never);
    case 'step': return e.step(args[0] as never, args[1] as never, args[2] as never);
    case 'close': await e.close(); return true;
    default: throw new Error(`unknown method ${method}`);
  }
}
