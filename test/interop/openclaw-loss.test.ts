/**
 * Hindsight's loss aggregation and top-K distillation against OpenClaw-RL's on the same inputs
 * (issue 33 items 4 and 6; docs/design.md §Losses): ./py/openclaw_loss.py computes OpenClaw-RL's
 * PPO-clip loss (slime's compute_policy_loss) under its sample mean (get_sum_of_sample_mean, then
 * ÷ the global batch size as slime's loss_function) and under --calculate-per-token-loss, and its
 * top-K distillation loss (openclaw-opd/topk_distillation_loss.py), with their gradients, in
 * float64. Hindsight's side is the same graph pieces the training step uses (the ppo-clip loss
 * record, ./step-loss.ts aggregator and appendTopKDistillation, the host's sample weights), run
 * in ONNX Runtime with autodiff's gradients.
 *
 * Set OPENCLAW_RL_DIR to a checkout of github.com/Gen-Verse/OpenClaw-RL to run its own files
 * (the script loads them with one-process stand-ins for the Megatron pieces they import);
 * without it the script runs the same formulas as it restates them, and the test says so.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { appendGradients } from '../../src-main/graph/autodiff.js';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { lossRecord } from '../../src-main/train/losses.js';
import { lossFeeds, lossWeightGrid } from '../../src-main/train/step-feeds.js';
import { LOSS_WEIGHTS } from '../../src-main/train/step-graph.js';
import { aggregator, appendTopKDistillation } from '../../src-main/train/step-loss.js';
import type { LossAgg, StepBatch } from '../../src-main/train/training-step.js';
import { seededRandom } from '../../tools/tiny-models.js';
import { interopPython, interopSkipReason, pythonEnv } from './python.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Samples of these response lengths and masks, one after another: the third trains no token. */
const MASKS = [[1, 1, 1, 1, 1], [1], [0, 0, 0], [1, 0, 1, 1]];
/** The same without the empty sample, where slime's per-token divisor and Hindsight's token-mean agree. */
const FULL_MASKS = [[1, 1, 1, 1, 1], [1], [0, 1, 1], [1, 0, 1, 1]];

interface Case {
  kind: 'policy' | 'topk';
  agg: LossAgg;
  response_lengths: number[];
  loss_masks: number[][];
  [field: string]: unknown;
}

/** Runs the script without blocking this worker (torch's import alone takes seconds). */
function python(cases: Case[]): Promise<{ mode: string; results: { loss: number; grad: number[] }[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(interopPython!, [path.join(here, 'py', 'openclaw_loss.py')], { env: pythonEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`openclaw_loss.py failed: ${stderr}`))));
    child.stdin.end(JSON.stringify(cases));
  });
}

/** The samples as a step batch (one row each, the response after one prompt token) and every response cell, in order. */
function batchOf(masks: number[][]): { batch: StepBatch; cells: number[] } {
  const B = masks.length, T = Math.max(...masks.map((m) => m.length)) + 1;
  const responseMask = new Float32Array(B * T);
  const cells: number[] = [];
  masks.forEach((m, b) => m.forEach((v, t) => {
    responseMask[b * T + 1 + t] = v;
    cells.push(b * T + 1 + t);
  }));
  const zeros = new Float32Array(B * T), ids = new BigInt64Array(B * T);
  return { batch: { batch: B, seqLen: T, inputIds: ids, attentionMask: ids, positionIds: ids, responseMask, oldLogprobs: zeros, advantages: zeros }, cells };
}

