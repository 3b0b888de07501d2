/**
 * `npx tsx bench/rollout-memory.ts` — what an on-policy step's rollouts hold in memory beside
 * the training step (docs/design.md §Memory estimate, "The rollouts' decode cache"): the host
 * decode cache of C prompts × K sequences generated together, as ModelEngine.generateBatch
 * allocates it, against the estimate's `rolloutCache` part (src-shared/train-memory.ts).
 *
 * The model is random, with the Qwen3-0.6B shape's KV layout (28 layers, 8 KV heads of 128:
 * 224 KiB a slot, as at 0.6B) but small everything else (hidden 256, 16 query heads, MLP 512, the
 * tiny ~300-token vocabulary), so the cache dominates and 2 cores run it in a few minutes. Each
 * case runs in a process of its own: it opens the engine, builds the generate session with a
 * short warm-up generation, resets the peak (Linux /proc/self/clear_refs 5) and takes the RSS
 * then as its baseline, generates, and reports the peak RSS above the baseline (VmHWM).
 *
 *   budget     every sequence runs to its budget: the cache at its longest, no row leaving
 *   staggered  temperature 1 with three stop tokens: sequences end at different steps, and the
 *              rows that go on move down in place (src-main/model/kv-cache.ts select)
 *   turns      two turns, as an episode that calls a tool runs: half the budget, then every
 *              sequence as its own prompt (what it has, and 16 tokens of a tool's turn) for the
 *              other half, prefilled whole, in steps of at most 2,048 tokens over the 16 rows
 *   carried    the same two turns as the rollout manager runs them: the second continues each
 *              sequence's cache row from the first (src-main/model/carried-rows.ts), so only the
 *              last token and the tool's turn are prefilled
 *
 * Options (env): BENCH_THREADS (2), BENCH_CONTEXTS (4), BENCH_ROLLOUTS (4), BENCH_PROMPT (480),
 * BENCH_NEW (256), BENCH_CASES (budget,staggered,turns,carried), BENCH_MODEL (a checkpoint folder
 * instead of the cache-layout model, which goes to bench/output/rollout-cache-model: e.g. a real
 * shape, where a prefill costs what it does with real weights).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import { CarriedRows } from '../src-main/model/carried-rows.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { rolloutCacheBytes, rolloutsOf } from '../src-shared/train-memory.js';
import { modelShape } from '../src-main/model/host-memory.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { parseLast, runWatched } from './watched-process.js';

const CACHE_MODEL = path.resolve('bench/output/rollout-cache-model');
/** The model measured: BENCH_MODEL, or the cache-layout model written here. */
const MODEL = path.resolve(process.env.BENCH_MODEL ?? CACHE_MODEL);
const SHAPE = { family: 'qwen3', hiddenSize: 256, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, intermediateSize: 512, std: 0.02, seed: 5, maxPositions: 4096 } as const;
/** Tokens of the tool turn between the two turns of the `turns` case. */
const TOOL_TURN = 16;
const env = (key: string, fallback: string) => process.env[key] ?? fallback;

interface Case {
  kind: 'budget' | 'staggered' | 'turns' | 'carried';
  threads: number;
  contexts: number;
  rollouts: number;
  prompt: number;
  maxNew: number;
}

interface Result {
  baselineMb: number;
  peakAboveMb: number;
  wallS: number;
  cpuS: number;
  /** Tokens each sequence generated (the staggered case's spread). */
  generated: number[];
}

