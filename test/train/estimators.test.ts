// The advantage estimators of docs/design.md §Advantage estimators, one batch through
// trainBatch (src-main/train/ppo-batch.ts) on a tiny Qwen3, against a float64 reference
// written here from the formulas: GAE as the explicit sum A_i = Σ_k (γλ)^(k−i)·δ_k rather
// than the recursion, returns, GRPO's group statistics, normalisation, the clipped policy
// loss, the value loss, the total loss, approx KL, clip fraction, drift and explained
// variance. The update itself is checked against the step's own gradient of a batch built
// from the reference's old, advantages and returns, so a wrong advantage anywhere shows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { PpoSettings } from '../../src-shared/rollout.js';
import { PPO_DEFAULTS } from '../../src-shared/rollout.js';
import { padBatch, responseValues, type TrainRow } from '../../src-main/train/batches.js';
import { trainBatch } from '../../src-main/train/ppo-batch.js';
import { grpoAdvantages, informativeRows } from '../../src-main/train/grpo-gae.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { emptyState } from '../../src-main/train/step-optimizer.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import { splitValueHead, withValueHead, VALUE_HEAD_BIAS, VALUE_HEAD_WEIGHT, type ValueHead } from '../../src-main/train/value-head.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, lossConfig, randomLora, sgd } from './step-helpers.js';

const HIDDEN = 16;
const LR = 0.01;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-estimators-'));
let dir: string;
let vocab: number;
const engines: TrainStepEngine[] = [];
beforeAll(() => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 31, hiddenSize: HIDDEN, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
});
afterAll(async () => {
  for (const e of engines) await e.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function engine(gae: boolean): Promise<TrainStepEngine> {
  const e = await TrainStepEngine.create(dir, {
    lora: LORA, loss: lossConfig('rl'), optimizer: sgd(LR, 0), device: 'cpu', value: gae ? { clip: 0.2, coef: 0.5 } : undefined,
  });
  engines.push(e);
  return e;
}

/** Four rows of two groups: one with token rewards, one with a response mask, two with rollout old. */
function makeRows(seed: number): TrainRow[] {
  const rand = seededRandom(seed);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * (vocab - 3)));
  return [
    { inputIds: ids(9), responseStart: 5, reward: 1, group: 'a', origin: 'r0' },
    { inputIds: ids(7), responseStart: 3, reward: -0.5, rewards: [{ at: 4, r: 0.5 }, { at: 6, r: -1 }], group: 'a', origin: 'r1' },
    { inputIds: ids(8), responseStart: 4, reward: 0.5, responseMask: [1, 0, 1, 1], group: 'b', origin: 'r2' },
    { inputIds: ids(6), responseStart: 2, reward: 2, group: 'b', origin: 'r3' },
  ];
}

function randomValueHead(seed: number): ValueHead {
  const rand = seededRandom(seed);
  return new Map([[VALUE_HEAD_WEIGHT, Float32Array.from({ length: HIDDEN }, () => 0.6 * (rand() - 0.5))], [VALUE_HEAD_BIAS, Float32Array.of(0.1)]]);
}

// ── the float64 reference ──────────────────────────────────────────────────────────────

interface Token { row: number; i: number; logp: number; old: number; v: number; oldFromRow: boolean }

const trainedIdx = (row: TrainRow) => Array.from({ length: row.inputIds.length - row.responseStart }, (_, i) => i).filter((i) => !row.responseMask || row.responseMask[i]);

function tokenReward(row: TrainRow, i: number, last: number): number {
  if (row.rewards) return row.rewards.filter((x) => x.at === row.responseStart + i).reduce((s, x) => s + x.r, 0);
  return i === last ? row.reward : 0;
}

function stats(xs: number[]): { mean: number; std: number } {
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  return { mean, std: Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / xs.length) };
}

/** Per-row maps i → A and i → R, from the estimator's formula. */
function referenceAdvantages(rows: TrainRow[], ppo: PpoSettings, values: number[][]): { A: Map<number, number>[]; R: Map<number, number>[] } {
  const A = rows.map(() => new Map<number, number>()), R = rows.map(() => new Map<number, number>());
  rows.forEach((row, b) => {
    const idx = trainedIdx(row);
    if (ppo.advantage === 'reward') idx.forEach((i) => A[b]!.set(i, row.reward));
    if (ppo.advantage === 'grpo') {
      // The group's std with Bessel's correction (÷ n − 1), as TRL and OpenClaw-RL (issue 33 item 5;
      // it was the population std before, a deliberate change).
      const rewards = rows.filter((r) => r.group === row.group).map((r) => r.reward);
      const g = stats(rewards);
      const sampleStd = g.std * Math.sqrt(rewards.length / (rewards.length - 1));
      idx.forEach((i) => A[b]!.set(i, ppo.grpoStd ? (row.reward - g.mean) / (sampleStd + 1e-6) : row.reward - g.mean));
    }
    if (ppo.advantage === 'gae') {
      const V = idx.map((i) => values[b]![i]!);
      const delta = idx.map((i, k) => tokenReward(row, i, idx.at(-1)!) + ppo.gamma * (k + 1 < idx.length ? V[k + 1]! : 0) - V[k]!);
      idx.forEach((i, k) => {
        let a = 0;
        for (let j = k; j < idx.length; j++) a += (ppo.gamma * ppo.lambda) ** (j - k) * delta[j]!;
        A[b]!.set(i, a);
        R[b]!.set(i, a + V[k]!);
      });
    }
  });
  if (ppo.normalizeAdvantages) {
    const s = stats(A.flatMap((m) => [...m.values()]));
    for (const m of A) for (const [i, a] of m) m.set(i, (a - s.mean) / (s.std + 1e-8));
  }
  return { A, R };
}

