// Gradient accumulation (src-main/train/micro-batch.ts; docs/design.md §Micro-batches): a batch of
// 4 rows of different lengths (so each micro-batch is cut to its own longest row) run as 1 × 4,
// 2 × 2 and 4 × 1 gives the same loss (1e-6 relative), metrics, LoRA gradients and updated
// weights (1e-5 relative) for rl, opd and combine under token-mean and sample-mean, with rollout
// old log-probs (so clipfrac and approx_kl are not 0) and the KL penalty; with a value head and
// top-K distillation too; and the forward passes (policy, values, the teacher's top K) give the
// same grids; and whole runs (PPO epochs over minibatches, the teacher's pass) give the same
// adapter. The memory side (the micro-batch the estimate chooses for a HINDSIGHT_MEMORY_BUDGET,
// and the one-line refusal when not even one row fits) is in train-memory.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { TrainStepOptions } from '../../src-main/train/step-options.js';
import { emptyOptimizerState, train } from '../../src-main/train/trainer.js';
import { readAdapter } from '../../src-main/train/peft-read.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import type { LoraWeights, LossAgg, OptimizerState, StepBatch, StepResult, TrainMethod } from '../../src-main/train/training-step.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import { zeroValueHead } from '../../src-main/train/value-head.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, adamw, lossConfig, randomLora } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-micro-batch-'));
let dir: string;
let vocab: number;
const engines: TrainStepEngine[] = [];
beforeAll(() => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 31, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
});
afterAll(async () => {
  for (const e of engines) await e.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function engine(options: Omit<TrainStepOptions, 'lora' | 'optimizer' | 'device'>): Promise<TrainStepEngine> {
  const e = await TrainStepEngine.create(dir, { lora: LORA, optimizer: adamw(1e-2, 0.5), device: 'cpu', ...options });
  engines.push(e);
  return e;
}

/** Rows of 11, 6, 9 and 4 real tokens (right-padded to 11), the last 5, 3, 6 and 2 of them the reply. */
const LENGTHS = [11, 6, 9, 4], REPLIES = [5, 3, 6, 2];

/**
 * The batch of `method`: rl ±1 rewards on every reply token; opd the teacher's log-probs (its
 * advantage, teacher − old, made in the step); combine both. Rows 0 and 2 carry rollout old
 * log-probs a little off the policy's (so ratios clip), rows 1 and 3 take old in the step.
 */
function batchOf(method: TrainMethod, policy: Float32Array | null, seed: number): StepBatch {
  const rand = seededRandom(seed);
  const B = LENGTHS.length, T = Math.max(...LENGTHS), n = B * T;
  const batch: StepBatch = {
    batch: B, seqLen: T,
    inputIds: new BigInt64Array(n), attentionMask: new BigInt64Array(n), positionIds: new BigInt64Array(n),
    responseMask: new Float32Array(n), oldLogprobs: new Float32Array(n), advantages: new Float32Array(n),
    oldFromPolicy: new Float32Array(n), teacherLogprobs: new Float32Array(n), opdWeights: new Float32Array(n),
  };
  for (let r = 0; r < B; r++) {
    for (let t = 0; t < LENGTHS[r]!; t++) {
      const k = r * T + t;
      batch.inputIds[k] = BigInt(Math.floor(rand() * (vocab - 3)));
      batch.attentionMask[k] = 1n;
      batch.positionIds[k] = BigInt(t);
      if (t < LENGTHS[r]! - REPLIES[r]!) continue;
      batch.responseMask[k] = 1;
      if (method !== 'opd') batch.advantages[k] = r % 2 ? -1 : 1;
      if (method !== 'rl') {
        batch.teacherLogprobs![k] = -1 - 2 * rand();
        batch.opdWeights![k] = 1;
      }
      if (r % 2 === 0 && policy) batch.oldLogprobs[k] = policy[k]! + 0.6 * (rand() - 0.5);
      else batch.oldFromPolicy![k] = 1;
    }
  }
  return batch;
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);

/** ‖a − b‖ / ‖b‖ over every tensor. */
function relativeNorm(a: LoraWeights, b: LoraWeights): number {
  let diff = 0, norm = 0;
  for (const [key, v] of b) {
    const w = a.get(key)!;
    for (let i = 0; i < v.length; i++) {
      diff += (w[i]! - v[i]!) ** 2;
      norm += v[i]! ** 2;
    }
  }
  return Math.sqrt(diff / norm);
}

/** The largest element-wise difference, relative to the largest element. */
function maxRelative(a: Float32Array, b: Float32Array): number {
  let diff = 0, size = 0;
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
    size = Math.max(size, Math.abs(b[i]!));
  }
  return diff / Math.max(size, 1e-12);
}

/** The one-pass result against a micro-batched one: loss 1e-6, gradients and new weights 1e-5 relative; the same metrics and grids. */
function expectSameStep(got: StepResult, want: StepResult, what: string): void {
  expect(relative(got.metrics.loss, want.metrics.loss), `${what} loss ${got.metrics.loss} vs ${want.metrics.loss}`).toBeLessThan(1e-6);
  expect(got.metrics.tokens, what).toBe(want.metrics.tokens);
  for (const key of ['clipfrac', 'approxKl', 'valueLoss', 'topkKl'] as const) {
    if (want.metrics[key] === undefined) continue;
    expect(Math.abs(got.metrics[key]! - want.metrics[key]!), `${what} ${key}`).toBeLessThan(1e-6 * Math.max(1, Math.abs(want.metrics[key]!)));
  }
  expect(relative(got.metrics.gradNorm, want.metrics.gradNorm), `${what} grad norm`).toBeLessThan(1e-5);
  expect(relativeNorm(got.grads!, want.grads!), `${what} gradients`).toBeLessThan(1e-5);
  for (const [key, g] of want.grads!) expect(maxRelative(got.grads!.get(key)!, g), `${what} ${key}`).toBeLessThan(1e-5);
  expect(relativeNorm(got.weights, want.weights), `${what} weights`).toBeLessThan(1e-5);
  expect(maxRelative(got.logprobs, want.logprobs), `${what} log-probs`).toBeLessThan(1e-5);
  if (want.values) expect(maxRelative(got.values!, want.values), `${what} values`).toBeLessThan(1e-5);
}

const MICRO = [4, 2, 1] as const;

/** A step's own copy of the start (a step writes its update into the arrays it is given), so steps run side by side from the same one. */
const fromStart = (weights: LoraWeights): [LoraWeights, OptimizerState] => [cloneWeights(weights), emptyOptimizerState(weights, 'adamw')];

describe('a batch of 4 as 1 × 4, 2 × 2 and 4 × 1: the same step', () => {
  for (const lossAgg of ['token-mean', 'sample-mean'] as LossAgg[]) {
    for (const method of ['rl', 'opd', 'combine'] as TrainMethod[]) {
      it(`${method}, ${lossAgg}, with rollout old and the KL penalty`, async () => {
        const steps = await Promise.all(MICRO.map((microBatch) => engine({ loss: { ...lossConfig(method, 0.1), lossAgg }, microBatch })));
        const weights = randomLora(steps[0]!.specs, LORA.r, 5);
        const batch = batchOf(method, await steps[0]!.policyLogprobs(batchOf(method, null, 9), weights), 9);
        batch.refLogprobs = await steps[0]!.baseLogprobs(batch);
        const [whole, ...split] = await Promise.all(steps.map((s) => s.step(batch, ...fromStart(weights))));
        expect(whole!.metrics.clipfrac).toBeGreaterThan(0);
        expect(whole!.metrics.approxKl).toBeGreaterThan(0);
        split.forEach((r, i) => expectSameStep(r, whole!, `${method} ${lossAgg} micro-batch ${MICRO[i + 1]}`));
      });
    }
  }

  it('with a value head (gae): the value loss and the values too', async () => {
    for (const lossAgg of ['token-mean', 'sample-mean'] as LossAgg[]) {
      const steps = await Promise.all(MICRO.map((microBatch) => engine({ loss: { ...lossConfig('rl'), lossAgg }, value: { clip: 0.2, coef: 0.5 }, microBatch })));
      const head = zeroValueHead(16);
      head.get('value_head.weight')!.forEach((_, i, w) => (w[i] = 0.1 * Math.sin(i + 1)));
      const weights = new Map([...randomLora(steps[0]!.specs, LORA.r, 6), ...head]);
      const batch = batchOf('rl', null, 4);
      const scored = await steps[0]!.policyValues(batch, weights);
      batch.valuesOld = scored.values;
      batch.returns = Float32Array.from(batch.responseMask, (m, k) => (m ? 0.5 + 0.1 * (k % 5) : 0));
      const [whole, ...split] = await Promise.all(steps.map((s) => s.step(batch, ...fromStart(weights))));
      expect(whole!.metrics.valueLoss).toBeGreaterThan(0);
      split.forEach((r, i) => expectSameStep(r, whole!, `gae ${lossAgg} micro-batch ${MICRO[i + 1]}`));
      // The forward pass a batch starts from (old and V_old) gives the same grid at every real
      // token (a micro-batch is cut to its longest row, so what a padding cell holds differs).
      const real = (grid: Float32Array) => grid.filter((_, k) => batch.attentionMask[k] === 1n && k % batch.seqLen !== 0);
      for (const s of steps.slice(1)) {
        const got = await s.policyValues(batch, weights);
        expect(maxRelative(real(got.logprobs), real(scored.logprobs))).toBeLessThan(1e-5);
        expect(maxRelative(real(got.values), real(scored.values))).toBeLessThan(1e-5);
      }
    }
  });

  it("with top-K distillation: the teacher's top K and the step", async () => {
    const K = 3;
    for (const lossAgg of ['token-mean', 'sample-mean'] as LossAgg[]) {
      const steps = await Promise.all(MICRO.map((microBatch) => engine({ loss: { ...lossConfig('combine'), lossAgg, opdTopK: K }, microBatch })));
      const weights = randomLora(steps[0]!.specs, LORA.r, 8);
      const batch = batchOf('combine', null, 6);
      const [teacher, ...others] = await Promise.all(steps.map((s) => s.baseTopK(batch, K)));
      for (const t of others) {
        expect(maxRelative(t.logprobs, teacher!.logprobs)).toBeLessThan(1e-5);
        expect(maxRelative(t.topK.logprobs, teacher!.topK.logprobs)).toBeLessThan(1e-5);
        expect(Array.from(t.topK.indices)).toEqual(Array.from(teacher!.topK.indices));
      }
      const shifted = Float32Array.from(teacher!.topK.logprobs, (v, i) => (v === 0 ? 0 : v - 0.05 * (i % 3)));
      // Rows 0 and 1 distil (row 1 at half weight), rows 2 and 3 do not: the KL's mean is over the distilled tokens of the whole batch.
      const distilled: StepBatch = {
        ...batch, teacherTopK: { k: K, indices: teacher!.topK.indices, logprobs: shifted },
        distillWeights: Float32Array.from(batch.responseMask, (m, k) => (m && k < 2 * batch.seqLen ? (k < batch.seqLen ? 1 : 0.5) : 0)),
      };
      const [whole, ...split] = await Promise.all(steps.map((s) => s.step(distilled, ...fromStart(weights))));
      expect(whole!.metrics.topkKl).toBeGreaterThan(0);
      split.forEach((r, i) => expectSameStep(r, whole!, `top-K ${lossAgg} micro-batch ${MICRO[i + 1]}`));
    }
  });
});

describe('a whole run with micro-batches', () => {
  it('combine with PPO epochs over minibatches: the same adapter as one pass per update', async () => {
    // Four rows of different lengths, each with a hinted teacher (its own context, the same reply).
    const rand = seededRandom(12);
    const ids = (n: number) => Array.from({ length: n }, () => 3 + Math.floor(rand() * (vocab - 3)));
    const data = path.join(root, 'rows.jsonl');
    fs.writeFileSync(data, LENGTHS.map((length, i) => {
      const context = ids(length - REPLIES[i]!), reply = ids(REPLIES[i]!), hint = ids(3);
      return JSON.stringify({
        input_ids: [...context, ...reply], response_start: context.length, reward: i % 2 ? -1 : 1,
        teacher_input_ids: [...context, ...hint, ...reply], teacher_response_start: context.length + hint.length,
      });
    }).join('\n') + '\n');
    const run = (name: string, microBatch?: number) => train({
      modelDir: dir, outDir: path.join(root, name), dataFile: data, method: 'combine', steps: 2, batchSize: 4, loraR: 4, loraAlpha: 8, lr: 1e-2,
      ppoEpochs: 2, minibatch: 2, saveEvery: 0, ...(microBatch !== undefined ? { microBatch } : {}),
    });
    const [whole, split] = [await run('whole'), await run('split', 1)];
    expect([whole.status, split.status]).toEqual(['finished', 'finished']);
    // Eight AdamW updates (2 steps × 2 epochs × 2 minibatches): each is the same within 1e-5 (above),
    // and AdamW's first updates divide by |g|, so the float noise of the sums grows a little.
    expect(relative(split.last!.loss, whole.last!.loss)).toBeLessThan(1e-4);
    const config = Checkpoint.open(dir).config;
    expect(relativeNorm(readAdapter(split.adapterDir, config).weights, readAdapter(whole.adapterDir, config).weights)).toBeLessThan(1e-4);
  });
});
