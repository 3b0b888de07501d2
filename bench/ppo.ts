/**
 * `npm run bench:ppo` — the cost of on-policy training's two halves (docs/design.md §Advantage
 * estimators, §Rollouts, §On-policy training) on bench:train's random Llama of ~125M parameters
 * (the same writer and the same cached folder), LoRA r=16 on all seven targets, on the CPU EP.
 *
 * 1. Estimators: one batch of 8 rows × 256 tokens (the second half the response) as `--data`
 *    lines: old_logprobs from a forward pass of the policy (the generation engine with live
 *    LoRA inputs, as a rollout's are), the reward (±1) on the last response token, groups of
 *    4. The batch goes through `trainBatch` with 2 PPO epochs in minibatches of 4 rows (4
 *    AdamW updates) for `reward`, `grpo` and `gae` (with the value head, which adds a forward
 *    pass for V_old). Each estimator runs in a process of its own, so its peak RSS is its own;
 *    times are medians of BENCH_REPEATS batches after a warm-up batch, wall seconds with the
 *    process's CPU seconds beside them. Also the first epoch's drift (mean |logp − old|),
 *    near 0 since old came from the same weights.
 * 2. Rollouts: 4 contexts × K = 4 rollouts of 64 tokens (temperature 1) through `runRollouts`
 *    on the engine with live LoRA, one batch per turn, against the same 16 episodes generated
 *    one at a time (a `runRollouts` call with K = 1 each, with the seed each had in the batch,
 *    so the tokens must be the same), alternated, medians of BENCH_REPEATS.
 *
 * Measured on the 2-core VM shared with other jobs, 2 threads, medians of 2, two runs (load
 * average 4–9, so wall seconds swing up to 2× between runs; the CPU seconds are the steadier
 * figure; 9.6 minutes in all, the model written first, and 11.5 minutes):
 *
 *   estimator   per batch (4 updates of 4 × 256)      peak RSS   first-epoch drift
 *   reward      30.2 / 40.1 s wall, 29.4 / 26.7 s CPU   3.39 GB    5.9e-7
 *   grpo        29.5 / 41.5 s wall, 26.9 / 27.0 s CPU   3.38 GB    5.9e-7   × reward: wall 0.98 / 1.03, CPU 0.92 / 1.01
 *   gae         52.3 / 81.0 s wall, 36.6 / 39.0 s CPU   4.21 GB    5.8e-7   × reward: wall 1.73 / 2.02, CPU 1.25 / 1.46, RSS 1.24
 *
 *   GRPO costs what `reward` costs (a few host sums). The value head's cost is mostly the
 *   forward pass for V_old at the start of each batch (run 2: 5.7 s wall / 8.0 s CPU warm, in
 *   the step's forward session, which is the +0.8 GB); the rest of gae's extra CPU time
 *   (−0.8 s in run 1, +4.3 s in run 2) is within the spread between runs (`reward` alone:
 *   29.4 vs 26.7 s). The same forward pass, log-probs only, is what `reward` and `grpo` rows
 *   without old_logprobs would add (run 2: 9.6 s wall / 6.4 s CPU), so a rollout's own
 *   log-probs save about a fifth of a batch's CPU time. The drift (the engine's score graph
 *   against the training graph, same weights) is 6e-7 nats.
 *
 *   rollouts, 16 × 64 tokens   batched (one generate call of 16)   one at a time (16 calls)   ratio
 *   run 1                      22.7 s / 14.7 s CPU, 45.1 tokens/s   76.4 s / 61.7 s, 13.4      ×3.4 (CPU ×4.2)
 *   run 2                      13.9 s / 13.8 s CPU, 73.6 tokens/s   83.4 s / 61.2 s, 12.3      ×6.0 (CPU ×4.4)
 *   the batched episodes are token for token the sequential ones (same seeds).
 *
 * Options (env): BENCH_THREADS (2), BENCH_REPEATS (2), BENCH_PARTS (estimators,rollouts).
 * Writes to bench/output/ (git-ignored); the model is reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ADVANTAGE_ESTIMATORS, ON_POLICY_DEFAULTS, type AdvantageEstimator, type Episode } from '../src-shared/rollout.js';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { builtinTools } from '../src-main/rollout/builtin-tools.js';
import { runRollouts, type RolloutContext } from '../src-main/rollout/manager.js';
import { enginePolicy, type Policy } from '../src-main/rollout/policy.js';
import { ToolRegistry } from '../src-main/rollout/tools.js';
import { DEFAULT_LORA } from '../src-main/train/lora.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { LLAMA_125M } from './random-model.js';
import { MINIBATCH, PPO_EPOCHS, policyWeights, runEstimator, timed, type EstimatorRequest, type EstimatorResult } from './ppo-child.js';

const OUT = path.resolve('bench/output');
const MODEL = path.join(OUT, 'llama-125m');
const DATA = path.join(OUT, 'ppo-bench-data.jsonl');
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const PARTS = (process.env.BENCH_PARTS ?? 'estimators,rollouts').split(',');
const ROWS = 8, T = 256, GROUP = 4;
const CONTEXTS = 4, K = 4, NEW_TOKENS = 64;

const f = (x: number, d = 2) => x.toFixed(d);
const load = () => os.loadavg().map((x) => f(x, 1)).join(' ');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function ensureModel(): void {
  if (fs.existsSync(path.join(MODEL, 'model.safetensors'))) return;
  console.error('writing a random Llama of ~125M parameters …');
  writeTinyModel(MODEL, LLAMA_125M);
}

/**
 * The estimators' batch as `--data` lines: random tokens, the second half the response, its
 * old_logprobs scored by `engine` with the policy's weights, the reward on the last response
 * token (mixed within each group of 4, so GRPO's advantages are not all 0).
 */
