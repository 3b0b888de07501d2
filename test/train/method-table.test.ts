// Adding a method is one method record plus its loss record (issue 28): this file adds
// REINFORCE, loss = −Σ mask·A·logp / Σ mask with a metric of its own (the mean log-prob of the
// trained tokens), by registering the two records here and touching no other file. The step's
// gradient of that loss is checked against finite differences and its values against their
// formulas, and the offline trainer runs two steps with it, logging its metric instead of
// PPO-clip's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { int, type GraphBuilder } from '../../src-main/graph/ir.js';
import { lossRecord, registerLoss } from '../../src-main/train/losses.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { train } from '../../src-main/train/trainer.js';
import type { LoraWeights, StepBatch } from '../../src-main/train/training-step.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import { methodLoss, methodRecord, registerMethod, TRAIN_METHODS } from '../../src-shared/training-methods.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, axpy, dot, randomDirection, randomLora, scaled, sgd, tinyBatch } from './step-helpers.js';

const sumAll = (b: GraphBuilder, x: string) => b.op('ReduceSum', [x], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;

// ── the two records ─────────────────────────────────────────────────────────────────────

registerLoss({
  name: 'reinforce',
  help: 'REINFORCE: −A·log p, token mean over the batch.',
  metrics: [{
    key: 'meanLogprob', field: 'mean_logprob', chart: 'mean-logprob', title: 'Mean log-prob',
    help: 'Token mean of the trained tokens’ log-probs.', show: (v) => `logp ${v.toFixed(3)}`,
  }],
  inputs: ['logprobs', 'mask', 'advantages'],
  build(b, x) {
    const tokens = sumAll(b, x.mask);
    const denom = b.max(tokens, b.scalar(1));
    const mean = (v: string) => b.div(sumAll(b, b.mul(x.mask, v)), denom);
    return { loss: b.neg(mean(b.mul(x.advantages, x.logprobs))), tokens, metrics: { meanLogprob: mean(x.logprobs) } };
  },
});

const REINFORCE = registerMethod({
  name: 'reinforce', label: 'REINFORCE', help: 'Plain policy gradient on the ±1 rewards.',
  uses: { reward: true, hint: false }, weighted: false, defaults: { epsHigh: 0.28 }, loss: 'reinforce',
});

// ── checks ──────────────────────────────────────────────────────────────────────────────

let root: string;
let modelDir: string;
let vocab: number;
beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-method-table-'));
  modelDir = path.join(root, 'model');
  writeTinyModel(modelDir, { family: 'qwen3', seed: 21, hiddenSize: 16, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2 });
  vocab = JSON.parse(fs.readFileSync(path.join(modelDir, 'config.json'), 'utf8')).vocab_size as number;
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** Σ mask·f / Σ mask over the batch's grid. */
function maskedMean(batch: StepBatch, f: (k: number) => number): number {
  let sum = 0, n = 0;
  batch.responseMask.forEach((m, k) => {
    if (m === 0) return;
    sum += f(k);
    n++;
  });
  return sum / n;
}

/** Every source file of the app: main process, shared code, renderer. */
function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const file = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(file);
    return /\.(ts|vue)$/.test(e.name) ? [file] : [];
  });
}

describe('the method table', () => {
  it('is the only place that tells methods apart: no source file compares a method by name', () => {
    // What differs between methods is a field of their records (src-shared/training-methods.ts);
    // a comparison with a name would send every other method, a new one included, down one branch.
    const byName = /[!=]==\s*'(rl|opd|combine)'|'(rl|opd|combine)'\s*[!=]==|case\s+'(rl|opd|combine)'/;
    const found = ['src-main', 'src-shared', 'src-renderer/src'].flatMap(sourceFiles).flatMap((file) =>
      fs.readFileSync(file, 'utf8').split('\n').flatMap((line, i) => (byName.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])));
    expect(found).toEqual([]);
  });
});

