// PPO over a batch (src-main/train/ppo-batch.ts, docs/design.md §Advantage estimators) on a
// tiny Qwen3: several epochs against the rows' own old make ρ ≠ 1 after the first update, so
// clip fraction and approx KL become non-zero; minibatches are seeded; a masked response token
// takes no part; GRPO without groups is refused; and approx KL is (ρ − 1) − log ρ.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { PPO_DEFAULTS, type PpoSettings } from '../../src-shared/rollout.js';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { padBatch, responseValues, type TrainRow } from '../../src-main/train/batches.js';
import { minibatchRandom, trainBatch, type TrainBatchInput } from '../../src-main/train/ppo-batch.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { appendPolicyLoss } from '../../src-main/train/step-loss.js';
import { emptyState } from '../../src-main/train/step-optimizer.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import { zeroValueHead } from '../../src-main/train/value-head.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, adamw, lossConfig, randomLora } from './step-helpers.js';

const HIDDEN = 16;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-ppo-batch-'));
let dir: string;
let vocab: number;
let plain: TrainStepEngine, withHead: TrainStepEngine;
beforeAll(async () => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 41, hiddenSize: HIDDEN, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
  const options = { lora: LORA, loss: lossConfig('rl'), optimizer: adamw(0.05, 0), device: 'cpu' as const };
  plain = await TrainStepEngine.create(dir, options);
  withHead = await TrainStepEngine.create(dir, { ...options, value: { clip: 0.2, coef: 0.5 } });
});
afterAll(async () => {
  await plain.close();
  await withHead.close();
  fs.rmSync(root, { recursive: true, force: true });
});

function makeRows(seed: number, n = 4): TrainRow[] {
  const rand = seededRandom(seed);
  return Array.from({ length: n }, (_, b) => {
    const len = 6 + (b % 3);
    return { inputIds: Array.from({ length: len }, () => Math.floor(rand() * (vocab - 3))), responseStart: 3, reward: b % 2 ? -1 : 1, group: `g${b >> 1}`, origin: `row ${b}` };
  });
}

/** The rows' old_logprobs: the policy's own log-probs, as a rollout by this very policy would carry. */
async function withOwnOld(rows: TrainRow[], weights: Map<string, Float32Array>): Promise<TrainRow[]> {
  const batch = padBatch(rows);
  const lp = await plain.policyLogprobs(batch, weights);
  return rows.map((r, b) => ({ ...r, oldLogprobs: Array.from(responseValues(lp, batch.seqLen, b, r)) }));
}

function input(rows: TrainRow[], ppo: Partial<PpoSettings>, extra: Partial<TrainBatchInput> = {}): TrainBatchInput {
  const settings = { method: 'rl' as const, wOpd: 1, wRl: 1, klBeta: 0, ppo: { ...PPO_DEFAULTS, ...ppo } };
  const gae = settings.ppo.advantage === 'gae';
  return {
    step: gae ? withHead : plain, rows, weights: randomLora(plain.specs, LORA.r, 3), optimizer: emptyState(),
    valueHead: gae ? zeroValueHead(HIDDEN) : undefined, settings, random: seededRandom(5), ...extra,
  };
}

// A batch's updates are written into the weights it is given: each run below starts from its own copy.
describe('PPO epochs and minibatches', () => {
  it('with old from the rows, the first update has ρ = 1; later epochs have ρ ≠ 1, so clip fraction and approx KL are non-zero', async () => {
    const weights = randomLora(plain.specs, LORA.r, 3);
    const rows = await withOwnOld(makeRows(1), weights);
    const once = await trainBatch(input(rows, { advantage: 'grpo', ppoEpochs: 1 }, { weights: cloneWeights(weights) }));
    expect(once.metrics.updates).toBe(1);
    expect(once.metrics.drift).toBeLessThan(1e-5); // the same policy produced the old
    expect(once.metrics.approxKl).toBeLessThan(1e-9);
    expect(once.metrics.clipfrac).toBe(0);

    const thrice = await trainBatch(input(rows, { advantage: 'grpo', ppoEpochs: 3 }, { weights: cloneWeights(weights) }));
    expect(thrice.metrics.updates).toBe(3);
    expect(thrice.optimizer.step).toBe(3);
    expect(thrice.metrics.drift).toBe(once.metrics.drift);
    expect(thrice.metrics.approxKl).toBeGreaterThan(1e-3);
    expect(thrice.metrics.clipfrac).toBeGreaterThan(0);
    // The first update is the one-epoch run's: same weights after it, so the later ones differ.
    const first = [...once.weights.values()][1]!, third = [...thrice.weights.values()][1]!;
    expect(first.some((x, i) => x !== third[i])).toBe(true);
  });

  it('minibatches: ⌈rows / M⌉ updates per epoch in a seeded order; the same seed gives the same weights, another seed others', async () => {
    const rows = makeRows(2, 5);
    const a = await trainBatch(input(rows, { advantage: 'grpo', ppoEpochs: 2, minibatch: 2 }, { random: minibatchRandom(7, 0) }));
    expect(a.metrics.updates).toBe(6);
    expect(a.optimizer.step).toBe(6);
    expect(a.metrics.tokens).toBe(rows.reduce((s, r) => s + r.inputIds.length - r.responseStart, 0));
    const again = await trainBatch(input(rows, { advantage: 'grpo', ppoEpochs: 2, minibatch: 2 }, { random: minibatchRandom(7, 0) }));
    const other = await trainBatch(input(rows, { advantage: 'grpo', ppoEpochs: 2, minibatch: 2 }, { random: minibatchRandom(7, 1) }));
    const key = [...a.weights.keys()].at(-1)!;
    expect(again.weights.get(key)).toEqual(a.weights.get(key));
    expect(other.weights.get(key)).not.toEqual(a.weights.get(key));
    // A minibatch of at least the batch is the whole batch: one update per epoch.
    expect((await trainBatch(input(rows, { advantage: 'grpo', minibatch: 9 }))).metrics.updates).toBe(1);
  });

  it('gae over epochs trains the value head and reports value loss and explained variance', async () => {
    const rows = makeRows(3).map((r) => ({ ...r, rewards: [{ at: r.inputIds.length - 2, r: r.reward }] }));
    const r = await trainBatch(input(rows, { advantage: 'gae', ppoEpochs: 2 }));
    expect(r.metrics.updates).toBe(2);
    expect(r.metrics.valueLoss).toBeGreaterThan(0);
    // A zero head predicts nothing: V_old = 0, so R − V_old = R and the explained variance is 0.
    expect(r.metrics.explainedVariance).toBeCloseTo(0, 12);
    expect([...r.valueHead!.values()].some((t) => t.some((x) => x !== 0))).toBe(true);
    expect(r.metrics.drift).toBeUndefined(); // no row brought old_logprobs
  });
});