async function writeData(engine: ModelEngine): Promise<void> {
  const rand = seededRandom(11);
  const rows = Array.from({ length: ROWS }, () => ({ inputIds: Array.from({ length: T }, () => Math.floor(rand() * engine.config.vocabSize)), responseStart: T / 2 }));
  const [old, s, c] = await timed(() => engine.score(rows, { batchSize: ROWS }));
  const rewards = [1, -1, 1, 1, -1, -1, 1, -1];
  const lines = rows.map((row, b) => JSON.stringify({
    input_ids: row.inputIds, response_start: row.responseStart, old_logprobs: old[b], rewards: [{ at: T - 1, r: rewards[b % rewards.length] }],
    reward: rewards[b % rewards.length], group: `context-${Math.floor(b / GROUP)}`,
  }));
  fs.writeFileSync(DATA, lines.join('\n') + '\n');
  console.log(`old_logprobs of the ${ROWS} × ${T} batch from the engine's score graph with the policy's LoRA: ${f(s)} s (${f(c)} s CPU, session start included)`);
}

function child(estimator: AdvantageEstimator): EstimatorResult {
  const request: EstimatorRequest = { model: MODEL, data: DATA, estimator, threads: THREADS, repeats: REPEATS, maxLength: T };
  const r = spawnSync(process.execPath, [...process.execArgv, path.resolve('bench/ppo.ts'), '--child', JSON.stringify(request)], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`the ${estimator} child failed: ${r.stderr.slice(-2000)}`);
  return JSON.parse(line) as EstimatorResult;
}

function estimatorsPart(): void {
  console.log(`\n## Estimators: one batch of ${ROWS} × ${T} through trainBatch, ${PPO_EPOCHS} PPO epochs × minibatches of ${MINIBATCH} rows ` +
    `(${PPO_EPOCHS * (ROWS / MINIBATCH)} AdamW updates); each estimator its own process; medians of ${REPEATS} after a warm-up`);
  const results = new Map<AdvantageEstimator, EstimatorResult>();
  for (const estimator of ADVANTAGE_ESTIMATORS) {
    const before = load();
    const r = child(estimator);
    results.set(estimator, r);
    const m = r.metrics;
    const drift = m.drift === undefined ? 'NOT REPORTED' : `${m.drift.toExponential(2)}${m.drift < 1e-3 ? '' : ' (HIGH: old is not the policy)'}`;
    const value = m.valueLoss !== undefined ? `, value loss ${m.valueLoss.toExponential(2)}, explained variance ${m.explainedVariance?.toFixed(3) ?? '—'}` : '';
    console.log(`${estimator}: ${f(r.wallS)} s wall / ${f(r.cpuS)} s CPU per batch (warm-up ${f(r.warmWallS)} s; graph + session ${f(r.buildS, 1)} s); ` +
      `peak RSS ${(r.peakMb / 1024).toFixed(2)} GB; load ${before} → ${load()}`);
    console.log(`  ${r.rows} rows, ${m.updates} updates; first-epoch drift ${drift} (timed repeats: ${r.drifts.map((d) => d?.toExponential(2) ?? '—').join(', ')}); ` +
      `loss ${m.loss.toExponential(3)}, approx KL ${Number(m.approxKl).toExponential(2)}, clipfrac ${f(Number(m.clipfrac), 4)}, adv mean ${f(m.advMean, 3)}${value}`);
    console.log(`  a forward pass of the batch, ${estimator === 'gae' ? 'log-probs and V_old (in every gae batch)' : 'log-probs only (what rows without old_logprobs would add)'}: ` +
      `${f(r.forward.wallS)} s wall / ${f(r.forward.cpuS)} s CPU`);
  }
  const base = results.get('reward')!;
  for (const e of ['grpo', 'gae'] as const) {
    const r = results.get(e)!;
    console.log(`${e} / reward: wall ×${f(r.wallS / base.wallS)}, CPU ×${f(r.cpuS / base.cpuS)}, peak RSS ×${f(r.peakMb / base.peakMb)}`);
  }
}

