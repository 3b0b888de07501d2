/**
 * One estimator of bench/ppo.ts, run in a process of its own so that its peak RSS is its own:
 * the bench's `--data` file read as the trainer reads it (rowsFromJsonl, with the estimator's
 * row rules), then the same batch through `trainBatch` once to warm up and `repeats` times
 * timed, each time from the same starting weights (so every repeat does the same work and
 * reports the same first-epoch drift).
 */
import { PPO_DEFAULTS, type AdvantageEstimator, type PpoSettings } from '../src-shared/rollout.js';
import { TRAIN_DEFAULTS } from '../src-shared/training.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { padBatch } from '../src-main/train/batches.js';
import { rowsFromJsonl } from '../src-main/train/data-lines.js';
import { cloneWeights, initLora, loraBKey, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { minibatchRandom, trainBatch, type BatchMetrics } from '../src-main/train/ppo-batch.js';
import { createTrainStep } from '../src-main/train/step-engine.js';
import type { LoraWeights, OptimizerConfig } from '../src-main/train/training-step.js';
import type { ModelConfig } from '../src-main/model/hf-checkpoint.js';
import { withValueHead, zeroValueHead } from '../src-main/train/value-head.js';

export interface EstimatorRequest {
  model: string;
  data: string;
  estimator: AdvantageEstimator;
  threads: number;
  repeats: number;
  maxLength: number;
}

export interface EstimatorResult {
  estimator: AdvantageEstimator;
  rows: number;
  buildS: number;
  warmWallS: number;
  wallS: number;
  cpuS: number;
  peakMb: number;
  /** The warm-up batch's metrics (every repeat starts from the same weights, so they repeat). */
  metrics: BatchMetrics;
  /** The first-epoch drift of every timed batch, to show it does not depend on the repeat. */
  drifts: (number | undefined)[];
  /**
   * One forward pass of the whole batch, warm, wall and CPU seconds: with `gae` the one that
   * gives V_old (part of every batch); otherwise the one a batch would need for old if its
   * rows had no old_logprobs (measured after the peak RSS is read, so it is not in it).
   */
  forward: { wallS: number; cpuS: number };
}

export const PPO_EPOCHS = 2;
export const MINIBATCH = 4;
const LOSS = { method: 'rl' as const, epsLow: TRAIN_DEFAULTS.epsLow, epsHigh: 0.28, klBeta: 0 };
const OPTIMIZER: OptimizerConfig = {
  kind: 'adamw', lr: TRAIN_DEFAULTS.lr, betas: [...TRAIN_DEFAULTS.betas], eps: TRAIN_DEFAULTS.adamEps, weightDecay: 0, maxGradNorm: TRAIN_DEFAULTS.maxGradNorm,
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Wall seconds and this process's CPU seconds (every thread, ONNX Runtime's pool included). */
export async function timed<R>(f: () => Promise<R>): Promise<[R, number, number]> {
  const t0 = performance.now(), c0 = process.cpuUsage();
  const r = await f();
  const c = process.cpuUsage(c0);
  return [r, (performance.now() - t0) / 1000, (c.user + c.system) / 1e6];
}

/**
 * The policy's adapter, as a few steps into a run: PEFT's initial A and a small random B
 * (B = 0 would be the base model, and then a rollout engine that ignored its LoRA inputs
 * would still show no drift). The bench's parent scores old with it, each child trains from it.
 */
export function policyWeights(config: ModelConfig): LoraWeights {
  const specs = loraSpecs(config, DEFAULT_LORA.targets);
  const weights = initLora(specs, DEFAULT_LORA.r, 1);
  const rand = seededRandom(2);
  for (const spec of specs) {
    const b = weights.get(loraBKey(spec))!;
    for (let i = 0; i < b.length; i++) b[i] = 0.02 * (rand() - 0.5);
  }
  return weights;
}

export async function runEstimator(q: EstimatorRequest): Promise<EstimatorResult> {
  const ckpt = Checkpoint.open(q.model);
  const gae = q.estimator === 'gae';
  const ppo: PpoSettings = { ...PPO_DEFAULTS, advantage: q.estimator, ppoEpochs: PPO_EPOCHS, minibatch: MINIBATCH };
  const t0 = performance.now();
  const step = await createTrainStep(ckpt, {
    lora: DEFAULT_LORA, loss: LOSS, optimizer: OPTIMIZER, device: 'cpu', threads: q.threads,
    value: gae ? { clip: ppo.valueClip, coef: ppo.valueCoef } : undefined,
  });
  const buildS = (performance.now() - t0) / 1000;
  const { rows } = rowsFromJsonl(q.data, 'rl', ckpt.config.vocabSize, q.maxLength, q.estimator);
  const start = policyWeights(ckpt.config);
  const batch = () => trainBatch({
    step, rows, weights: cloneWeights(start), optimizer: { step: 0, m: new Map(), v: new Map() },
    valueHead: gae ? zeroValueHead(ckpt.config.hiddenSize) : undefined,
    settings: { method: 'rl', wOpd: TRAIN_DEFAULTS.wOpd, wRl: TRAIN_DEFAULTS.wRl, klBeta: 0, ppo },
    random: minibatchRandom(TRAIN_DEFAULTS.seed, 0),
  });
  const [warm, warmWallS] = await timed(batch);
  const wall: number[] = [], cpu: number[] = [], drifts: (number | undefined)[] = [];
  for (let i = 0; i < q.repeats; i++) {
    const [r, s, c] = await timed(batch);
    wall.push(s);
    cpu.push(c);
    drifts.push(r.metrics.drift);
  }
  const peakMb = process.resourceUsage().maxRSS / 1024;
  const padded = padBatch(rows);
  const forward = async (): Promise<unknown> => (gae ? step.policyValues(padded, withValueHead(start, zeroValueHead(ckpt.config.hiddenSize))) : step.policyLogprobs(padded, start));
  if (!gae) await forward(); // starts the forward session, which the batches above never needed
  const [, forwardWallS, forwardCpuS] = await timed(forward);
  await step.close();
  return {
    estimator: q.estimator, rows: rows.length, buildS, warmWallS, wallS: median(wall), cpuS: median(cpu),
    peakMb, metrics: warm.metrics, drifts, forward: { wallS: forwardWallS, cpuS: forwardCpuS },
  };
}
