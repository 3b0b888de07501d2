/**
 * A run's settings: built from the options of a new run (defaults from
 * src-shared/training.ts), saved in every checkpoint, and read back on resume, where an
 * option the caller gives explicitly overrides the saved one (docs/design.md §Training runs).
 * Settings that fix the data order or the shape of the weights cannot change mid-run: asking
 * for another value is an error, asking for the same one is fine.
 */
import path from 'node:path';
import { ADVANTAGE_ESTIMATORS, PPO_DEFAULTS, type AdvantageEstimator, type PpoSettings } from '../../src-shared/rollout.js';
import { ADVANTAGE_NAMES } from '../../src-shared/on-policy-api.js';
import { methodRecord, methodsUsing, orList } from '../../src-shared/training-methods.js';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import { BOUNDED_OPTIONS, checkBound, defaultEpsHigh, defaultMaxLength, LOSS_AGGS, TRAIN_DEFAULTS, type BoundedOption, type LossAgg, type Precision, type Quantize, type RecomputeMode } from '../../src-shared/training.js';
import type { ModelConfig } from '../model/hf-checkpoint.js';
import type { LinearTarget } from '../model/decoder.js';
import type { Device } from '../model/ort-session.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { DEFAULT_LORA } from './lora.js';
import { readAdapter } from './peft.js';
import type { HeldOutSet } from './train-eval.js';
import type { LossConfig, LoraConfig, LoraWeights, OptimizerConfig, OptimizerKind, TrainMethod } from './training-step.js';

/** How the step runs, as the memory check chose it (../train/memory-check.ts stepPlan); not saved with the run. */
export type StepPlan = Pick<TrainerOptions, 'microBatch' | 'recomputeActivations'>;

/** What a run is asked to do (CLI flags, the app's TrainConfig). Unset: the default, or on resume the run's own. */
export interface TrainerOptions {
  /** Required for a new run; a resume takes the run's own unless given. */
  modelDir?: string;
  /** Required for a new run; a resume continues in the run's own folder unless given. */
  outDir?: string;
  /** Pre-tokenised rows (`hindsight train --data`); otherwise `samples` (the database's). */
  dataFile?: string;
  samples?: TrainingSample[];
  method?: TrainMethod;
  /** Total steps; default one epoch. */
  steps?: number;
  batchSize?: number;
  /**
   * Rows per pass of the step (gradient accumulation, docs/design.md §Micro-batches); default
   * the whole update at once. No part of the math, so not saved with the run: the CLI, the app
   * and live capture pass the memory check's choice (./memory-check.ts), a resume its own.
   */
  microBatch?: number;
  /**
   * Whether the step recomputes activations, as the memory check decided (MemoryVerdict.recompute:
   * `auto` is off on a CUDA GPU with room for the run without it). Like microBatch, how the step
   * runs, not a setting: the run records `recompute` as asked. Default recomputeOn(recompute, maxLength).
   */
  recomputeActivations?: boolean;
  lr?: number;
  optimizer?: OptimizerKind;
  maxGradNorm?: number;
  klBeta?: number;
  epsLow?: number;
  epsHigh?: number;
  wOpd?: number;
  wRl?: number;
  /** How the per-token loss is averaged (docs/design.md §Losses, "Aggregation"); default TRAIN_DEFAULTS.lossAgg. A resume keeps the run's. */
  lossAgg?: LossAgg;
  /** Top-K on-policy distillation's K (docs/design.md §Top-K distillation); 0: off (default). A resume keeps the run's. */
  opdTopK?: number;
  loraR?: number;
  loraAlpha?: number;
  targets?: LinearTarget[];
  initAdapter?: string;
  seed?: number;
  device?: Device;
  threads?: number;
  /** Checkpoint every N steps (0: only at the end). */
  saveEvery?: number;
  /** A previous run's output folder (or checkpoint folder) to continue from. */
  resume?: string;
  /** Start over in an output folder that holds a run: the old run is removed first. */
  overwrite?: boolean;
  maxLength?: number;
  recompute?: RecomputeMode;
  /** The frozen base's arithmetic (src-shared/training.ts Precision); default: the device's (defaultPrecision). */
  precision?: Precision;
  /**
   * The frozen base stored quantised (QLoRA, docs/design.md §QLoRA); default 'none'. The LoRA
   * weights, their gradients, the optimizer and the loss stay fp32.
   */
  quantize?: Quantize;
  /** Also write the merged weights (W + s·B·A) as model.safetensors under <out>/merged. */
  merge?: boolean;
  /**
   * The held-out split (docs/design.md §Evaluation): rows of these sessions are refused, and
   * their samples are evaluated during the run. Not saved with the run: a resume takes the
   * split the caller has now.
   */
  heldOut?: HeldOutSet;
  /** Evaluate the held-out samples every N steps (and at the start and end); default about ten times a run; 0: start and end only. */
  evalEvery?: number;
  /** PPO over each batch (docs/design.md §Advantage estimators); defaults in src-shared/rollout.ts PPO_DEFAULTS. */
  advantage?: AdvantageEstimator;
  grpoStd?: boolean;
  normalizeAdvantages?: boolean;
  ppoEpochs?: number;
  /** Rows per minibatch; 0: the whole batch. */
  minibatch?: number;
  gamma?: number;
  lambda?: number;
  valueClip?: number;
  valueCoef?: number;
}