describe('response_mask', () => {
  it('a masked response token is not trained: its old log-prob changes nothing, and it is not counted', async () => {
    const weights = randomLora(plain.specs, LORA.r, 3);
    const own = await withOwnOld(makeRows(4), weights);
    own[1] = { ...own[1]!, responseMask: [1, 0, 1, 1] };
    const wild = own.map((r, b) => (b === 1 ? { ...r, oldLogprobs: r.oldLogprobs!.map((x, i) => (i === 1 ? -20 : x)) } : r));
    for (const ppo of [{ advantage: 'reward' as const }, { advantage: 'gae' as const, ppoEpochs: 2 }]) {
      const a = await trainBatch(input(own, ppo, { weights: cloneWeights(weights) }));
      const b = await trainBatch(input(wild, ppo, { weights: cloneWeights(weights) }));
      expect(a.metrics.tokens).toBe(own.reduce((s, r) => s + r.inputIds.length - r.responseStart, 0) - 1);
      expect(b.metrics).toEqual(a.metrics);
      for (const [k, w] of a.weights) expect(b.weights.get(k)).toEqual(w);
    }
    expect(padBatch([own[1]!]).responseMask.slice(3)).toEqual(Float32Array.of(1, 0, 1, 1));
  });
});

describe('grpo without groups', () => {
  it('is refused with a one-line error naming a row', async () => {
    const rows = makeRows(5).map((r, b) => (b === 2 ? { ...r, group: undefined } : r));
    await expect(trainBatch(input(rows, { advantage: 'grpo' }))).rejects.toThrow(/^--advantage grpo needs a "group" on every row \(the rows of one context\): 1 of 4 have none, the first row 2$/);
  });
});

describe('approx KL', () => {
  it('is the token mean of (ρ − 1) − log ρ, k3 of KL(old ‖ new), on fixed numbers', async () => {
    const b = new GraphBuilder('kl');
    const [logprobs, old, mask, advantages] = ['logprobs', 'old', 'mask', 'advantages'].map((n) => b.input(n, 'float32', [4]));
    const out = appendPolicyLoss(b, { logprobs: logprobs!, old: old!, mask: mask!, advantages: advantages! }, lossConfig('rl'));
    b.output(b.identityAs(out.approxKl, 'approx_kl'));
    const session = await ort.InferenceSession.create(serializeModel(b.graph));
    const t = (x: number[]) => new ort.Tensor('float32', Float32Array.from(x), [4]);
    // logp − old = 0.5, −0.5, 1, and a masked token.
    const res = await session.run({ logprobs: t([-1, -2, -0.5, -3]), old: t([-1.5, -1.5, -1.5, -9]), mask: t([1, 1, 1, 0]), advantages: t([1, 1, 1, 1]) });
    await session.release();
    const k3 = (d: number) => Math.exp(d) - 1 - d;
    const want = (k3(0.5) + k3(-0.5) + k3(1)) / 3; // 0.3324…
    expect((res.approx_kl!.data as Float32Array)[0]).toBeCloseTo(want, 6);
    // The other direction, exp(old − logp) − (old − logp) − 1, is a different number here.
    expect(Math.abs(want - (k3(-0.5) + k3(0.5) + k3(-1)) / 3)).toBeGreaterThan(0.05);
  });
});