/** Hindsight's mean over the trained tokens for these samples: the graph's inputs and their feeds. */
function hindsightMean(b: GraphBuilder, agg: LossAgg, masks: number[][]) {
  const { batch, cells } = batchOf(masks);
  const n = cells.length;
  const mask = b.input('mask', 'float32', [n]);
  const weights = agg === 'sample-mean' ? b.input('sample_weights', 'float32', [n]) : undefined;
  const feeds: Record<string, ort.Tensor> = { mask: new ort.Tensor('float32', Float32Array.from(masks.flat()), [n]) };
  if (weights) {
    // The step's own feed: the whole batch's weight grid, gathered at these cells.
    const picked = { tokens: Int32Array.from(cells), standIn: false };
    feeds.sample_weights = lossFeeds(batch, picked, { ref: false, lossAgg: agg }, lossWeightGrid(batch, agg))[LOSS_WEIGHTS]!;
  }
  return { mask, feeds, ...aggregator(b, mask, weights) };
}

async function run(b: GraphBuilder, loss: string, wrt: string, feeds: Record<string, ort.Tensor>): Promise<{ loss: number; grad: number[] }> {
  b.output(b.identityAs(loss, 'loss'));
  b.output(b.identityAs(appendGradients(b, loss, [wrt]).get(wrt)!, 'grad'));
  const session = await ort.InferenceSession.create(serializeModel(b.graph));
  const out = await session.run(feeds);
  await session.release();
  return { loss: (out.loss!.data as Float32Array)[0]!, grad: Array.from(out.grad!.data as Float32Array) };
}

const f32 = (x: number[], dims: number[]) => new ort.Tensor('float32', Float32Array.from(x), dims);

function policyCase(agg: LossAgg, masks: number[][], seed: number): Case {
  const rand = seededRandom(seed);
  const n = masks.flat().length;
  const logProbs = Array.from({ length: n }, () => -3 * rand());
  // Old off by up to ±0.5 nats: some ratios beyond the clip on either side.
  const old = logProbs.map((v) => v + (rand() - 0.5));
  const advantages = Array.from({ length: n }, () => 4 * rand() - 2);
  return { kind: 'policy', agg, response_lengths: masks.map((m) => m.length), loss_masks: masks, log_probs: logProbs, old_log_probs: old, advantages, eps_clip: 0.2, eps_clip_high: 0.28 };
}

async function hindsightPolicy(c: Case): Promise<{ loss: number; grad: number[] }> {
  const b = new GraphBuilder('policy');
  const n = (c.log_probs as number[]).length;
  const m = hindsightMean(b, c.agg, c.loss_masks);
  const [logprobs, old, advantages] = ['logprobs', 'old', 'advantages'].map((name) => b.input(name, 'float32', [n]));
  const loss = lossRecord('ppo-clip').build(b, { logprobs: logprobs!, mask: m.mask, old: old!, advantages: advantages!, mean: m.mean }, {
    method: 'rl', epsLow: c.eps_clip as number, epsHigh: c.eps_clip_high as number, klBeta: 0,
  });
  return run(b, loss.loss, logprobs!, { ...m.feeds, logprobs: f32(c.log_probs as number[], [n]), old: f32(c.old_log_probs as number[], [n]), advantages: f32(c.advantages as number[], [n]) });
}

const V = 12, K = 4;

function topkCase(agg: LossAgg, masks: number[][], seed: number): Case {
  const rand = seededRandom(seed);
  const n = masks.flat().length;
  const logits = Array.from({ length: n }, () => Array.from({ length: V }, () => 3 * (2 * rand() - 1)));
  // The teacher: another set of logits' top K, in descending order.
  const teacher = Array.from({ length: n }, () => {
    const z = Array.from({ length: V }, () => 3 * (2 * rand() - 1));
    const lse = Math.log(z.reduce((a, v) => a + Math.exp(v), 0));
    return z.map((v, i) => [v - lse, i] as const).sort((a, b) => b[0] - a[0]).slice(0, K);
  });
  return {
    kind: 'topk', agg, k: K, response_lengths: masks.map((m) => m.length), loss_masks: masks, logits,
    teacher_logprobs: teacher.map((t) => t.map(([lp]) => Math.fround(lp))), teacher_indices: teacher.map((t) => t.map(([, i]) => i)),
  };
}