/** Everything a run was asked for; saved in every checkpoint, restored on resume. */
export interface RunSettings {
  modelDir: string;
  method: TrainMethod;
  batchSize: number;
  maxLength: number;
  seed: number;
  lora: LoraConfig;
  optimizer: OptimizerConfig;
  loss: LossConfig;
  wOpd: number;
  wRl: number;
  initAdapter: string | null;
  saveEvery: number;
  device: Device;
  /** ONNX Runtime intra-op threads; null: its own choice. */
  threads: number | null;
  /** Activation recomputation (src-shared/training.ts recomputeOn). */
  recompute: RecomputeMode;
  /** The frozen base's arithmetic; null: the device's default (src-shared/training.ts defaultPrecision). */
  precision: Precision | null;
  /** The frozen base's storage in the step, the teacher pass and the rollouts (QLoRA). */
  quantize: Quantize;
  merge: boolean;
  /** The estimator and PPO epochs of every batch (./ppo-batch.ts). */
  ppo: PpoSettings;
}

/**
 * Refuses, in one line naming the flag and its bounds, the first option given outside its
 * bounds (src-shared/training.ts TRAIN_BOUNDS, which the CLI and the API contract check too).
 * Takes the trainer's options or an on-policy run's `onPolicy` part; unset options are not
 * checked (their defaults, or a resumed run's own, are used). Both trainers call it before they
 * open the model, so an option out of bounds never gets as far as the output folder.
 */
export function checkBounds(options: { [K in BoundedOption]?: unknown }): void {
  for (const option of BOUNDED_OPTIONS) {
    const value = options[option];
    if (value === undefined) continue;
    const problem = checkBound(option, value as number);
    if (problem) throw new UserError(problem);
  }
}

/** The run's tokens per sample: the one asked for, which the model's positions must hold; else min(2,048, positions). */
function maxLengthFor(asked: number | undefined, model: ModelConfig): number {
  const positions = model.maxPositionEmbeddings;
  if (asked === undefined) return defaultMaxLength(positions);
  if (asked > positions) throw new UserError(`max length ${asked} is more than the model's ${positions} positions (max_position_embeddings in config.json)`);
  return asked;
}

/** The settings of a new run: each option given (checked against its bounds by the trainer's resolveOptions), else its default. */
export function settingsFrom(o: TrainerOptions & { modelDir: string }, lora: LoraConfig, model: ModelConfig): RunSettings {
  const d = TRAIN_DEFAULTS;
  const method = o.method ?? d.method;
  return {
    modelDir: path.resolve(o.modelDir),
    method,
    batchSize: o.batchSize ?? d.batchSize,
    maxLength: maxLengthFor(o.maxLength, model),
    seed: o.seed ?? d.seed,
    lora,
    optimizer: {
      kind: o.optimizer ?? d.optimizer, lr: o.lr ?? d.lr, betas: [...d.betas], eps: d.adamEps, weightDecay: d.weightDecay,
      maxGradNorm: o.maxGradNorm ?? d.maxGradNorm,
    },
    loss: {
      method, epsLow: o.epsLow ?? d.epsLow, epsHigh: o.epsHigh ?? defaultEpsHigh(method), klBeta: o.klBeta ?? d.klBeta,
      lossAgg: lossAggOf(o.lossAgg ?? d.lossAgg), opdTopK: checkTopKForMethod(o.opdTopK ?? d.opdTopK, method),
    },
    wOpd: o.wOpd ?? d.wOpd,
    wRl: o.wRl ?? d.wRl,
    initAdapter: o.initAdapter ? path.resolve(o.initAdapter) : null,
    saveEvery: o.saveEvery ?? d.saveEvery,
    device: o.device ?? d.device,
    threads: o.threads ?? null,
    recompute: o.recompute ?? d.recompute,
    precision: o.precision ?? null,
    quantize: o.quantize ?? d.quantize,
    merge: o.merge ?? false,
    ppo: ppoSettings(o, { ...PPO_DEFAULTS }, method),
  };
}

