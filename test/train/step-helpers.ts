/**
 * Shared pieces of the training-step tests: a padded batch on a tiny model, random LoRA
 * weights with nonzero B (so both A and B get non-trivial gradients), and configs.
 */
import { LINEAR_TARGETS } from '../../src-main/model/decoder.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights, LossConfig, OptimizerConfig, StepBatch, TrainMethod } from '../../src-main/train/training-step.js';
import { seededRandom } from '../../tools/tiny-models.js';
export { randomLora } from '../../tools/tiny-models.js';

export const LORA: LoraConfig = { r: 4, alpha: 8, targets: [...LINEAR_TARGETS] };

export const lossConfig = (method: TrainMethod, klBeta = 0): LossConfig => ({ method, epsLow: 0.2, epsHigh: method === 'opd' ? 0.2 : 0.28, klBeta });

export const sgd = (lr: number, maxGradNorm = 0): OptimizerConfig => ({ kind: 'sgd', lr, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm });
export const adamw = (lr: number, maxGradNorm = 1): OptimizerConfig => ({ kind: 'adamw', lr, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm });

/**
 * Two rows of `seqLen` tokens: row 0 full, row 1 right-padded by 3. The response is the last
 * 4 real tokens of each row. Advantages follow the method: rl ±1 per row, opd a per-token
 * teacher − old gap, combine both. old/ref are filled in by the caller (they need the model).
 */
export function tinyBatch(method: TrainMethod, vocab: number, seed: number, seqLen = 9): StepBatch {
  const rand = seededRandom(seed);
  const B = 2, T = seqLen;
  const lengths = [T, T - 3];
  const n = B * T;
  const batch: StepBatch = {
    batch: B, seqLen: T,
    inputIds: new BigInt64Array(n), attentionMask: new BigInt64Array(n), positionIds: new BigInt64Array(n),
    responseMask: new Float32Array(n), oldLogprobs: new Float32Array(n), advantages: new Float32Array(n),
  };
  const rewards = [1, -1];
  for (let r = 0; r < B; r++) {
    for (let t = 0; t < lengths[r]!; t++) {
      const i = r * T + t;
      batch.inputIds[i] = BigInt(Math.floor(rand() * (vocab - 3)));
      batch.attentionMask[i] = 1n;
      batch.positionIds[i] = BigInt(t);
      if (t >= lengths[r]! - 4) {
        batch.responseMask[i] = 1;
        const gap = 2 * rand() - 1;
        batch.advantages[i] = method === 'rl' ? rewards[r]! : method === 'opd' ? gap : gap + rewards[r]!;
      }
    }
  }
  return batch;
}

/** a + h·d over every tensor. */
export function axpy(w: LoraWeights, d: LoraWeights, h: number): LoraWeights {
  return new Map([...w].map(([k, v]) => [k, Float32Array.from(v, (x, i) => x + h * d.get(k)![i]!)]));
}

export function dot(a: LoraWeights, b: LoraWeights): number {
  let s = 0;
  for (const [k, v] of a) for (let i = 0; i < v.length; i++) s += v[i]! * b.get(k)![i]!;
  return s;
}

export function scaled(a: LoraWeights, s: number): LoraWeights {
  return new Map([...a].map(([k, v]) => [k, Float32Array.from(v, (x) => x * s)]));
}

/** A random direction of unit norm. */
export function randomDirection(like: LoraWeights, seed: number): LoraWeights {
  const rand = seededRandom(seed);
  const d = new Map([...like].map(([k, v]) => [k, Float32Array.from(v, () => 2 * rand() - 1)]));
  return scaled(d, 1 / Math.sqrt(dot(d, d)));
}
