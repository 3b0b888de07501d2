/**
 * One Hindsight measurement of bench/real-shapes.ts, in a process of its own so that its
 * peak RSS is its own and, for the first-token figure, its start is a new process's. The
 * training step's measurement is bench/train-memory-child.ts's.
 */
import fs from 'node:fs';
import type { Quantize } from '../src-main/model/quantize.js';
import type { ScoreRow } from '../src-main/model/inference-engine.js';
import type { Device } from '../src-main/model/ort-session.js';
import type { Precision } from '../src-shared/training.js';
import type { LoraShape } from '../src-main/model/lora-inputs.js';
import { epochMs, type ProfileWindow } from './ort-profile.js';

/** Each request runs on `device` (default cpu; bench/gpu.ts asks for a GPU), in `precision` (default: the device's). */
export type RealChildRequest = { device?: Device; precision?: Precision; decodeCacheOnDevice?: boolean; decodeInGraph?: boolean } & (
  | { kind: 'generate'; model: string; threads: number; quantize: Quantize; prompt: number[]; newTokens: number; repeats: number }
  /** first-token: `quantize` as generate's (default none). */
  | { kind: 'first-token'; model: string; threads: number; prompt: number[]; quantize?: Quantize }
  /** score: the warm-up scores the whole batch, so a timed run meets memory the warm-up already grew. */
  | { kind: 'score'; model: string; threads: number; quantize: Quantize; rows: ScoreRow[]; repeats: number }
  /** prefill: a long prompt to its first token (the warm-up: a 64-token piece of it). */
  | { kind: 'prefill'; model: string; threads: number; quantize: Quantize; prompt: number[]; repeats: number }
  | { kind: 'judge'; model: string; threads: number; quantize: Quantize; prompt: number[]; newTokens: number; repeats: number }
  /**
   * rollout: the engine an on-policy run decodes its rollouts with (ModelEngine in the trainer's
   * thread, LoRA inputs of `lora`'s shape), greedy, with ONNX Runtime's prepacking on or off;
   * private memory from /proc/self/smaps_rollup after load and after the decodes.
   */
  | { kind: 'rollout'; model: string; threads: number; quantize: Quantize; prepack: boolean; lora: LoraShape; prompt: number[]; newTokens: number; repeats: number }
  /** Loads the model with `graph` prepared and closes it: fills the graph cache for the processes measured after it. */
  | { kind: 'prime'; model: string; threads: number; quantize: Quantize; graph: 'score' | 'generate' }
);

export interface Timed {
  wallS: number;
  cpuS: number;
}

export interface RealChildResult {
  peakMb: number;
  /** generate, judge: load with its graphs (the cache's or built). */
  loadS?: number;
  /** generate, score, prefill: the median run; judge: the batched votes. */
  run?: Timed;
  /** judge: the votes one after another. */
  sequential?: Timed;
  sameTokens?: boolean;
  tokens?: number[];
  logprobs?: number[][];
  /** first-token: ms since this process started (Node's time origin), at each step. */
  importedMs?: number;
  loadedMs?: number;
  firstTokenMs?: number;
  /** rollout: /proc/self/smaps_rollup before the engine opens, after load + warm-up, after the timed decodes. */
  memory?: { before: SmapsMb; loaded: SmapsMb; decoded: SmapsMb };
  /** generate, score, prefill, judge, rollout: the last timed run's span (epoch ms). */
  lastRun?: ProfileWindow;
}

/**
 * The process's memory as the kernel accounts it (MB). RSS counts a file mapped by two
 * sessions twice and counts the clean pages of the weight file the page cache could drop;
 * `anonymous` (RssAnon) and `pssAnon` are what the process holds privately: packed copies,
 * the arena, the KV cache.
 */
export interface SmapsMb {
  rss: number;
  pss: number;
  pssAnon: number;
  pssFile: number;
  anonymous: number;
}

function smapsRollup(): SmapsMb {
  const text = fs.readFileSync('/proc/self/smaps_rollup', 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) / 1024;
  return { rss: kb('Rss'), pss: kb('Pss'), pssAnon: kb('Pss_Anon'), pssFile: kb('Pss_File'), anonymous: kb('Anonymous') };
}

async function timed<R>(f: () => Promise<R>): Promise<[R, Timed]> {
  const c0 = process.cpuUsage(), t0 = performance.now();
  const r = await f();
  const c = process.cpuUsage(c0);
  return [r, { wallS: (performance.now() - t0) / 1000, cpuS: (c.user + c.system) / 1e6 }];
}

/** The last timed run's span, for bench/gpu.ts's profile summary (BENCH_PROFILE) to keep that run alone. */
let lastRun: ProfileWindow | undefined;

/** The run of median wall time among `repeats`, and the last result. */
async function median<R>(repeats: number, f: () => Promise<R>): Promise<[R, Timed]> {
  const runs: [R, Timed][] = [];
  for (let i = 0; i < repeats; i++) {
    const startMs = epochMs();
    runs.push(await timed(f));
    lastRun = { startMs, endMs: epochMs() };
  }
  const last = runs.at(-1)![0];
  runs.sort((a, b) => a[1].wallS - b[1].wallS);
  return [last, runs[Math.floor(runs.length / 2)]![1]];
}

