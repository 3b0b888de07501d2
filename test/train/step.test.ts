// Training-step semantics on a tiny Qwen3: the loss and metrics as docs/design.md §Losses defines them, the
// SGD and AdamW updates (host and in-graph), gradient clipping, PPO clipping, log-prob grids
// against the model core's scorer, and errors on bad input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { checkpointWeights } from '../../src-main/model/decoder.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { TrainStepOptions } from '../../src-main/train/step-options.js';
import { buildTrainGraph, opTypes } from '../../src-main/train/step-graph.js';
import { emptyState } from '../../src-main/train/step-optimizer.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import { hasGradientRule } from '../../src-main/graph/op-table.js';
import type { LoraWeights, OptimizerConfig, OptimizerState, StepBatch } from '../../src-main/train/training-step.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, adamw, dot, lossConfig, randomLora, sgd, tinyBatch } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-step-'));
let dir: string;
let vocab: number;
const engines: TrainStepEngine[] = [];
beforeAll(() => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 21, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
});
afterAll(async () => {
  for (const e of engines) await e.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function engine(overrides: Partial<TrainStepOptions> = {}): Promise<TrainStepEngine> {
  const e = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig('combine'), optimizer: sgd(0.05), device: 'cpu', ...overrides });
  engines.push(e);
  return e;
}

/** A batch whose old log-probs are the policy's own, shifted per token by `shift(i)`. */
async function batchWithOld(e: TrainStepEngine, weights: LoraWeights, shift: (i: number) => number = () => 0): Promise<StepBatch> {
  const batch = tinyBatch('combine', vocab, 5);
  const lp = await e.policyLogprobs(batch, weights);
  batch.oldLogprobs = Float32Array.from(lp, (v, i) => (batch.responseMask[i] ? v + shift(i) : 0));
  return batch;
}

const k3 = (a: number, lp: number) => Math.exp(a - lp) - (a - lp) - 1;

/** AdamW exactly as torch.optim.AdamW writes it, in float64 per element. */
function referenceAdamW(cfg: OptimizerConfig, p: Float32Array, g: Float32Array, m: Float64Array, v: Float64Array, t: number): Float64Array {
  const [b1, b2] = cfg.betas;
  const out = new Float64Array(p.length);
  for (let i = 0; i < p.length; i++) {
    m[i] = b1 * m[i]! + (1 - b1) * g[i]!;
    v[i] = b2 * v[i]! + (1 - b2) * g[i]! * g[i]!;
    const denom = Math.sqrt(v[i]!) / Math.sqrt(1 - b2 ** t) + cfg.eps;
    out[i] = p[i]! * (1 - cfg.lr * cfg.weightDecay) - (cfg.lr / (1 - b1 ** t)) * (m[i]! / denom);
  }
  return out;
}

