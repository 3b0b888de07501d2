// Log-probs and greedy tokens from real llama.cpp (node-llama-cpp's prebuilt CPU binary), in a
// process of its own so a native crash cannot take the test worker with it
// (test/interop/llama-cpp-export.test.ts starts it). Plain JavaScript: node-llama-cpp lives in
// .cache/llama-cpp/, outside the project's dependencies.
//
// usage: node llama-cpp-logprobs.mjs REQUEST_JSON  → one JSON line on stdout
// REQUEST: { module, model, lora?, rows: [{ ids, start }], prompt: [ids], greedy: n } (or { module, probe: true })
// OUTPUT:  { logprobs: [[…] per row: log p(ids[i] | ids[<i]) for i ≥ start], greedy: [ids] }
import { pathToFileURL } from 'node:url';

const request = JSON.parse(process.argv[2]);
const { getLlama } = await import(pathToFileURL(request.module).href);
const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, logLevel: 'error', maxThreads: 2 });
if (request.probe) {
  // { module, probe: true }: the binary loads; nothing else
  console.log(JSON.stringify({ loaded: true }));
  await llama.dispose();
  process.exit(0);
}
const model = await llama.loadModel({ modelPath: request.model, gpuLayers: 0, useMmap: true });
const context = await model.createContext({
  contextSize: 256, batchSize: 256, threads: 2, sequences: 1, flashAttention: false,
  // fp32 K/V (llama.cpp's default is F16), so the cache adds no rounding Hindsight's has not
  experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  ...(request.lora ? { lora: { adapters: [{ filePath: request.lora, scale: 1 }] } } : {}),
});
const sequence = context.getSequence();

/** log-softmax at `token` from its raw logit, the largest logit and Σ exp(logit − max) (no full-vocabulary map). */
function logprobOf(next, token) {
  const max = Math.max(...next.logits.values()); // includeTop: 1 puts the largest logit in the map
  return next.logits.get(token) - max - Math.log(next.totalLogitWeight);
}

const logprobs = [];
for (const row of request.rows) {
  await sequence.clearHistory();
  const input = row.ids.map((id, i) => (i >= row.start - 1 && i < row.ids.length - 1
    ? [id, { generateNext: { logits: { filter: { tokens: [row.ids[i + 1]], includeTop: 1 } }, totalLogitWeight: true } }]
    : id));
  const out = await sequence.controlledEvaluate(input);
  const lp = [];
  for (let i = row.start; i < row.ids.length; i++) lp.push(logprobOf(out[i - 1].next, row.ids[i]));
  logprobs.push(lp);
}

await sequence.clearHistory();
const greedy = [];
for await (const token of sequence.evaluate(request.prompt, { temperature: 0 })) {
  greedy.push(token);
  if (greedy.length >= request.greedy) break;
}
console.log(JSON.stringify({ logprobs, greedy }));
await context.dispose();
await model.dispose();
await llama.dispose();