const peakMb = () => process.resourceUsage().maxRSS / 1024;

export async function runRealChild(q: RealChildRequest): Promise<RealChildResult> {
  if (q.kind === 'first-token') return firstToken(q);
  if (q.kind === 'rollout') return rolloutDecode(q);
  const { LocalModel } = await import('../src-main/model/local-model.js');
  const prepare = q.kind === 'prime' ? [q.graph] : q.kind === 'score' ? ['score' as const] : ['generate' as const];
  const [model, load] = await timed(() => LocalModel.load(q.model, { threads: q.threads, quantize: q.quantize, prepare, device: q.device, precision: q.precision, decodeCacheOnDevice: q.decodeCacheOnDevice, decodeInGraph: q.decodeInGraph }));
  try {
    if (q.kind === 'prime') return { peakMb: peakMb(), loadS: load.wallS };
    if (q.kind === 'generate') {
      await model.generate(q.prompt, { maxNewTokens: 4, stopTokenIds: [] }); // warm-up
      const [out, run] = await median(q.repeats, () => model.generate(q.prompt, { maxNewTokens: q.newTokens, stopTokenIds: [] }));
      return { peakMb: peakMb(), loadS: load.wallS, run, tokens: out.tokens };
    }
    if (q.kind === 'prefill') {
      await model.generate(q.prompt.slice(0, 64), { maxNewTokens: 1, stopTokenIds: [] });
      const [out, run] = await median(q.repeats, () => model.generate(q.prompt, { maxNewTokens: 1, stopTokenIds: [] }));
      return { peakMb: peakMb(), loadS: load.wallS, run, tokens: out.tokens };
    }
    if (q.kind === 'score') {
      await model.score(q.rows, { batchSize: q.rows.length }); // warm-up
      const [logprobs, run] = await median(q.repeats, () => model.score(q.rows, { batchSize: q.rows.length }));
      return { peakMb: peakMb(), loadS: load.wallS, run, logprobs };
    }
    // The local judge's shape: 3 votes sampled at t = 0.6 with 3 seeds, one batch vs one at a time.
    const seeds = [101, 102, 103];
    const request = { temperature: 0.6, maxNewTokens: q.newTokens, stopTokenIds: [] };
    await model.generate(q.prompt.slice(0, 16), { maxNewTokens: 2, stopTokenIds: [] });
    const [batched, run] = await median(q.repeats, async () => (await model.generateBatch([{ prompt: q.prompt, seeds }], request))[0]!.map((o) => o.tokens));
    const [sequentialTokens, sequential] = await median(q.repeats, async () => {
      const out: number[][] = [];
      for (const seed of seeds) out.push((await model.generate(q.prompt, { ...request, seed })).tokens);
      return out;
    });
    const sameTokens = batched.every((t, i) => t.join() === sequentialTokens[i]!.join());
    return { peakMb: peakMb(), loadS: load.wallS, run, sequential, sameTokens };
  } finally {
    await model.close();
  }
}

/** A new process's way to its first generated token: import, load (graphs from the cache or built), prefill and one token. */
async function firstToken(q: Extract<RealChildRequest, { kind: 'first-token' }>): Promise<RealChildResult> {
  const { LocalModel } = await import('../src-main/model/local-model.js');
  const importedMs = performance.now();
  const model = await LocalModel.load(q.model, { threads: q.threads, quantize: q.quantize, prepare: ['generate'] });
  const loadedMs = performance.now();
  const out = await model.generate(q.prompt, { maxNewTokens: 1, stopTokenIds: [] });
  const firstTokenMs = performance.now();
  await model.close();
  return { peakMb: peakMb(), importedMs, loadedMs, firstTokenMs, tokens: out.tokens };
}

/** The on-policy trainer's rollout engine (src-main/onpolicy/onpolicy-trainer.ts), opened as it opens it, with `prepack` set. */
async function rolloutDecode(q: Extract<RealChildRequest, { kind: 'rollout' }>): Promise<RealChildResult> {
  const { ModelEngine } = await import('../src-main/model/inference-engine.js');
  const before = smapsRollup();
  const [engine, load] = await timed(async () => {
    const e = ModelEngine.open(q.model, { device: q.device, threads: q.threads, lora: q.lora, quantize: q.quantize, prepack: q.prepack, precision: q.precision });
    await e.prepare(['generate']);
    return e;
  });
  try {
    const request = { maxNewTokens: q.newTokens, stopTokenIds: [], temperature: 0, decodeText: false };
    await engine.generate(q.prompt, { ...request, maxNewTokens: 4 }); // warm-up
    const loaded = smapsRollup();
    const [out, run] = await median(q.repeats, () => engine.generate(q.prompt, request));
    return { peakMb: peakMb(), loadS: load.wallS, run, tokens: out.tokens, memory: { before, loaded, decoded: smapsRollup() } };
  } finally {
    await engine.close();
  }
}

// Run as its own entry (`tsx bench/real-shapes-child.ts REQUEST_JSON`), so a first-token
// process loads nothing but what the app would.
if (process.argv[1]?.endsWith('real-shapes-child.ts') && process.argv[2]) {
  console.log(JSON.stringify({ ...(await runRealChild(JSON.parse(process.argv[2]) as RealChildRequest)), lastRun }));
}