function lossAggOf(value: LossAgg): LossAgg {
  if (!LOSS_AGGS.includes(value)) throw new UserError(`the loss aggregation must be ${LOSS_AGGS.join(' or ')}, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * Top-K distillation distils the hint's teacher, which a method without hints (rl) does not have,
 * and is for offline runs (`onPolicy`: the app asks for an on-policy run); said for the CLI and the app. Returns K.
 */
export function checkTopKForMethod(k: number, method: TrainMethod, onPolicy = false): number {
  if (k > 0 && onPolicy) throw new SurfaceError('--opd-topk is for offline runs (leave it at 0 with --on-policy)', 'Top-K distillation is for runs on the labelled samples: set Top-K to 0 for an on-policy run.');
  if (k === 0 || methodRecord(method).uses.hint) return k;
  const hinted = methodsUsing('hint');
  throw new SurfaceError(
    `--opd-topk distils the teacher that a hint makes, which ${method} does not use; use --method ${orList(hinted.map((m) => m.name))}, or leave --opd-topk at 0`,
    `Top-K distillation learns from the teacher that a hint makes, which ${methodRecord(method).label} does not use: choose ${orList(hinted.map((m) => m.label))} as the Method, or set Top-K to 0.`,
  );
}

/** `grpo` and `gae` replace the reward r, which a method without rewards (opd) does not have (said for the CLI and the app). */
export function checkAdvantageForMethod(advantage: AdvantageEstimator, method: TrainMethod): void {
  if (advantage === 'reward' || methodRecord(method).uses.reward) return;
  const rewarded = methodsUsing('reward');
  throw new SurfaceError(
    `--advantage ${advantage} replaces the reward, which ${method} does not use; use --method ${orList(rewarded.map((m) => m.name))}`,
    `The ${ADVANTAGE_NAMES[advantage]} advantage estimator replaces the reward, which ${methodRecord(method).label} does not use: choose Reward as the Advantage estimator, or ${orList(rewarded.map((m) => m.label))} as the Method.`,
  );
}

/**
 * The PPO settings: each option given, else `base` (the defaults, or a resumed run's own).
 * `grpo` and `gae` replace the reward r, so they need a method that has one.
 */
function ppoSettings(o: TrainerOptions, base: PpoSettings, method: TrainMethod): PpoSettings {
  const s: PpoSettings = {
    advantage: o.advantage ?? base.advantage, grpoStd: o.grpoStd ?? base.grpoStd, normalizeAdvantages: o.normalizeAdvantages ?? base.normalizeAdvantages,
    ppoEpochs: o.ppoEpochs ?? base.ppoEpochs, minibatch: o.minibatch ?? base.minibatch, gamma: o.gamma ?? base.gamma, lambda: o.lambda ?? base.lambda,
    valueClip: o.valueClip ?? base.valueClip, valueCoef: o.valueCoef ?? base.valueCoef,
  };
  if (!ADVANTAGE_ESTIMATORS.includes(s.advantage)) throw new UserError(`the advantage estimator must be ${ADVANTAGE_ESTIMATORS.join(', ')}, got ${JSON.stringify(s.advantage)}`);
  checkAdvantageForMethod(s.advantage, method);
  // The numbers given were checked against their bounds with the other options (resolveOptions → checkBounds).
  return s;
}

/** LoRA shape from the options, or from --init-adapter (whose r, alpha and targets win; conflicts are errors). */
export function loraFrom(o: TrainerOptions, model: ModelConfig): { lora: LoraConfig; initial?: LoraWeights } {
  if (!o.initAdapter) {
    return { lora: { r: o.loraR ?? DEFAULT_LORA.r, alpha: o.loraAlpha ?? DEFAULT_LORA.alpha, targets: o.targets ?? DEFAULT_LORA.targets } };
  }
  const adapter = readAdapter(o.initAdapter, model);
  const conflict = (flag: string, given: unknown, found: unknown) => {
    throw new UserError(`--init-adapter ${o.initAdapter} has ${flag} ${JSON.stringify(found)}, but ${JSON.stringify(given)} was asked for; drop the flag or use another adapter`);
  };
  if (o.loraR !== undefined && o.loraR !== adapter.lora.r) conflict('r', o.loraR, adapter.lora.r);
  if (o.loraAlpha !== undefined && o.loraAlpha !== adapter.lora.alpha) conflict('lora_alpha', o.loraAlpha, adapter.lora.alpha);
  if (o.targets !== undefined && o.targets.join() !== adapter.lora.targets.join()) conflict('targets', o.targets.join(','), adapter.lora.targets.join(','));
  return { lora: adapter.lora, initial: adapter.weights };
}

/** Settings as a checkpoint holds them: those written before the run options were saved lack them. */
type SavedSettings = Omit<RunSettings, 'saveEvery' | 'device' | 'threads' | 'recompute' | 'precision' | 'quantize' | 'merge' | 'ppo'> & Partial<RunSettings>;

/**
 * Refuses an option given on resume with another value than the run has: `run` names the kind
 * of run in the message ("run", "on-policy run"). Not given, or the same value, is fine.
 */
export function keptOnResume(run: string, name: string, given: unknown, has: unknown): void {
  if (given !== undefined && JSON.stringify(given) !== JSON.stringify(has)) {
    throw new UserError(`a resumed ${run} keeps its ${name} (${JSON.stringify(has)}), so ${JSON.stringify(given)} cannot be asked for; drop the option, or start a new run`);
  }
}

/**
 * A checkpoint's settings with the options given for the resume applied. Older checkpoints,
 * which lack the run options, get the defaults.
 */
export function resumedSettings(saved: SavedSettings, o: TrainerOptions): RunSettings {
  const s: RunSettings = { saveEvery: TRAIN_DEFAULTS.saveEvery, device: TRAIN_DEFAULTS.device, threads: null, recompute: TRAIN_DEFAULTS.recompute, precision: null, quantize: TRAIN_DEFAULTS.quantize, merge: false, ppo: { ...PPO_DEFAULTS }, ...saved };
  const fixed = (name: string, given: unknown, has: unknown) => keptOnResume('run', name, given, has);
  fixed('method', o.method, s.method);
  fixed('batch size', o.batchSize, s.batchSize);
  fixed('max length', o.maxLength, s.maxLength);
  fixed('seed', o.seed, s.seed);
  fixed('optimizer', o.optimizer, s.optimizer.kind);
  fixed('LoRA rank', o.loraR, s.lora.r);
  fixed('LoRA alpha', o.loraAlpha, s.lora.alpha);
  fixed('LoRA targets', o.targets, s.lora.targets);
  // The estimator decides whether the run has a value head.
  fixed('advantage estimator', o.advantage, s.ppo.advantage);
  // The loss a run optimises: a checkpoint from before these options trained with token-mean and no top-K.
  const loss = { ...s.loss, lossAgg: s.loss.lossAgg ?? 'token-mean', opdTopK: s.loss.opdTopK ?? 0 };
  fixed('loss aggregation', o.lossAgg, loss.lossAgg);
  fixed('top-K distillation', o.opdTopK, loss.opdTopK);
  return {
    ...s,
    modelDir: o.modelDir ? path.resolve(o.modelDir) : s.modelDir,
    optimizer: { ...s.optimizer, lr: o.lr ?? s.optimizer.lr, maxGradNorm: o.maxGradNorm ?? s.optimizer.maxGradNorm },
    loss: { ...loss, epsLow: o.epsLow ?? s.loss.epsLow, epsHigh: o.epsHigh ?? s.loss.epsHigh, klBeta: o.klBeta ?? s.loss.klBeta },
    wOpd: o.wOpd ?? s.wOpd,
    wRl: o.wRl ?? s.wRl,
    saveEvery: o.saveEvery ?? s.saveEvery,
    device: o.device ?? s.device,
    threads: o.threads ?? s.threads,
    recompute: o.recompute ?? s.recompute,
    // Like the device, the arithmetic may change on resume: the weights it learns are fp32 either way.
    precision: o.precision ?? s.precision,
    // So may the base's storage (a resume on a smaller machine): the adapter is fp32 either way.
    quantize: o.quantize ?? s.quantize,
    merge: o.merge ?? s.merge,
    ppo: ppoSettings(o, s.ppo, s.method),
  };
}