describe('loss and metrics', () => {
  it('loss, clipfrac and approx KL are the docs/design.md §Losses formulas of the returned log-probs', async () => {
    const e = await engine({ loss: { ...lossConfig('combine'), klBeta: 0.3 } });
    const w = randomLora(e.specs, LORA.r, 3);
    const batch = await batchWithOld(e, w, (i) => ((i * 37) % 11) / 10 - 0.5); // some tokens clipped, some not
    batch.refLogprobs = await e.baseLogprobs(batch);
    const g = await e.gradients(batch, w);
    let obj = 0, kl = 0, approx = 0, clipped = 0, n = 0;
    for (let i = 0; i < batch.responseMask.length; i++) {
      if (!batch.responseMask[i]) continue;
      const lp = g.logprobs[i]!, old = batch.oldLogprobs[i]!, A = batch.advantages[i]!;
      const rho = Math.exp(lp - old);
      const clip = Math.min(Math.max(rho, 0.8), 1.28);
      obj += Math.min(rho * A, clip * A);
      kl += k3(batch.refLogprobs[i]!, lp);
      approx += rho - 1 - Math.log(rho); // k3 of KL(old ‖ new)
      if (clip * A < rho * A) clipped++;
      n++;
    }
    expect(g.tokens).toBe(n);
    expect(g.loss).toBeCloseTo(-obj / n + 0.3 * (kl / n), 5);
    expect(g.approxKl).toBeCloseTo(approx / n, 6);
    expect(clipped).toBeGreaterThan(0);
    expect(clipped).toBeLessThan(n);
    expect(g.clipfrac).toBeCloseTo(clipped / n, 6);
  });

  it('log-probs are on the token grid: the policy with B = 0 and the base both equal the model core’s score', async () => {
    const e = await engine();
    const batch = tinyBatch('rl', vocab, 9);
    const zeroB = new Map([...randomLora(e.specs, LORA.r, 4)].map(([k, v]) => [k, k.endsWith('lora_B.weight') ? new Float32Array(v.length) : v]));
    const policy = await e.policyLogprobs(batch, zeroB);
    const base = await e.baseLogprobs(batch);
    const model = ModelEngine.open(dir);
    try {
      const T = batch.seqLen;
      for (let r = 0; r < batch.batch; r++) {
        const ids = Array.from(batch.inputIds.subarray(r * T, (r + 1) * T), Number).slice(0, Number(batch.attentionMask.subarray(r * T, (r + 1) * T).reduce((a, b) => a + b, 0n)));
        const [scored] = await model.score([{ inputIds: ids, responseStart: 1 }]);
        scored!.forEach((v, t) => {
          expect(base[r * T + t + 1]).toBeCloseTo(v, 5);
          expect(policy[r * T + t + 1]).toBeCloseTo(v, 5);
        });
      }
    } finally {
      await model.close();
    }
    // A nonzero B moves them.
    const moved = await e.policyLogprobs(batch, randomLora(e.specs, LORA.r, 4));
    expect(Math.max(...moved.map((v, i) => Math.abs(v - base[i]!)))).toBeGreaterThan(1e-3);
  });
});

describe('PPO clipping', () => {
  it('tokens whose clipped term wins get no gradient, and clipfrac counts them', async () => {
    const e = await engine();
    const w = randomLora(e.specs, LORA.r, 6);
    const base = tinyBatch('combine', vocab, 5);
    // ρ = e^±0.5 on every token, on the side where the clip binds for its advantage's sign.
    const allClipped = await batchWithOld(e, w, (i) => (base.advantages[i]! > 0 ? -0.5 : 0.5));
    const g = await e.gradients(allClipped, w);
    expect(g.clipfrac).toBe(1);
    for (const [key, grad] of g.grads) expect(Math.max(...grad.map(Math.abs)), key).toBe(0);

    // Half clipped: the gradient is that of the unclipped tokens alone, rescaled to the full token count.
    const responseIdx = [...allClipped.responseMask.keys()].filter((i) => allClipped.responseMask[i]);
    const clippedSet = new Set(responseIdx.filter((_, k) => k % 2 === 0));
    const mixed = await batchWithOld(e, w, (i) => (clippedSet.has(i) ? (base.advantages[i]! > 0 ? -0.5 : 0.5) : 0.02));
    const gm = await e.gradients(mixed, w);
    expect(gm.clipfrac).toBeCloseTo(clippedSet.size / responseIdx.length, 6);
    const onlyUnclipped = { ...mixed, responseMask: Float32Array.from(mixed.responseMask, (m, i) => (clippedSet.has(i) ? 0 : m)) };
    const gu = await e.gradients(onlyUnclipped, w);
    const ratio = (responseIdx.length - clippedSet.size) / responseIdx.length;
    for (const [key, grad] of gm.grads) {
      const expected = gu.grads.get(key)!;
      grad.forEach((v, i) => expect(Math.abs(v - expected[i]! * ratio)).toBeLessThan(1e-6 + 1e-4 * Math.abs(v)));
    }
    expect(dot(gm.grads, gm.grads)).toBeGreaterThan(0);
  });
});

