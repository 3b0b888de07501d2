/**
 * `npx tsx bench/loss-agg.ts MODEL DB [METHOD] [BATCH] [MAX_LENGTH] [STEPS]` — does one long reply
 * dominate a step? (issue 33 item 4; docs/design.md §Losses, "Aggregation"). The rows a run of
 * METHOD (combine) would train from the database DB, cut into the batches of STEPS steps (default
 * one epoch) exactly as the trainer cuts them (seed 0, BATCH 16); for each batch the share of its longest reply
 * (most trained tokens) under --loss-agg token-mean and sample-mean:
 *
 *   weight    the row's weight in the loss: n_L / Σ n (token-mean), 1 / B (sample-mean)
 *   gradient  ‖c_L·ĝ_L‖ / Σ_i ‖c_i·ĝ_i‖, ĝ_i the row's own mean gradient (a one-row step at the
 *             run's first weights, with its in-step advantages and teacher), c_i its weight:
 *             how much of the batch's gradient, summed by size, is that one row's
 *   along     (c_L·ĝ_L · g) / ‖g‖², g = Σ c_i·ĝ_i: the longest row's part of the step taken
 *
 * Prints one table line per batch, the means, and how many steps the longest row makes half of; METHOD's rows need labels (and hints for the
 * teacher), e.g. the demo data judged with `judge --backend heuristic --hints`.
 */
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { ChatTokenizer } from '../src-main/model/tokenizer.js';
import { fillInStepAdvantages } from '../src-main/train/advantages.js';
import { padBatch, rowsForStep, rowsFromSamples, type TrainRow } from '../src-main/train/batches.js';
import { initLora, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { teacherLogprobs } from '../src-main/train/ppo-batch.js';
import { TrainStepEngine } from '../src-main/train/step-engine.js';
import type { LoraWeights, TrainMethod } from '../src-main/train/training-step.js';
import { withWorkspace } from '../src-main/workspace/workspace.js';
import { TRAIN_DEFAULTS } from '../src-shared/training.js';

const [model, db, method = 'combine', batchArg = '16', maxArg, stepsArg] = process.argv.slice(2);
if (!model || !db) {
  console.error('usage: npx tsx bench/loss-agg.ts MODEL DB [METHOD] [BATCH] [MAX_LENGTH]');
  process.exit(2);
}
const batchSize = Number(batchArg);
const checkpoint = Checkpoint.open(model);
const maxLength = Number(maxArg || Math.min(TRAIN_DEFAULTS.maxLength, checkpoint.config.maxPositionEmbeddings));
const tokenizer = ChatTokenizer.load(model);
const samples = await withWorkspace(db, (ws) => ws.trainingSamples({ method: method as TrainMethod }), { access: 'read' });
const { rows } = rowsFromSamples(samples, tokenizer, method as TrainMethod, maxLength);
const trained = (r: TrainRow) => (r.responseMask ? r.responseMask.reduce((a, m) => a + m, 0) : r.inputIds.length - r.responseStart);
const lengths = rows.map(trained).sort((a, b) => a - b);
console.log(`${rows.length} rows of ${method} at max length ${maxLength}; reply tokens: min ${lengths[0]}, median ${lengths[lengths.length >> 1]}, max ${lengths.at(-1)}, mean ${(lengths.reduce((a, n) => a + n, 0) / lengths.length).toFixed(1)}`);

const step = await TrainStepEngine.create(checkpoint, {
  lora: { ...DEFAULT_LORA }, loss: { method: method as TrainMethod, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
  optimizer: { kind: 'sgd', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 0 }, device: 'cpu', maxLength,
});
// The run's first weights (B = 0: only the B matrices get a gradient, as at a run's first step).
const weights: LoraWeights = initLora(loraSpecs(checkpoint.config, DEFAULT_LORA.targets), DEFAULT_LORA.r, TRAIN_DEFAULTS.seed);

/** Each row's own mean gradient (a one-row step: its token mean), flattened. */
const meanGrad = new Map<TrainRow, Float64Array>();
async function rowGradient(row: TrainRow): Promise<Float64Array> {
  const known = meanGrad.get(row);
  if (known) return known;
  const batch = padBatch([row]);
  fillInStepAdvantages({ method: method as TrainMethod, weights: { wOpd: TRAIN_DEFAULTS.wOpd, wRl: TRAIN_DEFAULTS.wRl }, rows: [row], batch, teacher: await teacherLogprobs(step, method as TrainMethod, [row]) });
  const g = await step.gradients(batch, weights);
  const flat = new Float64Array([...g.grads.values()].reduce((a, v) => a + v.length, 0));
  let at = 0;
  for (const v of g.grads.values()) {
    flat.set(v, at);
    at += v.length;
  }
  meanGrad.set(row, flat);
  return flat;
}

const norm = (v: Float64Array) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const dot = (a: Float64Array, b: Float64Array) => a.reduce((s, x, i) => s + x * b[i]!, 0);

const perEpoch = Math.ceil(rows.length / batchSize);
const steps = Number(stepsArg || perEpoch);
const sums = { 'token-mean': { weight: 0, gradient: 0, along: 0, half: 0 }, 'sample-mean': { weight: 0, gradient: 0, along: 0, half: 0 } };
console.log('batch  rows  tokens  longest  | token-mean: weight gradient along | sample-mean: weight gradient along');
for (let k = 0; k < steps; k++) {
  const batch = rowsForStep(rows, batchSize, k, TRAIN_DEFAULTS.seed, seededRandom).rows;
  const n = batch.map(trained), total = n.reduce((a, x) => a + x, 0);
  const longest = n.indexOf(Math.max(...n));
  const grads = [];
  for (const row of batch) grads.push(await rowGradient(row));
  const line: string[] = [`${String(k + 1).padStart(5)}  ${String(batch.length).padStart(4)}  ${String(total).padStart(6)}  ${String(n[longest]).padStart(7)}`];
  for (const agg of ['token-mean', 'sample-mean'] as const) {
    const c = n.map((x) => (agg === 'token-mean' ? x / total : 1 / batch.length));
    const g = new Float64Array(grads[0]!.length);
    grads.forEach((gi, i) => gi.forEach((x, j) => (g[j]! += c[i]! * x)));
    const sizes = grads.map((gi, i) => c[i]! * norm(gi));
    const share = { weight: c[longest]!, gradient: sizes[longest]! / sizes.reduce((a, x) => a + x, 0), along: (c[longest]! * dot(grads[longest]!, g)) / dot(g, g) };
    for (const key of ['weight', 'gradient', 'along'] as const) sums[agg][key] += share[key];
    if (share.along > 0.5) sums[agg].half++;
    line.push(`${share.weight.toFixed(3)}  ${share.gradient.toFixed(3)}  ${share.along.toFixed(3)}`);
  }
  console.log(line.join('  |  '));
}
for (const agg of ['token-mean', 'sample-mean'] as const) {
  const m = sums[agg];
  console.log(`${agg}: mean over ${steps} batches: the longest reply's weight ${(m.weight / steps).toFixed(3)}, gradient share ${(m.gradient / steps).toFixed(3)}, along the step ${(m.along / steps).toFixed(3)}; more than half of the step in ${m.half} of ${steps}`);
}
await step.close();
