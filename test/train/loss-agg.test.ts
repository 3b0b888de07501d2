// --loss-agg token-mean|sample-mean (issue 33 item 4; src-main/train/step-loss.ts aggregator): the
// step's loss, metrics and gradient under each aggregation against hand-computed values and their
// formulas, with a row that has no trained token (it counts in sample-mean's divisor, as
// OpenClaw-RL's slime divides by the global batch size), and the gradient of sample-mean against
// finite differences. test/interop/openclaw-loss.test.ts runs OpenClaw-RL's own aggregation on
// the same inputs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { lossFeeds, lossWeightGrid, pickResponse } from '../../src-main/train/step-feeds.js';
import { LOSS_WEIGHTS } from '../../src-main/train/step-graph.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { LossAgg, LoraWeights, StepBatch } from '../../src-main/train/training-step.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, axpy, dot, lossConfig, randomDirection, randomLora, scaled, sgd } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-loss-agg-'));
let dir: string;
let vocab: number;
const engines = new Map<string, TrainStepEngine>();
beforeAll(() => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 21, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
});
afterAll(async () => {
  for (const e of engines.values()) await e.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function engine(lossAgg: LossAgg, klBeta = 0): Promise<TrainStepEngine> {
  const key = `${lossAgg}/${klBeta}`;
  if (!engines.has(key)) engines.set(key, await TrainStepEngine.create(dir, { lora: LORA, loss: { ...lossConfig('combine', klBeta), lossAgg }, optimizer: sgd(0.05), device: 'cpu' }));
  return engines.get(key)!;
}

/**
 * Three rows of 8 tokens: row 0 trains its last 4 tokens, row 1 its last token, row 2 none
 * (a sample whose every reply token is masked out, as the tool turns of a rollout are).
 */
function threeRows(advantages: number[][]): StepBatch {
  const rand = seededRandom(4);
  const B = 3, T = 8, n = B * T;
  const batch: StepBatch = {
    batch: B, seqLen: T,
    inputIds: new BigInt64Array(n), attentionMask: new BigInt64Array(n), positionIds: new BigInt64Array(n),
    responseMask: new Float32Array(n), oldLogprobs: new Float32Array(n), advantages: new Float32Array(n),
  };
  const trained = [4, 1, 0];
  for (let r = 0; r < B; r++) {
    for (let t = 0; t < T; t++) {
      const i = r * T + t;
      batch.inputIds[i] = BigInt(Math.floor(rand() * (vocab - 3)));
      batch.attentionMask[i] = 1n;
      batch.positionIds[i] = BigInt(t);
      const j = t - (T - trained[r]!);
      if (j >= 0) {
        batch.responseMask[i] = 1;
        batch.advantages[i] = advantages[r]![j]!;
      }
    }
  }
  return batch;
}

/** Σ_b mean over row b's trained tokens of f, / B (a row without one adds 0). */
function sampleMean(batch: StepBatch, f: (k: number) => number): number {
  let total = 0;
  for (let r = 0; r < batch.batch; r++) {
    let sum = 0, n = 0;
    for (let t = 0; t < batch.seqLen; t++) {
      const k = r * batch.seqLen + t;
      if (!batch.responseMask[k]) continue;
      sum += f(k);
      n++;
    }
    total += n ? sum / n : 0;
  }
  return total / batch.batch;
}

function tokenMean(batch: StepBatch, f: (k: number) => number): number {
  let sum = 0, n = 0;
  batch.responseMask.forEach((m, k) => {
    if (!m) return;
    sum += f(k);
    n++;
  });
  return sum / Math.max(n, 1);
}

describe('--loss-agg: hand-computed values', () => {
  // Old is the policy's own (in-step old): ρ = 1, so the loss is −mean(A) whatever the model says.
  // Row 0: A = 1, 2, 3, 4 (its mean 2.5); row 1: A = −6; row 2: nothing trained.
  //   token-mean:  −(1 + 2 + 3 + 4 − 6) / 5            = −0.8
  //   sample-mean: −(2.5 + (−6) + 0) / 3 (all 3 rows)  = 3.5 / 3 = 1.1666…
  const A = [[1, 2, 3, 4], [-6], []];
  const inStep = (batch: StepBatch) => ({ ...batch, oldFromPolicy: Float32Array.from(batch.responseMask) });

  it('token-mean: every trained token of the batch weighs the same', async () => {
    const g = await (await engine('token-mean')).gradients(inStep(threeRows(A)), randomLora((await engine('token-mean')).specs, LORA.r, 3));
    expect(g.tokens).toBe(5);
    expect(g.loss).toBeCloseTo(-0.8, 6);
  });

  it('sample-mean: each row its own mean, summed and divided by every row of the batch, the empty one included', async () => {
    const e = await engine('sample-mean');
    const g = await e.gradients(inStep(threeRows(A)), randomLora(e.specs, LORA.r, 3));
    expect(g.tokens).toBe(5);
    expect(g.loss).toBeCloseTo(3.5 / 3, 6);
    expect(g.clipfrac).toBe(0);
    expect(g.approxKl).toBe(0);
  });

  it("the host's weights: mask / (max(row's trained tokens, 1) · rows)", () => {
    const batch = threeRows(A);
    const picked = pickResponse(batch);
    const feeds = lossFeeds(batch, picked, { ref: false, lossAgg: 'sample-mean' }, lossWeightGrid(batch, 'sample-mean'));
    expect(Array.from(feeds[LOSS_WEIGHTS]!.data as Float32Array)).toEqual([1 / 12, 1 / 12, 1 / 12, 1 / 12, 1 / 3].map(Math.fround));
  });

  it('a batch whose only row has no trained token: loss 0 under either, not NaN', async () => {
    for (const agg of ['token-mean', 'sample-mean'] as const) {
      const e = await engine(agg);
      const batch = threeRows(A);
      const empty: StepBatch = { ...batch, responseMask: new Float32Array(batch.responseMask.length) };
      const g = await e.gradients(empty, randomLora(e.specs, LORA.r, 3));
      expect(Math.abs(g.loss)).toBe(0);
      expect(g.tokens).toBe(0);
    }
  });
});

describe('--loss-agg: the formulas of the returned log-probs, with clipping and the KL penalty', () => {
  it.each(['token-mean', 'sample-mean'] as const)('%s: loss, clipfrac and approx KL aggregate alike', async (agg) => {
    const e = await engine(agg, 0.3);
    const w = randomLora(e.specs, LORA.r, 5);
    const batch = threeRows([[0.5, -1, 2, 0.25], [1.5], []]);
    const lp = await e.policyLogprobs(batch, w);
    batch.oldLogprobs = Float32Array.from(lp, (v, i) => (batch.responseMask[i] ? v + (((i * 37) % 11) / 10 - 0.5) : 0));
    batch.refLogprobs = await e.baseLogprobs(batch);
    const g = await e.gradients(batch, w);
    const mean = agg === 'sample-mean' ? sampleMean : tokenMean;
    const rho = (k: number) => Math.exp(g.logprobs[k]! - batch.oldLogprobs[k]!);
    const clipped = (k: number) => Math.min(Math.max(rho(k), 0.8), 1.28);
    const obj = (k: number) => Math.min(rho(k) * batch.advantages[k]!, clipped(k) * batch.advantages[k]!);
    const k3 = (k: number) => Math.exp(batch.refLogprobs![k]! - g.logprobs[k]!) - (batch.refLogprobs![k]! - g.logprobs[k]!) - 1;
    expect(g.loss).toBeCloseTo(-mean(batch, obj) + 0.3 * mean(batch, k3), 5);
    expect(g.clipfrac).toBeCloseTo(mean(batch, (k) => (clipped(k) * batch.advantages[k]! < rho(k) * batch.advantages[k]! ? 1 : 0)), 6);
    expect(g.approxKl).toBeCloseTo(mean(batch, (k) => rho(k) - 1 - Math.log(rho(k))), 6);
    // The two aggregations differ on this batch (rows of 4, 1 and 0 trained tokens).
    expect(Math.abs(sampleMean(batch, obj) - tokenMean(batch, obj))).toBeGreaterThan(0.05);
  });

  it('sample-mean: the gradient matches finite differences of its loss', async () => {
    const e = await engine('sample-mean');
    const batch = threeRows([[0.5, -1, 2, 0.25], [1.5], []]);
    const weights = randomLora(e.specs, LORA.r, 7);
    // old fixed at the policy's log-probs (in-step old would hold the loss's value at −mean A).
    batch.oldLogprobs = await e.policyLogprobs(batch, weights);
    const at = await e.gradients(batch, weights);
    const loss = async (w: LoraWeights) => (await e.gradients(batch, w)).loss;
    const gNorm = Math.sqrt(dot(at.grads, at.grads));
    expect(gNorm).toBeGreaterThan(1e-3);
    const h = 1e-2;
    for (const d of [scaled(at.grads, 1 / gNorm), randomDirection(weights, 8), randomDirection(weights, 9)]) {
      const fd = ((await loss(axpy(weights, d, h))) - (await loss(axpy(weights, d, -h)))) / (2 * h);
      expect(Math.abs(fd - dot(at.grads, d))).toBeLessThan(2e-3 * gNorm + 2e-5);
    }
  });

  it('sample-mean is token-mean reweighted: a row of one token weighs as much as the row of four', async () => {
    // With in-step old the gradient is −Σ_k w_k·A_k·∇logp_k. Rows 0 and 1 swapped in weight:
    // under token-mean row 1's lone token has 1/5 of the weight, under sample-mean 1/3.
    const batch = threeRows([[0, 0, 0, 0], [1], []]);
    batch.oldFromPolicy = Float32Array.from(batch.responseMask);
    const w = randomLora((await engine('token-mean')).specs, LORA.r, 11);
    const token = await (await engine('token-mean')).gradients(batch, w);
    const sample = await (await engine('sample-mean')).gradients(batch, w);
    for (const [key, g] of token.grads) {
      const s = sample.grads.get(key)!;
      g.forEach((v, i) => expect(s[i]!).toBeCloseTo((v * 5) / 3, 5));
    }
  });
});