describe('optimizer step', () => {
  it('SGD moves A and B by exactly −lr × gradient', async () => {
    const e = await engine({ optimizer: sgd(0.05, 0) });
    const w = randomLora(e.specs, LORA.r, 7);
    const batch = await batchWithOld(e, w, () => 0.01);
    const given = cloneWeights(w);
    const r = await e.step(batch, given, emptyState());
    expect(r.state.step).toBe(1);
    for (const [key, p] of w) {
      const g = r.grads!.get(key)!;
      r.weights.get(key)!.forEach((v, i) => expect(v).toBe(Math.fround(p[i]! - 0.05 * g[i]!)));
      expect(r.weights.get(key)).toBe(given.get(key)); // written into the arrays given (step-optimizer.ts applyUpdate)
    }
    const again = await e.gradients(batch, w);
    for (const [key, g] of r.grads!) expect(again.grads.get(key)).toEqual(g);
  });

  it('clipping scales the gradient by max_norm / (norm + 1e-6) only when norm > max_norm', async () => {
    const probe = await engine({ optimizer: sgd(0.05, 0) });
    const w = randomLora(probe.specs, LORA.r, 8);
    const batch = await batchWithOld(probe, w, () => 0.01);
    const norm = (await probe.step(batch, cloneWeights(w), emptyState())).metrics.gradNorm;
    const maxNorm = norm / 4;
    const clipped = await engine({ optimizer: sgd(0.05, maxNorm) });
    const r = await clipped.step(batch, cloneWeights(w), emptyState());
    expect(r.metrics.gradNorm).toBeCloseTo(norm, 6); // reported before clipping
    const scale = maxNorm / (norm + 1e-6);
    for (const [key, p] of w) {
      const g = r.grads!.get(key)!;
      r.weights.get(key)!.forEach((v, i) => expect(v).toBe(Math.fround(p[i]! - 0.05 * (g[i]! * scale))));
    }
    const loose = await engine({ optimizer: sgd(0.05, norm * 2) });
    const u = await loose.step(batch, cloneWeights(w), emptyState());
    for (const [key, p] of w) u.weights.get(key)!.forEach((v, i) => expect(v).toBe(Math.fround(p[i]! - 0.05 * u.grads!.get(key)![i]!)));
  });

  it('the in-graph SGD update and clipping compute the same in fp32 arithmetic', async () => {
    const probe = await engine({ optimizer: sgd(0.05, 0), placement: 'graph' });
    const w = randomLora(probe.specs, LORA.r, 8);
    const batch = await batchWithOld(probe, w, () => 0.01);
    // The in-graph step does not fetch its gradients: they come from a pass without the update.
    const grads = (await probe.gradients(batch, w)).grads;
    const plain = await probe.step(batch, cloneWeights(w), emptyState());
    expect(plain.grads).toBeUndefined();
    const lr = Math.fround(0.05);
    for (const [key, p] of w) {
      const g = grads.get(key)!;
      plain.weights.get(key)!.forEach((v, i) => expect(v).toBe(Math.fround(p[i]! - Math.fround(lr * g[i]!))));
    }
    const norm = plain.metrics.gradNorm;
    expect(norm).toBeCloseTo(Math.sqrt(dot(grads, grads)), 5);
    const clipped = await (await engine({ optimizer: sgd(0.05, norm / 4), placement: 'graph' })).step(batch, cloneWeights(w), emptyState());
    const scale = norm / 4 / (norm + 1e-6);
    for (const [key, p] of w) {
      const g = grads.get(key)!;
      clipped.weights.get(key)!.forEach((v, i) => {
        const expected = p[i]! - 0.05 * g[i]! * scale;
        expect(Math.abs(v - expected)).toBeLessThan(3e-7 * (Math.abs(p[i]!) + 1e-3)); // 2 ulp: fp32 norm and scale
      });
    }
  });

  for (const placement of ['host', 'graph'] as const) {
    it(`AdamW (${placement}) matches a torch-style reference over two steps, with clipping active and the state reloaded before the second`, async () => {
      const cfg = adamw(1e-2, 0.05);
      const e = await engine({ optimizer: cfg, placement });
      let w = randomLora(e.specs, LORA.r, 9);
      const batch = await batchWithOld(e, w, () => 0.01);
      const m = new Map([...w].map(([k, v]) => [k, new Float64Array(v.length)]));
      const v2 = new Map([...w].map(([k, v]) => [k, new Float64Array(v.length)]));
      let state: OptimizerState = emptyState();
      for (let t = 1; t <= 2; t++) {
        // Before the second step the moments come back in arrays of their own, as a resumed run's
        // do from its checkpoint (the in-graph update keeps them as views of one flat vector).
        if (t === 2) state = { step: state.step, m: cloneWeights(state.m), v: cloneWeights(state.v) };
        const grads = (await e.gradients(batch, w)).grads;
        const r = await e.step(batch, cloneWeights(w), state);
        // Only the host update brings the gradients back (training-step.ts StepResult.grads).
        if (placement === 'host') expect(r.grads).toEqual(grads);
        else expect(r.grads).toBeUndefined();
        const norm = Math.sqrt(dot(grads, grads));
        expect(r.metrics.gradNorm).toBeCloseTo(norm, 4);
        expect(norm).toBeGreaterThan(0.05);
        const scale = 0.05 / (norm + 1e-6);
        for (const [key, p] of w) {
          const g = Float32Array.from(grads.get(key)!, (x) => x * scale);
          const expected = referenceAdamW(cfg, p, g, m.get(key)!, v2.get(key)!, t);
          r.weights.get(key)!.forEach((x, i) => expect(Math.abs(x - expected[i]!)).toBeLessThan(1e-6 + 1e-5 * Math.abs(expected[i]!)));
          r.state.m.get(key)!.forEach((x, i) => expect(Math.abs(x - m.get(key)![i]!)).toBeLessThan(1e-8 + 1e-5 * Math.abs(x)));
          r.state.v.get(key)!.forEach((x, i) => expect(Math.abs(x - v2.get(key)![i]!)).toBeLessThan(1e-12 + 1e-5 * Math.abs(x)));
        }
        expect(r.state.step).toBe(t);
        w = r.weights;
        state = r.state;
      }
    });
  }
});