function referenceMetrics(tokens: Token[], A: Map<number, number>[], R: Map<number, number>[], gae: boolean) {
  let obj = 0, kl = 0, clipped = 0, vl = 0, drift = 0, driftN = 0;
  for (const t of tokens) {
    const a = A[t.row]!.get(t.i)!;
    const rho = Math.exp(t.logp - t.old);
    const clip = Math.min(Math.max(rho, 0.8), 1.28);
    obj += Math.min(rho * a, clip * a);
    kl += rho - 1 - Math.log(rho);
    if (clip * a < rho * a) clipped++;
    if (gae) {
      // At the first update V = V_old, so the clipped term equals the unclipped one.
      const r = R[t.row]!.get(t.i)!;
      const vClipped = t.v + Math.min(Math.max(t.v - t.v, -0.2), 0.2);
      vl += Math.max((t.v - r) ** 2, (vClipped - r) ** 2);
    }
    if (t.oldFromRow) {
      drift += Math.abs(t.logp - t.old);
      driftN++;
    }
  }
  const n = tokens.length;
  const valueLoss = 0.5 * vl / n;
  const returns = tokens.map((t) => R[t.row]!.get(t.i) ?? 0);
  const ev = gae ? 1 - stats(tokens.map((t, k) => returns[k]! - t.v)).std ** 2 / stats(returns).std ** 2 : undefined;
  return {
    loss: -obj / n + (gae ? 0.5 * valueLoss : 0), approxKl: kl / n, clipfrac: clipped / n, valueLoss: gae ? valueLoss : undefined,
    drift: drift / driftN, explainedVariance: ev, advMean: tokens.reduce((s, t) => s + A[t.row]!.get(t.i)!, 0) / n, tokens: n,
  };
}

// ── the cases ──────────────────────────────────────────────────────────────────────────

const CASES: { name: string; ppo: Partial<PpoSettings> }[] = [
  { name: 'reward (one update, in-step old)', ppo: { advantage: 'reward' } },
  { name: 'reward with --normalize-advantages', ppo: { advantage: 'reward', normalizeAdvantages: true } },
  { name: 'grpo', ppo: { advantage: 'grpo' } },
  { name: 'grpo with --grpo-std', ppo: { advantage: 'grpo', grpoStd: true } },
  { name: 'gae (γ 0.9, λ 0.8)', ppo: { advantage: 'gae', gamma: 0.9, lambda: 0.8 } },
  { name: 'gae, normalised', ppo: { advantage: 'gae', normalizeAdvantages: true } },
];

describe('grpo by hand (issue 33 item 5: Bessel-corrected group std, equal-reward groups dropped)', () => {
  const row = (reward: number, group: string): TrainRow => ({ inputIds: [1, 2, 3], responseStart: 1, reward, group, origin: `${group}:${reward}` });
  it('divides by the sample std of the group (÷ n − 1), as TRL and OpenClaw-RL', () => {
    // Group a: rewards 1 and −0.5, mean 0.25, sample std 1.5/√2 = 1.0606601717798212 (population: 0.75).
    const rows = [row(1, 'a'), row(-0.5, 'a'), row(0.5, 'b'), row(2, 'b'), row(1, 'c'), row(0, 'c'), row(-1, 'c')];
    const a = grpoAdvantages(rows, rows, true);
    expect(a[0]).toBeCloseTo(0.7071061145205095, 12); // 0.75 / (1.0606601717798212 + 1e-6)
    expect(a[1]).toBeCloseTo(-0.7071061145205095, 12);
    expect(a[2]).toBeCloseTo(-0.7071061145205095, 12); // group b: mean 1.25, the same spread
    // Group c: 1, 0, −1: mean 0, sample std 1 (population 0.8165): A = ±1/(1 + 1e-6), 0.
    expect(a.slice(4)).toEqual([1 / (1 + 1e-6), 0, -1 / (1 + 1e-6)]);
    // Without --grpo-std only the mean counts.
    expect(grpoAdvantages(rows, rows, false).slice(0, 2)).toEqual([0.75, -0.75]);
  });
  it('a group whose rewards are all equal, or of one row, carries no signal: its rows leave the step', () => {
    const rows = [row(1, 'same'), row(1, 'same'), row(1, 'mixed'), row(-1, 'mixed'), row(1, 'alone')];
    expect(grpoAdvantages(rows, rows, true).slice(0, 2)).toEqual([0, 0]);
    expect(informativeRows(rows, rows).map((r) => r.origin)).toEqual(['mixed:1', 'mixed:-1']);
    // The groups are read over the pool, not the batch: a batch holding one row of a mixed group keeps it.
    expect(informativeRows([rows[2]!], rows).map((r) => r.origin)).toEqual(['mixed:1']);
  });
});