const signedPercent = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(0)}%`;
const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN);

async function measure(c: Case): Promise<Result> {
  const engine = ModelEngine.open(MODEL, { threads: c.threads, graphCache: false });
  const V = engine.config.vocabSize;
  const rand = seededRandom(3);
  // Prompts of a little different lengths, as a step's contexts are (left-padded to the longest).
  const prompts = Array.from({ length: c.contexts }, (_, i) => Array.from({ length: c.prompt - 8 * i }, () => 10 + Math.floor(rand() * (V - 20))));
  await engine.generateBatch([{ promptIds: prompts[0]!.slice(0, 8), seeds: [0] }], { maxNewTokens: 2 });
  if (global.gc) global.gc();
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const baselineKb = kb('VmRSS');
  const t0 = performance.now(), c0 = process.cpuUsage();
  // Staggered: three stop tokens of the ~300 end a sequence at a random step (about 1 in 100 a token).
  const stops = c.kind === 'staggered' ? [V - 5, V - 6, V - 7] : [];
  const options = { temperature: 1, stopTokenIds: stops, decodeText: false };
  const turns = c.kind === 'turns' || c.kind === 'carried' ? 2 : 1, budget = c.maxNew / turns;
  const carry = c.kind === 'carried' ? new CarriedRows() : undefined;
  let out = await engine.generateBatch(
    prompts.map((promptIds, i) => ({ promptIds, seeds: Array.from({ length: c.rollouts }, (_, k) => i * c.rollouts + k) })),
    { ...options, maxNewTokens: budget, carry },
  );
  if (turns === 2) {
    const tool = Array.from({ length: TOOL_TURN }, (_, i) => 10 + i);
    const next = out.flatMap((seqs, i) => seqs.map((s, k) => ({ promptIds: [...prompts[i]!, ...s.tokens, ...tool], seeds: [1000 + i * c.rollouts + k] })));
    const second = await engine.generateBatch(next, { ...options, maxNewTokens: budget, carry });
    carry?.clear();
    out = out.map((seqs, i) => seqs.map((s, k) => ({ ...s, tokens: [...s.tokens, ...second[i * c.rollouts + k]![0]!.tokens] })));
  }
  const cpu = process.cpuUsage(c0);
  const result = {
    baselineMb: baselineKb / 1024, peakAboveMb: (kb('VmHWM') - baselineKb) / 1024, wallS: (performance.now() - t0) / 1000,
    cpuS: (cpu.user + cpu.system) / 1e6, generated: out.flat().map((s) => s.tokens.length),
  };
  await engine.close();
  return result;
}

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) {
    console.log(JSON.stringify(await measure(JSON.parse(process.argv[childAt + 1]!) as Case)));
    return;
  }
  if (MODEL === CACHE_MODEL && !fs.existsSync(path.join(MODEL, 'config.json'))) writeTinyModel(MODEL, SHAPE);
  const base = {
    threads: Number(env('BENCH_THREADS', '2')), contexts: Number(env('BENCH_CONTEXTS', '4')), rollouts: Number(env('BENCH_ROLLOUTS', '4')),
    prompt: Number(env('BENCH_PROMPT', '480')), maxNew: Number(env('BENCH_NEW', '256')),
  };
  const shape = modelShape(MODEL);
  // The estimate's part at a max length of the longest sequence (its prompt, what it generates, a tool turn).
  const estimateMb = (kind: Case['kind']) => rolloutCacheBytes(shape, base.prompt + base.maxNew + (kind === 'turns' || kind === 'carried' ? TOOL_TURN : 0), rolloutsOf(base.contexts, base.rollouts, kind === 'turns' || kind === 'carried' ? 2 : 1)).cache / 2 ** 20;
  console.log(`# Rollout cache: ${base.contexts} prompts × ${base.rollouts} sequences, prompt ≤ ${base.prompt} + ${base.maxNew} new tokens, ` +
    `${shape.numLayers} layers × ${shape.numKvHeads} KV heads of ${shape.headDim}`);
  for (const kind of env('BENCH_CASES', 'budget,staggered,turns,carried').split(',') as Case['kind'][]) {
    const w = await runWatched(process.execPath, [...process.execArgv, path.resolve(import.meta.filename), '--child', JSON.stringify({ ...base, kind })], process.env, 12_000);
    const r = parseLast<Result>(w, kind);
    const spread = r.generated.length ? `${Math.min(...r.generated)}–${Math.max(...r.generated)} tokens a sequence` : '';
    console.log(`${kind}: peak ${r.peakAboveMb.toFixed(0)} MB above the engine's ${r.baselineMb.toFixed(0)} MB (${spread}), ${r.wallS.toFixed(1)} s wall / ${r.cpuS.toFixed(1)} s CPU; ` +
      `estimate ${estimateMb(kind).toFixed(0)} MB (${signedPercent(estimateMb(kind) / r.peakAboveMb - 1)})`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) await main();