describe('graph and errors', () => {
  it('the training graph holds only basic ONNX ops, each with a gradient rule or off the gradient path', () => {
    const weights = checkpointWeights(Checkpoint.open(dir));
    const forwardOnly = new Set(['Shape', 'Range', 'Less', 'LessOrEqual', 'Greater', 'GreaterOrEqual', 'And', 'Equal', 'Not', 'ConstantOfShape', 'ScatterElements', 'ScatterND']);
    // The chunked head's pass runs with the gradient stopped (its gradient is built explicitly).
    const chunkedHead = new Set(['ReduceMax', 'Size']);
    // Backward nodes only: MatMul's input gradient dC·Wᵀ for a 2-D weight (graph/ops/matmul.ts).
    const backwardOnly = new Set(['Gemm']);
    for (const memory of [undefined, { vocabChunk: 64, recompute: true }]) {
      const { graph } = buildTrainGraph(weights, { lora: LORA, loss: lossConfig('rl', 0.1), optimizerInGraph: adamw(1e-4), memory });
      const ops = [...opTypes(graph)];
      expect(ops.filter((op) => !hasGradientRule(op) && !forwardOnly.has(op) && !backwardOnly.has(op) && !(memory && chunkedHead.has(op)))).toEqual([]);
      expect(ops).not.toContain('GroupQueryAttention');
      expect(ops).not.toContain('SimplifiedLayerNormalization');
    }
  });

  it('bad LoRA weights and batches get clear errors', async () => {
    const e = await engine();
    const w = randomLora(e.specs, LORA.r, 10);
    const batch = await batchWithOld(e, w);
    const key = [...w.keys()][3]!;
    const missing = new Map(w);
    missing.delete(key);
    await expect(e.step(batch, missing, emptyState())).rejects.toThrow(`LoRA weights: missing '${key}'`);
    await expect(e.step(batch, new Map(w).set(key, new Float32Array(3)), emptyState())).rejects.toThrow(/has 3 values, expected \[/);
    await expect(e.step({ ...batch, advantages: new Float32Array(2) }, w, emptyState())).rejects.toThrow(/advantages has 2 values, expected 2 × 9 = 18/);
    const badIds = { ...batch, inputIds: batch.inputIds.slice() };
    badIds.inputIds[4] = BigInt(vocab);
    await expect(e.policyLogprobs(badIds, w)).rejects.toThrow(/token id \d+ at row 0, position 4 is outside the vocabulary/);
    await expect(TrainStepEngine.create(dir, { lora: { ...LORA, r: 0 }, loss: lossConfig('rl'), optimizer: sgd(1), device: 'cpu' })).rejects.toThrow(/LoRA rank/);
  });
});