describe.each(CASES)('$name: one step against the float64 reference', ({ ppo: overrides }) => {
  it('metrics and the update match', async () => {
    const ppo: PpoSettings = { ...PPO_DEFAULTS, ...overrides };
    const gae = ppo.advantage === 'gae';
    const e = await engine(gae);
    const weights = randomLora(e.specs, LORA.r, 5);
    const valueHead = gae ? randomValueHead(6) : undefined;
    const params = withValueHead(weights, valueHead);
    const rows = makeRows(7);
    const batch = padBatch(rows);
    const T = batch.seqLen;
    const start = gae ? await e.policyValues(batch, params) : { logprobs: await e.policyLogprobs(batch, weights), values: new Float32Array(batch.batch * T) };
    // Rows 0 and 2 bring rollout log-probs, ρ = e^±0.5 from the policy's, so some tokens clip.
    for (const b of [0, 2]) rows[b]!.oldLogprobs = Array.from(responseValues(start.logprobs, T, b, rows[b]!), (lp, i) => Math.min(0, lp + (i % 2 ? 0.5 : -0.5)));

    const values = rows.map((row, b) => Array.from(responseValues(start.values, T, b, row)));
    const { A, R } = referenceAdvantages(rows, ppo, values);
    const tokens: Token[] = rows.flatMap((row, b) => trainedIdx(row).map((i) => {
      const logp = responseValues(start.logprobs, T, b, row)[i]!;
      return { row: b, i, logp, old: row.oldLogprobs?.[i] ?? logp, v: values[b]![i]!, oldFromRow: row.oldLogprobs !== undefined };
    }));
    const want = referenceMetrics(tokens, A, R, gae);

    const result = await trainBatch({
      // Copies: the update is written into the arrays given, and `params` stays the start for the reference.
      step: e, rows, weights: cloneWeights(weights), optimizer: emptyState(), valueHead: valueHead && cloneWeights(valueHead), random: seededRandom(1),
      settings: { method: 'rl', wOpd: 1, wRl: 1, klBeta: 0, ppo },
    });
    const m = result.metrics;
    expect(m.updates).toBe(1);
    expect(m.tokens).toBe(want.tokens);
    expect(m.loss).toBeCloseTo(want.loss, 5);
    expect(m.approxKl).toBeCloseTo(want.approxKl, 6);
    expect(m.approxKl).toBeGreaterThan(1e-3);
    expect(m.clipfrac).toBeCloseTo(want.clipfrac, 6);
    expect(m.clipfrac).toBeGreaterThan(0);
    expect(m.advMean).toBeCloseTo(want.advMean, 5);
    expect(m.drift).toBeCloseTo(want.drift, 5);
    expect(m.rewardMean).toBeCloseTo(rows.reduce((s, r) => s + r.reward, 0) / rows.length, 10);
    if (gae) {
      expect(m.valueLoss).toBeCloseTo(want.valueLoss!, 5);
      expect(m.explainedVariance).toBeCloseTo(want.explainedVariance!, 4);
    } else {
      expect(m.valueLoss).toBeUndefined();
      expect(m.explainedVariance).toBeUndefined();
    }

    // The update is −lr × the step's gradient on a batch of the reference's old, A and R.
    const ref = padBatch(rows);
    ref.oldLogprobs = new Float32Array(batch.batch * T);
    ref.advantages = new Float32Array(batch.batch * T);
    if (gae) {
      ref.returns = new Float32Array(batch.batch * T);
      ref.valuesOld = start.values;
    }
    for (const t of tokens) {
      const k = t.row * T + rows[t.row]!.responseStart + t.i;
      ref.oldLogprobs[k] = t.old;
      ref.advantages[k] = A[t.row]!.get(t.i)!;
      if (gae) ref.returns![k] = R[t.row]!.get(t.i)!;
    }
    const g = await e.gradients(ref, params);
    const next = withValueHead(result.weights, result.valueHead);
    let maxStep = 0, maxErr = 0;
    for (const [key, p] of params) {
      const grad = g.grads.get(key)!, q = next.get(key)!;
      p.forEach((x, i) => {
        maxStep = Math.max(maxStep, Math.abs(LR * grad[i]!));
        maxErr = Math.max(maxErr, Math.abs(q[i]! - (x - LR * grad[i]!)));
      });
    }
    expect(maxStep).toBeGreaterThan(1e-4);
    expect(maxErr).toBeLessThan(1e-3 * maxStep + 1e-7);
    if (gae) {
      const { valueHead: moved } = splitValueHead(next);
      expect(moved!.get(VALUE_HEAD_BIAS)![0]).not.toBe(valueHead!.get(VALUE_HEAD_BIAS)![0]);
    }
  });
});
