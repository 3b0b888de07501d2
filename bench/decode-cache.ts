/**
 * `npm run bench:decode-cache`: a long chat's decode cache in fp32 and in fp16 (docs/design.md
 * §Memory for inference, src-main/model/kv-cache.ts), and the prefill in smaller pieces that long
 * chats now take (src-shared/train-memory.ts prefillPieceAt), side by side in one run.
 *
 * A random Qwen3 with the 0.6B shape's cache layout (28 layers, 8 KV heads of 128: 224 KiB a
 * token in fp32) and small else (hidden 256, 16 heads, MLP 512), so that the cache is most of what
 * a step reads, as at a 7–8B model's long chats. Each variant in its own process, alternating
 * over BENCH_REPEATS rounds (default 2): a prompt of BENCH_PROMPT tokens (default 4,096), then
 * BENCH_NEW_TOKENS greedy tokens (32). Per variant: the prompt to its first token, the decode
 * speed after it, wall and CPU seconds, and the peak RSS above the loaded engine; the fp16 cache's
 * log-probs against fp32's over the tokens both chose.
 *   fp32        the cache in fp32, pieces of 512 (the default below 8,192 keys at 16 heads)
 *   fp16        the cache in fp16
 *   fp32-p128   fp32 in pieces of 128: what a piece shrunk for a long chat costs
 * Options (env): BENCH_THREADS (all cores), BENCH_REPEATS, BENCH_PROMPT, BENCH_NEW_TOKENS,
 * BENCH_VARIANTS (fp32,fp16,fp32-p128).
 */
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { parseLast, runWatched } from './watched-process.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const PROMPT = Number(process.env.BENCH_PROMPT ?? 4096);
const NEW_TOKENS = Number(process.env.BENCH_NEW_TOKENS ?? 32);
const VARIANTS = (process.env.BENCH_VARIANTS ?? 'fp32,fp16,fp32-p128').split(',').map((s) => s.trim());

interface Variant {
  cachePrecision: 'fp32' | 'fp16';
  prefillPiece?: number;
}
const VARIANT: Record<string, Variant> = {
  fp32: { cachePrecision: 'fp32' },
  fp16: { cachePrecision: 'fp16' },
  'fp32-p128': { cachePrecision: 'fp32', prefillPiece: 128 },
};

interface Measured {
  firstTokenS: number;
  firstTokenCpuS: number;
  tokensPerS: number;
  decodeCpuS: number;
  peakAboveLoadMb: number;
  tokens: number[];
  logprobs: number[];
}

const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const rssMb = () => process.memoryUsage().rss / 2 ** 20;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

function modelDir(): string {
  const dir = path.join(OUT, 'decode-cache-qwen3');
  if (!fs.existsSync(path.join(dir, 'config.json'))) {
    writeTinyModel(dir, { family: 'qwen3', hiddenSize: 256, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, intermediateSize: 512, maxPositions: 32768, seed: 7 });
  }
  return dir;
}

async function child(name: string): Promise<Measured> {
  const engine = ModelEngine.open(modelDir(), { threads: THREADS, graphCache: false, ...VARIANT[name]! });
  try {
    await engine.prepare(['generate']);
    const loaded = rssMb();
    const prompt = Array.from({ length: PROMPT }, (_, i) => 5 + ((i * 31) % 200));
    const t0 = performance.now(), c0 = cpuSeconds();
    let first = 0, firstCpu = 0;
    const out = await engine.generate(prompt, { temperature: 0, maxNewTokens: NEW_TOKENS, stopTokenIds: [] }, () => {
      if (!first) [first, firstCpu] = [performance.now(), cpuSeconds()];
    });
    const end = performance.now(), cEnd = cpuSeconds();
    const peak = process.resourceUsage().maxRSS / 1024;
    return {
      firstTokenS: (first - t0) / 1000, firstTokenCpuS: firstCpu - c0,
      tokensPerS: (out.tokens.length - 1) / ((end - first) / 1000), decodeCpuS: cEnd - firstCpu,
      peakAboveLoadMb: peak - loaded, tokens: out.tokens, logprobs: out.logprobs,
    };
  } finally {
    await engine.close();
  }
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--child');
  if (at >= 0) {
    console.log(JSON.stringify(await child(process.argv[at + 1]!)));
    return;
  }
  modelDir();
  console.log(`decode cache: a prompt of ${PROMPT} tokens, then ${NEW_TOKENS} greedy tokens; random Qwen3 with the 0.6B cache layout; ${THREADS} threads, ${REPEATS} rounds, load ${os.loadavg()[0]!.toFixed(1)}`);
  const runs = new Map<string, Measured[]>(VARIANTS.map((v) => [v, []]));
  for (let round = 0; round < REPEATS; round++) {
    for (const v of VARIANTS) {
      const w = await runWatched(process.execPath, [...process.execArgv, path.resolve(import.meta.filename), '--child', v], process.env, 16_000);
      runs.get(v)!.push(parseLast<Measured>(w, `the ${v} child`));
    }
  }
  const base = runs.get('fp32');
  const row = (v: string) => {
    const m = runs.get(v)!;
    const f = (pick: (x: Measured) => number) => median(m.map(pick));
    const ratio = (pick: (x: Measured) => number) => (base && v !== 'fp32' ? ` (×${(f(pick) / median(base.map(pick))).toFixed(2)})` : '');
    return `${v.padEnd(10)} first token ${f((x) => x.firstTokenS).toFixed(2)} s / ${f((x) => x.firstTokenCpuS).toFixed(1)} s CPU${ratio((x) => x.firstTokenS)}; `
      + `decode ${f((x) => x.tokensPerS).toFixed(2)} tokens/s, ${f((x) => x.decodeCpuS).toFixed(1)} s CPU${ratio((x) => x.tokensPerS)}; `
      + `peak ${f((x) => x.peakAboveLoadMb).toFixed(0)} MB above the loaded engine${ratio((x) => x.peakAboveLoadMb)}`;
  };
  for (const v of VARIANTS) console.log(row(v));
  const half = runs.get('fp16')?.[0], full = base?.[0];
  if (half && full) {
    const same = full.tokens.findIndex((t, i) => t !== half.tokens[i]);
    const shared = same < 0 ? full.tokens.length : same;
    const drift = Math.max(0, ...full.logprobs.slice(0, shared).map((x, i) => Math.abs(x - half.logprobs[i]!)));
    console.log(`fp16 against fp32: the same greedy tokens for ${shared} of ${full.tokens.length}; log-probs within ${drift.toExponential(2)} over them`);
  }
}

await main();
