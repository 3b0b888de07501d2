// Whole-model check: on tiny Qwen3, Qwen2, Llama, Phi-3, Granite, Gemma 2, Gemma 3, GLM-4, SmolLM3, OLMo 2, OLMo 3 and Ministral 3 checkpoints, the training step's gradients
// of the LoRA weights match finite differences of its loss, for rl, opd and combine (and once
// with the k3 KL penalty). B is nonzero so the gradients of A are not trivially zero.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { LoraWeights, StepBatch, TrainMethod } from '../../src-main/train/training-step.js';
import { seededRandom, writeTinyModel, type TinyFamily } from '../../tools/tiny-models.js';
import { LORA, axpy, dot, lossConfig, randomDirection, randomLora, scaled, sgd, tinyBatch } from './step-helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-step-grad-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

// One case runs the memory-saving forms (small vocabulary chunks, recomputed layers); the others the defaults.
// `h`: the directional step (default 1e-2).
const CASES: { family: TinyFamily; method: TrainMethod; klBeta?: number; memory?: { vocabChunk: number; recompute: boolean }; h?: number; numLayers?: number }[] = [
  { family: 'qwen3', method: 'rl' },
  { family: 'qwen3', method: 'opd' },
  { family: 'qwen3', method: 'combine', klBeta: 0.5 },
  { family: 'qwen2', method: 'rl' },
  { family: 'qwen2', method: 'opd' },
  { family: 'qwen2', method: 'combine' },
  { family: 'llama', method: 'rl' },
  { family: 'llama', method: 'opd' },
  { family: 'llama', method: 'combine' },
  // Phi-3: fused projections cut into parts, LongRoPE's scaled tables, a partial rotation (rope.ts's Split/Concat).
  { family: 'phi3', method: 'combine' },
  // Granite: embedding, attention, residual and logit multipliers.
  { family: 'granite', method: 'combine' },
  // Gemma 3: (1 + w) norms around attention and the MLP, GELU, a sliding layer's window and RoPE base.
  // Normed branches make its loss curved along the gradient: the central difference's error, which
  // shrinks as h² (0.053 at 1e-2, 0.0049 at 3e-3, 0.0006 at 1e-3), needs the smaller step.
  { family: 'gemma3', method: 'combine', h: 3e-3 },
  // Gemma 2: Gemma's layers with soft-capped attention scores and logits (caps that bend the tiny
  // model's values), every other layer sliding; the head's capped gradient by hand, over one
  // vocabulary chunk and over several. Its loss is more curved still: the central difference's
  // error along the gradient is 0.45 at 1e-2, 0.045 at 3e-3, 0.005 at 1e-3 (the same with the caps
  // lifted, and with autodiff's unchunked head in place of the hand-derived one).
  { family: 'gemma2', method: 'combine', h: 1e-3, numLayers: 3 },
  { family: 'gemma2', method: 'combine', h: 1e-3, numLayers: 3, memory: { vocabChunk: 37, recompute: false } },
  // GLM-4: RoPE over adjacent pairs on half of each head, gate/up fused, four norms, q/k/v biases.
  { family: 'glm4', method: 'combine', h: 3e-3 },
  // SmolLM3: its 4th layer without RoPE.
  { family: 'smollm3', method: 'combine', numLayers: 4 },
  // OLMo 2: norms after each branch only, q and k normed across the whole projection; normed
  // branches, so Gemma's smaller step.
  { family: 'olmo2', method: 'combine', h: 3e-3 },
  // OLMo 3: three sliding layers around a global one with YaRN; rows past its window.
  { family: 'olmo3', method: 'combine', h: 3e-3, numLayers: 4 },
  // Ministral 3: YaRN, and the query temperature on the rows' later positions.
  { family: 'ministral3', method: 'combine' },
  { family: 'qwen3', method: 'combine', klBeta: 0.5, memory: { vocabChunk: 37, recompute: true } },
];

/** old = the policy's own log-probs moved by up to ±0.05, so ρ stays well inside the clip range. */
function nudged(lp: Float32Array, mask: Float32Array, seed: number): Float32Array {
  const rand = seededRandom(seed);
  return Float32Array.from(lp, (v, i) => (mask[i] ? v + 0.1 * (rand() - 0.5) : 0));
}

describe.each(CASES)('$family $method (β=$klBeta, $memory)', ({ family, method, klBeta = 0, memory, h = 1e-2, numLayers = 2 }) => {
  it('gradients match finite differences of the loss', async () => {
    const seed = { qwen3: 11, qwen2: 12, llama: 13, phi3: 14, granite: 15, gemma2: 36, gemma3: 16, glm4: 46, smollm3: 17, olmo2: 18, olmo3: 19, ministral3: 20 }[family];
    const dir = path.join(root, family);
    if (!fs.existsSync(dir)) writeTinyModel(dir, { family, seed, hiddenSize: 16, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2, numLayers });
    const engine = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig(method, klBeta), optimizer: sgd(0.1), device: 'cpu', ...memory });
    try {
      const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size as number;
      const batch: StepBatch = tinyBatch(method, vocab, seed);
      const weights = randomLora(engine.specs, LORA.r, seed);
      batch.oldLogprobs = nudged(await engine.policyLogprobs(batch, weights), batch.responseMask, seed + 1);
      if (klBeta > 0) batch.refLogprobs = await engine.baseLogprobs(batch);

      const at = await engine.gradients(batch, weights);
      expect(at.tokens).toBe(8);
      expect(at.clipfrac).toBe(0);
      const loss = async (w: LoraWeights) => (await engine.gradients(batch, w)).loss;
      const gNorm = Math.sqrt(dot(at.grads, at.grads));
      expect(gNorm).toBeGreaterThan(1e-3);
      // Both halves of every adapted projection get a real gradient.
      for (const [key, g] of at.grads) expect(Math.max(...g.map(Math.abs)), key).toBeGreaterThan(0);

      // Directional derivatives: along the gradient itself and two random unit directions.
      const directions = [scaled(at.grads, 1 / gNorm), randomDirection(weights, seed + 2), randomDirection(weights, seed + 3)];
      for (const d of directions) {
        const fd = ((await loss(axpy(weights, d, h))) - (await loss(axpy(weights, d, -h)))) / (2 * h);
        const analytic = dot(at.grads, d);
        expect(Math.abs(fd - analytic)).toBeLessThan(2e-3 * gNorm + 2e-5);
      }

      // Single coordinates: the largest entries of an A (first layer q) and a B (last layer down).
      const keys = [[...at.grads.keys()][0]!, [...at.grads.keys()].at(-1)!];
      for (const key of keys) {
        const g = at.grads.get(key)!;
        const top = [...g.keys()].sort((i, j) => Math.abs(g[j]!) - Math.abs(g[i]!)).slice(0, 3);
        for (const i of top) {
          const step = (s: number) => new Map([...weights].map(([k, v]) => [k, k === key ? Float32Array.from(v, (x, j) => (j === i ? x + s : x)) : v]));
          const hc = 5e-3;
          const fd = ((await loss(step(hc))) - (await loss(step(-hc)))) / (2 * hc);
          expect(Math.abs(fd - g[i]!), `${key}[${i}]`).toBeLessThan(2e-2 * Math.abs(g[i]!) + 5e-5);
        }
      }
    } finally {
      await engine.close();
    }
  });
});