/** The policy, counting the sequences of each generate call (one call per turn when batched). */
function counting(policy: Policy): { policy: Policy; calls: number[] } {
  const calls: number[] = [];
  return {
    calls,
    policy: {
      tokenizer: policy.tokenizer, maxPositions: policy.maxPositions,
      generate: (prompts) => (calls.push(prompts.reduce((n, p) => n + p.seeds.length, 0)), policy.generate(prompts)),
    },
  };
}

async function rolloutsPart(engine: ModelEngine): Promise<void> {
  console.log(`\n## Rollouts: ${CONTEXTS} contexts × K = ${K} of ${NEW_TOKENS} tokens (temperature ${ON_POLICY_DEFAULTS.temperature}), engine with live LoRA; ` +
    `medians of ${REPEATS}, alternated`);
  const contexts: RolloutContext[] = Array.from({ length: CONTEXTS }, (_, c) => ({
    id: `task-${c + 1}`, messages: [{ role: 'user', content: `Task ${c + 1}: what is ${c + 2} times ${c + 7}? Answer with the number.` }],
  }));
  const tools = new ToolRegistry(builtinTools());
  const options = { tools, maxTokens: NEW_TOKENS, step: 0 };
  const { policy, calls } = counting(enginePolicy(engine, { temperature: ON_POLICY_DEFAULTS.temperature, topP: ON_POLICY_DEFAULTS.topP }));
  const t0 = performance.now();
  await engine.prepare(['generate']);
  await engine.generateBatch([{ promptIds: [1, 2, 3, 4], seeds: [1, 2] }], { maxNewTokens: 4, stopTokenIds: [] }); // warm-up
  console.log(`generate graph + session + warm-up ${f((performance.now() - t0) / 1000, 1)} s`);

  const batched = async () => runRollouts(policy, contexts, { ...options, rollouts: K, seedBase: 0 });
  // Sample k of context c has seed c·K + k in the batch; alone, with K = 1, that is its seedBase.
  const sequential = async () => {
    const out: Episode[] = [];
    for (let c = 0; c < CONTEXTS; c++) for (let k = 0; k < K; k++) out.push(...(await runRollouts(policy, [contexts[c]!], { ...options, rollouts: 1, seedBase: c * K + k })));
    return out;
  };
  const runs = { batched: [] as [number, number][], sequential: [] as [number, number][] };
  let tokens = { batched: [] as number[][], sequential: [] as number[][] };
  let callsSeen = { batched: [] as number[], sequential: [] as number[] };
  for (let i = 0; i < REPEATS; i++) {
    for (const [name, run] of [['batched', batched], ['sequential', sequential]] as const) {
      calls.length = 0;
      const [episodes, s, c] = await timed(run);
      runs[name].push([s, c]);
      tokens = { ...tokens, [name]: episodes.map((e) => e.tokens.inputIds.slice(e.tokens.promptLength)) };
      callsSeen = { ...callsSeen, [name]: [...calls] };
    }
  }
  const generated = tokens.batched.reduce((n, t) => n + t.length, 0);
  const pick = (xs: [number, number][]) => xs.find((x) => x[0] === median(xs.map((y) => y[0])))!;
  const [bw, bc] = pick(runs.batched), [sw, sc] = pick(runs.sequential);
  const same = tokens.batched.length === tokens.sequential.length && tokens.batched.every((t, i) => t.join() === tokens.sequential[i]!.join());
  console.log(`batched (one runRollouts call, generate calls of ${callsSeen.batched.join(', ')} sequences): ${f(bw)} s wall / ${f(bc)} s CPU, ${f(generated / bw, 1)} tokens/s`);
  console.log(`one at a time (${callsSeen.sequential.length} calls of 1 sequence): ${f(sw)} s wall / ${f(sc)} s CPU, ${f(generated / sw, 1)} tokens/s`);
  console.log(`batched / one at a time: ×${f(sw / bw)} tokens/s (CPU ×${f(sc / bc)}); ${generated} tokens in ${tokens.batched.length} episodes; same tokens: ${same ? 'yes' : 'NO'}`);
}

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) {
    console.log(JSON.stringify(await runEstimator(JSON.parse(process.argv[childAt + 1]!) as EstimatorRequest)));
    return;
  }
  fs.mkdirSync(OUT, { recursive: true });
  ensureModel();
  const started = performance.now();
  console.log(`# bench:ppo — random Llama 125M (hidden 768, 12 layers, vocab 32000), LoRA r=${DEFAULT_LORA.r} on ${DEFAULT_LORA.targets.join(',')}; ` +
    `${THREADS} threads on ${os.cpus().length} cores; load average at start ${load()}`);
  const engine = ModelEngine.open(MODEL, { threads: THREADS, lora: DEFAULT_LORA });
  try {
    engine.setLora(policyWeights(engine.config));
    if (PARTS.includes('estimators')) await writeData(engine);
    if (PARTS.includes('rollouts')) await rolloutsPart(engine);
  } finally {
    await engine.close();
  }
  if (PARTS.includes('estimators')) estimatorsPart();
  console.log(`\nload average at end ${load()}; ${f((performance.now() - started) / 60000, 1)} min in all`);
}

await main();
