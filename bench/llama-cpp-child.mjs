// One llama.cpp measurement in a process of its own (bench/llama-cpp.ts starts it), so the
// load time is a new process's and the peak RSS is llama.cpp's alone. Plain JavaScript run by
// node: node-llama-cpp is installed on demand outside the project, and this process should
// pay no TypeScript loader.
//
// usage: node bench/llama-cpp-child.mjs REQUEST_JSON  → one JSON line on stdout
// REQUEST: { module, model, threads, contextSize, prompt: [ids], newTokens, repeats }
import { pathToFileURL } from 'node:url';

const request = JSON.parse(process.argv[2]);
const started = performance.now(); // ms since this process started
const { getLlama } = await import(pathToFileURL(request.module).href);
const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, logLevel: 'error', maxThreads: request.threads });
const model = await llama.loadModel({ modelPath: request.model, gpuLayers: 0, useMmap: true });
const context = await model.createContext({ contextSize: request.contextSize, batchSize: 512, threads: request.threads, sequences: 1, flashAttention: false });
const sequence = context.getSequence();
const loaded = performance.now();

/** Greedy tokens after the prompt: wall ms to the first and to the last, CPU seconds. */
async function generate(count) {
  const tokens = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let firstMs = 0;
  for await (const token of sequence.evaluate(request.prompt, { temperature: 0 })) {
    if (tokens.length === 0) firstMs = performance.now() - t0;
    tokens.push(token);
    if (tokens.length >= count) break;
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await sequence.clearHistory();
  return { tokens, firstMs, wallS: wallMs / 1000, cpuS: (cpu.user + cpu.system) / 1e6 };
}

const first = await generate(1);
const firstTokenAt = loaded + first.firstMs;
const runs = [];
for (let i = 0; i < request.repeats; i++) runs.push(await generate(request.newTokens));
console.log(JSON.stringify({
  importAndLoadMs: loaded - started,
  firstTokenMs: first.firstMs,
  processStartToFirstTokenMs: firstTokenAt,
  runs,
  peakRssMb: process.resourceUsage().maxRSS / 1024,
  threads: context.currentThreads,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
