/**
 * `npm run bench:generate` — generation throughput (docs/design.md §Quantisation, §Batched
 * generation), side by side in one run, on random Llama-shaped models written by the bench:
 *
 * 1. Decode speed for --quantize none / int8 / int4: greedy, 128 new tokens after a 32-token
 *    prompt, KV cache. Also the load time (graphs + session, quantisation included), and each
 *    choice's log-prob drift from fp32 on the fixed text (what `score` reports).
 * 2. The local judge's shape: 3 votes of 128 tokens on one prompt (600 tokens, or what the
 *    model's positions leave: 383 on the 512-position 125M model), sampled at temperature 0.6
 *    with 3 seeds — one batched call against 3 sequential ones (fp32 and int4).
 * 3. A chat's next turn: a conversation of 2,000 tokens (or what the positions leave: 240 on the
 *    125M model), its reply, then 16 tokens more, answered with the last reply's cache
 *    continued (`reusePrefix`, as the chat endpoint does) and prefilled whole.
 *
 * Every figure is the median of BENCH_REPEATS runs (default 3), with the process's CPU seconds
 * (all threads: the model worker and ONNX Runtime's pool) beside the wall seconds.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_REPEATS (3), BENCH_NEW_TOKENS (128),
 * BENCH_PARTS (decode,judge,chat),
 * BENCH_SHAPES (comma list of 125m, 0.6b, 1.5b; default 125m: the larger ones need 2.4 / 6.2 GB
 * of fp32 weights on disk, and minutes per run; bench/real-shapes.ts measures them against
 * PyTorch and llama.cpp).
 * Models go to bench/output/ (git-ignored) and are reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalModel } from '../src-main/model/local-model.js';
import type { Quantize } from '../src-main/model/quantize.js';
import { seededRandom, writeTinyModel } from '../tools/tiny-models.js';
import { ensureRandomModel, LLAMA_125M } from './random-model.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const NEW_TOKENS = Number(process.env.BENCH_NEW_TOKENS ?? 128);
const SHAPES = (process.env.BENCH_SHAPES ?? '125m').split(',').map((s) => s.trim());
const PARTS = new Set((process.env.BENCH_PARTS ?? 'decode,judge,chat').split(',').map((s) => s.trim()));

const MODELS: Record<string, { label: string; write: (dir: string) => void }> = {
  '125m': {
    label: 'random Llama 125M (hidden 768, 12 layers, 12 / 4 heads, vocab 32000)',
    write: (dir) => writeTinyModel(dir, LLAMA_125M),
  },
  // The real shapes are written tensor by tensor, with the real tokenizers (bench/random-model.ts).
  '0.6b': {
    label: 'random Qwen3-0.6B shape (28 layers, hidden 1024, 16 / 8 heads, head_dim 128, vocab 151936, tied)',
    write: (dir) => ensureRandomModel(dir, 'qwen3-0.6b', 8),
  },
  '1.5b': {
    label: 'random Qwen2.5-1.5B shape (28 layers, hidden 1536, 12 / 2 heads, vocab 151936, tied)',
    write: (dir) => ensureRandomModel(dir, 'qwen2.5-1.5b', 9),
  },
};

interface Timed {
  wall: number;
  cpu: number;
}

/** Median wall seconds of `repeats` runs, with the CPU seconds of that same run. */
async function timeMedian(repeats: number, work: () => Promise<unknown>): Promise<Timed> {
  const runs: Timed[] = [];
  for (let i = 0; i < repeats; i++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await work();
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    runs.push({ wall, cpu: (cpu.user + cpu.system) / 1e6 });
  }
  runs.sort((a, b) => a.wall - b.wall);
  return runs[Math.floor(runs.length / 2)]!;
}

const f = (x: number, d = 1) => x.toFixed(d);
const secs = (t: Timed) => `${f(t.wall, 2)} s wall / ${f(t.cpu, 2)} s CPU`;

function ensureModel(key: string): string {
  const dir = path.join(OUT, { '125m': 'llama-125m', '0.6b': 'qwen3-0.6b', '1.5b': 'qwen2.5-1.5b' }[key]!);
  if (!fs.existsSync(path.join(dir, 'model.safetensors')) && !fs.existsSync(path.join(dir, 'model.safetensors.index.json'))) {
    const t = Date.now();
    MODELS[key]!.write(dir);
    console.log(`wrote ${dir} in ${f((Date.now() - t) / 1000)} s`);
  }
  return dir;
}

async function decodeSpeeds(dir: string, prompt: number[]): Promise<void> {
  console.log(`\n### Decode: greedy, ${NEW_TOKENS} new tokens after ${prompt.length} prompt tokens, KV cache`);
  console.log('| --quantize | load + graphs | generate (median) | tokens/s | × fp32 | drift from fp32 (max / mean nats) |');
  console.log('|---|---|---|---|---|---|');
  let fp32Rate = 0;
  for (const quantize of ['none', 'int8', 'int4'] as Quantize[]) {
    const t0 = performance.now();
    const model = await LocalModel.load(dir, { threads: THREADS, quantize, prepare: ['generate'] });
    const load = (performance.now() - t0) / 1000;
    try {
      await model.generate(prompt, { maxNewTokens: 4, stopTokenIds: [] });
      const run = await timeMedian(REPEATS, () => model.generate(prompt, { maxNewTokens: NEW_TOKENS, stopTokenIds: [] }));
      const rate = NEW_TOKENS / run.wall;
      if (quantize === 'none') fp32Rate = rate;
      const drift = await model.quantizationDrift();
      const driftText = drift ? `${f(drift.maxAbs, 4)} / ${f(drift.meanAbs, 4)} (${drift.tokens} tokens)` : '—';
      console.log(`| ${quantize} | ${f(load, 2)} s | ${secs(run)} | ${f(rate)} | ×${f(rate / fp32Rate, 2)} | ${driftText} |`);
    } finally {
      await model.close();
    }
  }
}