async function hindsightTopK(c: Case): Promise<{ loss: number; grad: number[] }> {
  const b = new GraphBuilder('topk');
  const n = (c.logits as number[][]).length;
  const m = hindsightMean(b, c.agg, c.loss_masks);
  const logits = b.input('logits', 'float32', [n, V]);
  const indices = b.input('indices', 'int64', [n, K]);
  const teacher = b.input('teacher', 'float32', [n, K]);
  const student = b.gatherElements(b.logSoftmax(logits, -1), indices, -1);
  // Every trained token distils with weight 1 (opd's w_opd), the others 0.
  const { loss } = appendTopKDistillation(b, { student, teacher, weights: m.mask }, m.mean);
  return run(b, loss, logits, {
    ...m.feeds, logits: f32((c.logits as number[][]).flat(), [n, V]), teacher: f32((c.teacher_logprobs as number[][]).flat(), [n, K]),
    indices: new ort.Tensor('int64', BigInt64Array.from((c.teacher_indices as number[][]).flat(), BigInt), [n, K]),
  });
}

describe.skipIf(!interopPython)(`OpenClaw-RL's losses on the same inputs${interopPython ? '' : ` (skipped: ${interopSkipReason})`}`, () => {
  // One run of the script for every case (each run imports torch, and in openclaw mode compiles).
  const emptyTokenMean = policyCase('token-mean', MASKS, 5);
  const cases: [string, Case, (c: Case) => Promise<{ loss: number; grad: number[] }>][] = [
    ['PPO-clip, sample-mean = slime’s default (a sample with no trained token in the divisor)', policyCase('sample-mean', MASKS, 1), hindsightPolicy],
    ['PPO-clip, token-mean = slime’s --calculate-per-token-loss (every sample trains a token)', policyCase('token-mean', FULL_MASKS, 2), hindsightPolicy],
    ['top-K distillation, sample-mean (OpenClaw-RL’s topk_distillation_loss_function)', topkCase('sample-mean', MASKS, 3), hindsightTopK],
    ['top-K distillation, token-mean', topkCase('token-mean', FULL_MASKS, 4), hindsightTopK],
  ];
  let theirs: Awaited<ReturnType<typeof python>>;
  it('runs OpenClaw-RL’s code, or says that it restates it', async () => {
    theirs = await python([...cases.map(([, c]) => c), emptyTokenMean]);
    console.log(`openclaw_loss.py ran in ${theirs.mode} mode${theirs.mode === 'restated' ? ' (set OPENCLAW_RL_DIR to an OpenClaw-RL checkout to run its own files)' : ''}`);
    expect(['openclaw', 'restated']).toContain(theirs.mode);
    if (process.env.OPENCLAW_RL_DIR) expect(theirs.mode).toBe('openclaw');
  });
  cases.forEach(([name, c, hindsight], i) => {
    it(`${name}: the same loss and gradient`, async () => {
      const ours = await hindsight(c);
      const ref = theirs.results[i]!;
      expect(Math.abs(ours.loss - ref.loss)).toBeLessThan(2e-6 * Math.max(1, Math.abs(ref.loss)));
      expect(ours.grad).toHaveLength(ref.grad.length);
      const scale = Math.max(...ref.grad.map(Math.abs));
      expect(scale).toBeGreaterThan(0);
      ours.grad.forEach((g, j) => expect(Math.abs(g - ref.grad[j]!)).toBeLessThan(2e-6 * Math.max(1, scale)));
    });
  });

  it('slime’s per-token divisor counts an empty sample as one token, Hindsight’s token-mean does not', async () => {
    const ours = await hindsightPolicy(emptyTokenMean);
    const ref = theirs.results[cases.length]!;
    const trained = MASKS.flat().reduce((a, v) => a + v, 0);
    // Both sum the same per-token terms; slime divides by trained + 1 (the empty sample's floor).
    expect(ours.loss * trained).toBeCloseTo(ref.loss * (trained + 1), 5);
  });
});
