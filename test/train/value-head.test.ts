// The value head (docs/design.md §Advantage estimators) on tiny Qwen3 and Llama checkpoints:
// the value is the head applied to the hidden state that feeds the LM head, the clipped value
// loss and the total loss are the documented formulas, the gradients of the LoRA tensors and
// of the value head match finite differences of the total loss, and the head's file round-trips.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { LoraWeights, StepBatch } from '../../src-main/train/training-step.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import {
  readValueHead, VALUE_HEAD_BIAS, VALUE_HEAD_FILE, VALUE_HEAD_WEIGHT, withValueHead, writeValueHead, zeroValueHead, type ValueHead,
} from '../../src-main/train/value-head.js';
import { seededRandom, writeTinyModel, type TinyFamily } from '../../tools/tiny-models.js';
import { LORA, axpy, dot, lossConfig, randomDirection, randomLora, scaled, sgd, tinyBatch } from './step-helpers.js';

const HIDDEN = 16;
const VALUE = { clip: 0.2, coef: 0.5 };
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-value-head-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function modelDir(family: TinyFamily, seed: number): string {
  const dir = path.join(root, family);
  if (!fs.existsSync(dir)) writeTinyModel(dir, { family, seed, hiddenSize: HIDDEN, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2 });
  return dir;
}

function randomValueHead(seed: number): ValueHead {
  const rand = seededRandom(seed);
  return new Map([[VALUE_HEAD_WEIGHT, Float32Array.from({ length: HIDDEN }, () => rand() - 0.5)], [VALUE_HEAD_BIAS, Float32Array.of(0.3)]]);
}

/**
 * old nudged by up to ±0.05 (ρ inside the clip range), V_old = V + an offset per token that
 * is either well inside the value clip (±0.05) or well outside it (±0.6), returns random:
 * no term sits near a kink, so central differences see a smooth loss.
 */
const modelDirOf = new Map<TrainStepEngine, string>();

async function gaeBatch(e: TrainStepEngine, params: LoraWeights, seed: number): Promise<StepBatch> {
  const vocab = JSON.parse(fs.readFileSync(path.join(modelDirOf.get(e)!, 'config.json'), 'utf8')).vocab_size as number;
  const batch = tinyBatch('rl', vocab, seed);
  const { logprobs, values } = await e.policyValues(batch, params);
  const rand = seededRandom(seed + 1);
  const offsets = [0.05, -0.6, -0.05, 0.6];
  batch.oldLogprobs = Float32Array.from(logprobs, (v, i) => (batch.responseMask[i] ? v + 0.1 * (rand() - 0.5) : 0));
  batch.valuesOld = Float32Array.from(values, (v, i) => (batch.responseMask[i] ? v + offsets[i % 4]! : 0));
  batch.returns = Float32Array.from(values, (_, i) => (batch.responseMask[i] ? 2 * rand() - 1 : 0));
  return batch;
}
async function gaeEngine(family: TinyFamily, seed: number): Promise<TrainStepEngine> {
  const dir = modelDir(family, seed);
  const e = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig('rl'), optimizer: sgd(0.1), device: 'cpu', value: VALUE });
  modelDirOf.set(e, dir);
  return e;
}

