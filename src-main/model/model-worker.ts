/**
 * The model worker thread: owns a ModelEngine (and so ONNX Runtime, which blocks the thread
 * that calls it) and answers LocalModel's requests. Protocol, all structured-clone messages:
 *   parent → worker  { id, method: 'score' | 'scoreIncremental' | 'generate' | 'generateBatch' | 'quantizationDrift' | 'prepare' | 'setLora' | 'close', args }
 *   worker → parent  { id, result } | { id, error: { name, message } } | { id, event: 'token', token, logprob }
 *                    | { event: 'convert', done, total }: a weights file being written (a model's first
 *                      load converts its weights: ./weight-file.ts), outside any one request
 * The engine itself is opened from workerData before any request: { dir, options }, and the
 * worker posts { ready: summary } or { fatal: error }.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ModelEngine, type EngineOptions } from './inference-engine.js';
import { reportWeightsProgress } from './weight-file.js';
import { errorPayload, serveRequests, type Request } from './worker-serve.js';

const port = parentPort!;
const { dir, options } = workerData as { dir: string; options: EngineOptions };
reportWeightsProgress((done, total) => port.postMessage({ event: 'convert', done, total }));

let engine: ModelEngine;
try {
  engine = ModelEngine.open(dir, options);
  port.postMessage({ ready: { config: engine.config } });
} catch (err) {
  port.postMessage({ fatal: errorPayload(err) });
}

serveRequests(port, handle);

async function handle({ id, method, args }: Request): Promise<unknown> {
  switch (method) {
    case 'prepare':
      await engine.prepare(args[0] as ('score' | 'generate')[]);
      return engine.executionProvider;
    case 'score':
      return { logprobs: await engine.score(args[0] as never, args[1] as never), executionProvider: engine.executionProvider };
    case 'scoreIncremental':
      return engine.scoreIncremental(args[0] as never, args[1] as never);
    case 'generate': {
      const stream = args[2] === true;
      const out = await engine.generate(args[0] as never, args[1] as never, stream ? (token, logprob) => port.postMessage({ id, event: 'token', token, logprob }) : undefined);
      return { ...out, executionProvider: engine.executionProvider };
    }
    case 'generateBatch': {
      const stream = args[2] === true;
      const onToken = stream ? (sequence: number, token: number, logprob: number) => port.postMessage({ id, event: 'token', sequence, token, logprob }) : undefined;
      return { outputs: await engine.generateBatch(args[0] as never, args[1] as never, onToken), executionProvider: engine.executionProvider };
    }
    case 'setLora':
      engine.setLora(args[0] as never);
      return true;
    case 'quantizationDrift':
      return engine.quantizationDrift(args[0] as never);
    case 'close':
      await engine.close();
      return true;
    default:
      throw new Error(`unknown method ${method}`);
  }
}
