/**
 * The model worker thread: owns a ModelEngine (and so ONNX Runtime, which blocks the thread
 * that calls it) and answers LocalModel's requests. Protocol, all structured-clone messages:
 *   parent → worker  { id, method: 'score' | 'scoreIncremental' | 'generate' | 'prepare' | 'close', args }
 *   worker → parent  { id, result } | { id, error: { name, message } } | { id, event: 'token', token, logprob }
 * The engine itself is opened from workerData before any request: { dir, options }, and the
 * worker posts { ready: summary } or { fatal: error }.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ModelEngine, type EngineOptions } from './engine.js';

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
const { dir, options } = workerData as { dir: string; options: EngineOptions };

let engine: ModelEngine;
try {
  engine = ModelEngine.open(dir, options);
  port.postMessage({
    ready: {
      config: engine.config,
      chatTemplateSource: engine.tokenizer.chatTemplateSource,
      eosTokenIds: engine.tokenizer.eosTokenIds,
    },
  });
} catch (err) {
  port.postMessage({ fatal: errorPayload(err) });
}

// Requests run one at a time, in order: ONNX Runtime sessions are not re-entrant here and
// the caller's promises resolve in the order they were made.
let queue: Promise<void> = Promise.resolve();

port.on('message', (req: Request) => {
  queue = queue.then(() => handle(req));
});

async function handle({ id, method, args }: Request): Promise<void> {
  try {
    let result: unknown;
    switch (method) {
      case 'prepare':
        await engine.prepare(args[0] as ('score' | 'generate')[]);
        result = engine.executionProvider;
        break;
      case 'score':
        result = { logprobs: await engine.score(args[0] as never, args[1] as never), executionProvider: engine.executionProvider };
        break;
      case 'scoreIncremental':
        result = await engine.scoreIncremental(args[0] as never, args[1] as never);
        break;
      case 'generate': {
        const stream = args[2] === true;
        const out = await engine.generate(args[0] as never, args[1] as never, stream ? (token, logprob) => port.postMessage({ id, event: 'token', token, logprob }) : undefined);
        result = { ...out, executionProvider: engine.executionProvider };
        break;
      }
      case 'close':
        await engine.close();
        result = true;
        break;
      default:
        throw new Error(`unknown method ${method}`);
    }
    port.postMessage({ id, result });
  } catch (err) {
    port.postMessage({ id, error: errorPayload(err) });
  }
}
