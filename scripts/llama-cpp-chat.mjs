// One chat turn through real llama.cpp (node-llama-cpp in .cache/llama-cpp/, see
// bench/llama-cpp.ts) with a GGUF LoRA adapter: what scripts/smollm2-loop.sh ends with.
// usage: node scripts/llama-cpp-chat.mjs MODEL.gguf ADAPTER.gguf "question"
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [model, lora, question] = process.argv.slice(2);
const entry = path.resolve('.cache/llama-cpp/node_modules/node-llama-cpp/dist/index.js');
const { getLlama, LlamaChatSession } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, logLevel: 'error' });
const m = await llama.loadModel({ modelPath: model, gpuLayers: 0 });
const context = await m.createContext({ contextSize: 512, lora: { adapters: [{ filePath: lora, scale: 1 }] } });
const session = new LlamaChatSession({ contextSequence: context.getSequence() });
const answer = await session.prompt(question, { temperature: 0, maxTokens: 48 });
console.log(JSON.stringify({ question, answer, lora: path.basename(lora) }));
await context.dispose();
await m.dispose();
await llama.dispose();