describe('value head', () => {
  it('V is the head on the hidden state before the LM head; the value loss and the total loss are the documented formulas', async () => {
    const e = await gaeEngine('qwen3', 11);
    try {
      const params = withValueHead(randomLora(e.specs, LORA.r, 2), randomValueHead(3));
      const batch = await gaeBatch(e, params, 4);
      const g = await e.gradients(batch, params);
      // A zero head gives V = 0; the bias alone shifts every value by itself.
      const shifted = withValueHead(randomLora(e.specs, LORA.r, 2), new Map([[VALUE_HEAD_WEIGHT, new Float32Array(HIDDEN)], [VALUE_HEAD_BIAS, Float32Array.of(0.75)]]));
      const { values: biasOnly } = await e.policyValues(batch, shifted);
      batch.responseMask.forEach((m, i) => m && expect(biasOnly[i]).toBe(0.75));

      let obj = 0, vl = 0, n = 0, clippedWins = 0;
      for (let i = 0; i < batch.responseMask.length; i++) {
        if (!batch.responseMask[i]) continue;
        const lp = g.logprobs[i]!, old = batch.oldLogprobs[i]!, A = batch.advantages[i]!;
        const rho = Math.exp(lp - old);
        obj += Math.min(rho * A, Math.min(Math.max(rho, 0.8), 1.28) * A);
        const v = g.values![i]!, vOld = batch.valuesOld![i]!, r = batch.returns![i]!;
        const unclipped = (v - r) ** 2, clipped = (vOld + Math.min(Math.max(v - vOld, -0.2), 0.2) - r) ** 2;
        if (clipped > unclipped) clippedWins++;
        vl += Math.max(unclipped, clipped);
        n++;
      }
      expect(clippedWins).toBeGreaterThan(0);
      expect(clippedWins).toBeLessThan(n);
      expect(g.valueLoss).toBeCloseTo((0.5 * vl) / n, 5);
      expect(g.loss).toBeCloseTo(-obj / n + VALUE.coef * ((0.5 * vl) / n), 5);
      // The values the step returns are the forward pass's.
      const { values } = await e.policyValues(batch, params);
      batch.responseMask.forEach((m, i) => m && expect(Math.abs(g.values![i]! - values[i]!)).toBeLessThan(1e-5));
    } finally {
      await e.close();
    }
  });

  describe.each([['qwen3', 11], ['llama', 13]] as const)('%s', (family, seed) => {
    it('gradients of the LoRA tensors and the value head match finite differences of the total loss', async () => {
      const e = await gaeEngine(family, seed);
      try {
        const params = withValueHead(randomLora(e.specs, LORA.r, seed), randomValueHead(seed + 5));
        const batch = await gaeBatch(e, params, seed + 7);
        const at = await e.gradients(batch, params);
        const loss = async (w: LoraWeights) => (await e.gradients(batch, w)).loss;
        const gNorm = Math.sqrt(dot(at.grads, at.grads));
        expect(gNorm).toBeGreaterThan(1e-3);
        for (const key of [VALUE_HEAD_WEIGHT, VALUE_HEAD_BIAS]) expect(Math.max(...at.grads.get(key)!.map(Math.abs)), key).toBeGreaterThan(1e-4);

        const directions = [scaled(at.grads, 1 / gNorm), randomDirection(params, seed + 2), randomDirection(params, seed + 3)];
        const h = 1e-2;
        for (const d of directions) {
          const fd = ((await loss(axpy(params, d, h))) - (await loss(axpy(params, d, -h)))) / (2 * h);
          expect(Math.abs(fd - dot(at.grads, d))).toBeLessThan(2e-3 * gNorm + 2e-5);
        }
        // Single coordinates: the bias, the largest entries of the head's weight and of one LoRA B.
        const loraKey = [...at.grads.keys()].find((k) => k.endsWith('lora_B.weight'))!;
        for (const key of [VALUE_HEAD_BIAS, VALUE_HEAD_WEIGHT, loraKey]) {
          const g = at.grads.get(key)!;
          const top = [...g.keys()].sort((i, j) => Math.abs(g[j]!) - Math.abs(g[i]!)).slice(0, 2);
          for (const i of top) {
            const step = (s: number) => new Map([...params].map(([k, v]) => [k, k === key ? Float32Array.from(v, (x, j) => (j === i ? x + s : x)) : v]));
            const hc = 5e-3;
            const fd = ((await loss(step(hc))) - (await loss(step(-hc)))) / (2 * hc);
            expect(Math.abs(fd - g[i]!), `${key}[${i}]`).toBeLessThan(2e-2 * Math.abs(g[i]!) + 5e-5);
          }
        }
      } finally {
        await e.close();
      }
    });
  });

  it('the optimizer and gradient clipping cover the value head', async () => {
    const dir = modelDir('qwen3', 11);
    const probe = await gaeEngine('qwen3', 11);
    try {
      const params = withValueHead(randomLora(probe.specs, LORA.r, 2), randomValueHead(3));
      const batch = await gaeBatch(probe, params, 4);
      const g = await probe.gradients(batch, params);
      const norm = Math.sqrt(dot(g.grads, g.grads));
      const clipped = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig('rl'), optimizer: sgd(0.1, norm / 4), device: 'cpu', value: VALUE });
      try {
        const r = await clipped.step(batch, cloneWeights(params), { step: 0, m: new Map(), v: new Map() });
        expect(r.metrics.gradNorm).toBeCloseTo(norm, 5); // the norm counts the head's gradient
        const scale = norm / 4 / (norm + 1e-6);
        for (const key of [VALUE_HEAD_WEIGHT, VALUE_HEAD_BIAS]) {
          const p = params.get(key)!, grad = r.grads!.get(key)!;
          r.weights.get(key)!.forEach((x, i) => expect(x).toBe(Math.fround(p[i]! - 0.1 * (grad[i]! * scale))));
        }
      } finally {
        await clipped.close();
      }
    } finally {
      await probe.close();
    }
  });

  it('a step with a value head refuses a batch without returns, and one without it refuses policyValues', async () => {
    const e = await gaeEngine('qwen3', 11);
    try {
      const params = withValueHead(randomLora(e.specs, LORA.r, 2), zeroValueHead(HIDDEN));
      const batch = await gaeBatch(e, params, 4);
      await expect(e.gradients({ ...batch, returns: undefined }, params)).rejects.toThrow('step batch: returns is missing (the value head needs it)');
      const noHead = new Map([...params].filter(([k]) => !k.startsWith('value_head')));
      await expect(e.gradients(batch, noHead)).rejects.toThrow(`value head: missing '${VALUE_HEAD_WEIGHT}'`);
      // Scoring needs no value head.
      expect((await e.policyLogprobs(batch, noHead)).some((x) => x !== 0)).toBe(true);
    } finally {
      await e.close();
    }
  });
});

describe('value_head.safetensors', () => {
  it('save → load gives back the same bits; a folder without one has none; a wrong shape is refused', () => {
    const dir = path.join(root, 'vh');
    fs.mkdirSync(dir);
    expect(readValueHead(dir, HIDDEN)).toBeNull();
    const head = randomValueHead(9);
    writeValueHead(dir, head);
    const back = readValueHead(dir, HIDDEN)!;
    for (const [k, v] of head) expect(Buffer.from(back.get(k)!.buffer).equals(Buffer.from(v.buffer))).toBe(true);
    expect([...back.keys()].sort()).toEqual([VALUE_HEAD_BIAS, VALUE_HEAD_WEIGHT]);
    expect(() => readValueHead(dir, HIDDEN * 2)).toThrow(`${path.join(dir, VALUE_HEAD_FILE)}: value_head.weight is [1,16], but this model needs [1,32]`);
    const zero = zeroValueHead(HIDDEN);
    expect([...zero.get(VALUE_HEAD_WEIGHT)!, ...zero.get(VALUE_HEAD_BIAS)!].every((x) => x === 0)).toBe(true);
  });
});