describe('a method added by one method record and one loss record', () => {
  it('joins the table that --method, the contract and the pages read', () => {
    expect(TRAIN_METHODS).toContain(REINFORCE);
    expect(methodRecord(REINFORCE).label).toBe('REINFORCE');
    expect(methodLoss(REINFORCE).metrics.map((m) => m.field)).toEqual(['mean_logprob']);
    expect(lossRecord('reinforce').inputs).not.toContain('ref');
  });

  it('its step computes −A·logp and its own metric, with gradients that match finite differences', async () => {
    const engine = await TrainStepEngine.create(modelDir, { lora: LORA, loss: { method: REINFORCE, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 }, optimizer: sgd(0.1), device: 'cpu' });
    try {
      const batch = tinyBatch(REINFORCE, vocab, 5);
      // Advantages of both signs and sizes, so a sign or scale error in the loss shows.
      const rand = seededRandom(6);
      batch.advantages = Float32Array.from(batch.responseMask, (m) => (m ? 2 * rand() - 1 : 0));
      const weights = randomLora(engine.specs, LORA.r, 7);
      const at = await engine.gradients(batch, weights);

      // The values: the loss and the metric are the formulas of the log-probs the step returns;
      // PPO-clip's metrics are not reported, REINFORCE's is.
      expect(at.tokens).toBe(8);
      expect(at.loss).toBeCloseTo(-maskedMean(batch, (k) => batch.advantages[k]! * at.logprobs[k]!), 6);
      expect(at.meanLogprob).toBeCloseTo(maskedMean(batch, (k) => at.logprobs[k]!), 6);
      expect(at.meanLogprob as number).toBeLessThan(0);
      expect(at.clipfrac).toBeUndefined();
      expect(at.approxKl).toBeUndefined();

      // The gradient: directional derivatives along itself and two random directions.
      const loss = async (w: LoraWeights) => (await engine.gradients(batch, w)).loss;
      const gNorm = Math.sqrt(dot(at.grads, at.grads));
      expect(gNorm).toBeGreaterThan(1e-3);
      const h = 1e-2;
      for (const d of [scaled(at.grads, 1 / gNorm), randomDirection(weights, 8), randomDirection(weights, 9)]) {
        const fd = ((await loss(axpy(weights, d, h))) - (await loss(axpy(weights, d, -h)))) / (2 * h);
        expect(Math.abs(fd - dot(at.grads, d))).toBeLessThan(2e-3 * gNorm + 2e-5);
      }

      // One SGD step moves the weights by −lr·∇ and reports the metric under its key.
      const { weights: next, metrics } = await engine.step(batch, cloneWeights(weights), { step: 0, m: new Map(), v: new Map() });
      expect(metrics.meanLogprob).toBeCloseTo(at.meanLogprob as number, 6);
      const [key, w0] = [...weights][0]!;
      expect(next.get(key)![0]).toBeCloseTo(w0[0]! - 0.1 * at.grads.get(key)![0]!, 6);
    } finally {
      await engine.close();
    }
  });

  it('trains two steps offline, and trainer_log.jsonl carries its metric instead of PPO-clip’s', async () => {
    // Every row rewarded +1: then A = 1 on every trained token and the loss is −mean_logprob exactly.
    const rand = seededRandom(10);
    const row = () => ({ input_ids: Array.from({ length: 10 }, () => Math.floor(rand() * (vocab - 3))), response_start: 6, reward: 1 });
    const dataFile = path.join(root, 'data.jsonl');
    fs.writeFileSync(dataFile, Array.from({ length: 4 }, () => JSON.stringify(row())).join('\n') + '\n');
    const result = await train({
      modelDir, outDir: path.join(root, 'run'), dataFile, method: REINFORCE, steps: 2, batchSize: 2, lr: 1e-2, seed: 1, loraR: 4, loraAlpha: 8, saveEvery: 0,
    });
    expect(result).toMatchObject({ status: 'finished', steps: 2 });
    const log = readLog(result.logFile);
    expect(log).toHaveLength(2);
    for (const line of log) {
      const fields = line as unknown as Record<string, number>;
      expect(Object.keys(line)).not.toContain('clipfrac');
      expect(Object.keys(line)).not.toContain('approx_kl');
      // The metric sits where a loss's metrics go: after the advantages, before the gradient norm.
      expect(Object.keys(line).slice(Object.keys(line).indexOf('teacher_student_gap') + 1, Object.keys(line).indexOf('grad_norm'))).toEqual(['mean_logprob']);
      expect(fields.mean_logprob).toBeLessThan(0);
      expect(line.loss).toBeCloseTo(-fields.mean_logprob!, 5);
      expect(line.grad_norm).toBeGreaterThan(0);
    }
  });
});