/**
 * A chat's next turn (src-main/openai/local-chat.ts): a conversation of `length` tokens and the
 * reply to it, then the same conversation with that reply and 16 tokens of a new message,
 * answered with NEW_TOKENS greedy tokens; the next turn timed with the last reply's cache
 * continued (`reusePrefix`, what the chat endpoint does) and prefilled whole.
 */
async function chatTurn(dir: string, length: number): Promise<void> {
  const model = await LocalModel.load(dir, { threads: THREADS, prepare: ['generate'] });
  try {
    const rand = seededRandom(7);
    const conversation = Array.from({ length }, () => 3 + Math.floor(rand() * (model.config.vocabSize - 10)));
    const request = { maxNewTokens: NEW_TOKENS, stopTokenIds: [] };
    const reply = await model.generate(conversation, request);
    const next = [...conversation, ...reply.tokens, ...Array.from({ length: 16 }, (_, i) => 100 + i)];
    const answers = new Set<string>();
    for (const reusePrefix of [true, false]) {
      const runs: Timed[] = [];
      for (let i = 0; i < REPEATS; i++) {
        // The first turn again, untimed, so that the engine holds its reply's cache; then the next turn, timed.
        await model.generate(conversation, { ...request, reusePrefix });
        const cpu0 = process.cpuUsage(), t0 = performance.now();
        answers.add((await model.generate(next, { ...request, reusePrefix })).tokens.join());
        const cpu = process.cpuUsage(cpu0);
        runs.push({ wall: (performance.now() - t0) / 1000, cpu: (cpu.user + cpu.system) / 1e6 });
      }
      runs.sort((a, b) => a.wall - b.wall);
      console.log(`| ${reusePrefix ? 'continued (reusePrefix)' : 'prefilled whole'} | ${next.length} tokens | ${secs(runs[Math.floor(runs.length / 2)]!)} |`);
    }
    console.log(`same tokens: ${answers.size === 1 ? 'yes' : 'NO'}`);
  } finally {
    await model.close();
  }
}

/** The judge's prompt length: 600 tokens, or what the model's positions leave beside the votes. */
const judgePromptLength = (maxPositions: number) => Math.min(600, maxPositions - NEW_TOKENS - 1);

async function judgeVotes(dir: string, quantize: Quantize): Promise<void> {
  const model = await LocalModel.load(dir, { threads: THREADS, quantize, prepare: ['generate'] });
  try {
    const rand = seededRandom(5);
    const prompt = Array.from({ length: judgePromptLength(model.maxPositions) }, () => 3 + Math.floor(rand() * (model.config.vocabSize - 10)));
    const seeds = [101, 102, 103];
    const request = { temperature: 0.6, maxNewTokens: NEW_TOKENS, stopTokenIds: [] };
    await model.generate(prompt.slice(0, 16), { maxNewTokens: 2, stopTokenIds: [] });
    let batchedTokens: number[][] = [];
    const batched = await timeMedian(REPEATS, async () => {
      const [outs] = await model.generateBatch([{ prompt, seeds }], request);
      batchedTokens = outs!.map((o) => o.tokens);
    });
    let sequentialTokens: number[][] = [];
    const sequential = await timeMedian(REPEATS, async () => {
      sequentialTokens = [];
      for (const seed of seeds) sequentialTokens.push((await model.generate(prompt, { ...request, seed })).tokens);
    });
    const same = batchedTokens.every((t, i) => t.join() === sequentialTokens[i]!.join());
    console.log(`| ${quantize} | ${secs(sequential)} | ${secs(batched)} | ×${f(sequential.wall / batched.wall, 2)} | ${same ? 'yes' : 'NO'} |`);
  } finally {
    await model.close();
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  console.log(`# bench:generate — ${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, ${THREADS} threads, ` +
    `${f(os.totalmem() / 1024 ** 3)} GB, load average at start ${os.loadavg().map((x) => f(x)).join(' ')}; medians of ${REPEATS}`);
  for (const key of SHAPES) {
    if (!MODELS[key]) throw new Error(`BENCH_SHAPES: unknown shape '${key}' (125m, 0.6b, 1.5b)`);
    console.log(`\n## ${MODELS[key]!.label}`);
    const dir = ensureModel(key);
    const rand = seededRandom(11);
    const prompt = Array.from({ length: 32 }, () => 3 + Math.floor(rand() * 30000));
    if (PARTS.has('decode')) await decodeSpeeds(dir, prompt);
    const positions = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).max_position_embeddings as number;
    if (PARTS.has('judge')) {
      console.log(`\n### Judge: 3 votes × ${NEW_TOKENS} tokens on one ${judgePromptLength(positions)}-token prompt (t = 0.6, 3 seeds)`);
      console.log('| --quantize | 3 sequential | 1 batch of 3 | speed-up | same tokens |');
      console.log('|---|---|---|---|---|');
      for (const q of ['none', 'int4'] as Quantize[]) await judgeVotes(dir, q);
    }
    if (!PARTS.has('chat')) continue;
    const conversation = Math.min(2000, positions - 2 * NEW_TOKENS - 16);
    console.log(`\n### Chat: the next turn of a ${conversation}-token conversation, ${NEW_TOKENS} new tokens (greedy)`);
    console.log('| the last reply\'s cache | prompt | next turn (median) |');
    console.log('|---|---|---|');
    await chatTurn(dir, conversation);
  }
  console.log(`\nload average at end ${os.loadavg().map((x) => f(x)).join(' ')}`);
}

await main();
