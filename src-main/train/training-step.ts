/**
 * The training step's types. The run loop (./run-loop.ts) and everything that handles weights,
 * batches or optimizer state are written against this file, which imports no code; the step
 * itself is the ONNX Runtime engine in ./step-engine.ts, built with its `createTrainStep`, running
 * the graph that ./step-graph.ts builds (./losses.ts for the method's loss, PPO-clip's in
 * ./step-loss.ts; ./step-optimizer.ts for clipping and the update). Types only, so that the
 * engine's files can import them without a loop back to the engine.
 *
 *     const step = await createTrainStep(modelDir, {
 *       lora: { r: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] },
 *       loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
 *       optimizer: { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
 *       device: 'cpu',
 *     });
 *     batch.oldFromPolicy = batch.responseMask;   // old := stopgrad(logp), in the step's own run
 *     const { weights: next, state, metrics, logprobs } = await step.step(batch, weights, state0);
 *     await step.close();
 *
 * ONNX Runtime blocks the thread that calls it, so the step runs in the thread that asks for
 * it: the trainer's worker thread (./trainer-thread.ts starts it) in the app and the CLI.
 * The defaults of every setting are in src-shared/training.ts.
 */
import type { LinearTarget } from '../model/decoder.js';
import type { LoraSpec } from '../model/lora-inputs.js';
import type { LossAgg, OptimizerKind, TrainMethod } from '../../src-shared/training.js';

export type { LossAgg, OptimizerKind, TrainMethod };

export interface LoraConfig {
  r: number;
  alpha: number; // scaling = alpha / r
  targets: LinearTarget[];
}

export interface OptimizerConfig {
  kind: OptimizerKind;
  lr: number;
  betas: [number, number]; // AdamW
  eps: number;
  weightDecay: number;
  /** Global gradient-norm clip; 0 disables. Scale = maxNorm / (norm + 1e-6) when norm > maxNorm. */
  maxGradNorm: number;
}

export interface LossConfig {
  method: TrainMethod;
  epsLow: number;
  epsHigh: number;
  klBeta: number; // k3 penalty against the base (adapter off)
  /**
   * How the per-token terms are averaged (./step-loss.ts `aggregator`); absent: 'token-mean',
   * what every step did before the option existed (a run's settings always name it).
   */
  lossAgg?: LossAgg;
  /**
   * Top-K on-policy distillation (./step-loss.ts `appendTopKDistillation`): K > 0 adds the
   * reverse KL over the teacher's top K tokens and a tail bin at every token with a distillation
   * weight, and the batch carries the teacher's top K instead of the sampled token's OPD term.
   * Absent or 0: off.
   */
  opdTopK?: number;
}

/** One LoRA pair for one linear, named by its PEFT module path (../model/lora-inputs.ts). */
export type LoraTensorSpec = LoraSpec;

/** LoRA weights keyed by PEFT key (`<module>.lora_A.weight`, `<module>.lora_B.weight`). */
export type LoraWeights = Map<string, Float32Array>;

/** Optimizer state: the step count and per-key moments (AdamW: m and v; SGD: none). */
export interface OptimizerState {
  step: number;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
}

/**
 * A padded batch, row-major [B, T]. Position t's token is input_ids[b][t]; the log-prob of
 * that token is read from the logits at t−1 (next-token prediction), so responseMask[b][0] is always 0.
 * oldLogprobs / advantages / refLogprobs are aligned to the same [B, T] grid (0 where masked).
 */
export interface StepBatch {
  batch: number;
  seqLen: number;
  inputIds: BigInt64Array; // [B*T]
  attentionMask: BigInt64Array; // [B*T], 1 real, 0 padding
  positionIds: BigInt64Array; // [B*T]
  responseMask: Float32Array; // [B*T], 1 on trained response tokens
  oldLogprobs: Float32Array; // [B*T]
  advantages: Float32Array; // [B*T]
  refLogprobs?: Float32Array; // [B*T], only when klBeta > 0
  /**
   * In-step old (one update per batch; see ./step-loss.ts): 1 where old_t is the policy's own
   * log-prob, computed inside the step with its gradient stopped; 0 where oldLogprobs (a
   * rollout's) gives it. Absent: all zeros, old is oldLogprobs everywhere.
   */
  oldFromPolicy?: Float32Array; // [B*T]
  /** OPD: the step adds opdWeights·(teacherLogprobs − old) to advantages. Absent: zeros. */
  teacherLogprobs?: Float32Array; // [B*T]
  opdWeights?: Float32Array; // [B*T]
  /**
   * Top-K OPD (LossConfig.opdTopK = K): at each grid position the teacher's K most likely
   * tokens and their log-probs ([B*T*K], position-major), and the weight of the position's
   * distillation term (w_opd on tokens of rows with a teacher, 0 elsewhere). Required when K > 0.
   */
  teacherTopK?: TeacherTopK;
  distillWeights?: Float32Array; // [B*T]
  /** With a value head (docs/design.md §Advantage estimators): GAE's returns R and the values at the start of the step, V_old. */
  returns?: Float32Array; // [B*T]
  valuesOld?: Float32Array; // [B*T]
}

/** A teacher's K most likely next tokens at each position of a [B, T] grid (position k's K entries at k·K…k·K+K−1). */
export interface TeacherTopK {
  k: number;
  /** Log-probs over the whole vocabulary, in descending order per position; 0 where nothing was scored. */
  logprobs: Float32Array; // [B*T*K]
  /** Token ids. */
  indices: Int32Array; // [B*T*K]
}

/**
 * The metrics a step's loss declares (./losses.ts), by key. PPO-clip's: `clipfrac`, the fraction
 * of masked tokens where the clip was active, and `approxKl`, the token mean of (ρ − 1) − log ρ
 * (k3 of KL(old ‖ new)).
 */
export type LossMetricValues = Readonly<Record<string, number>>;

export type StepMetrics = LossMetricValues & {
  loss: number;
  gradNorm: number; // before clipping
  tokens: number; // Σ mask
  /** With a value head: the value loss (already in `loss`, weighted by c_v). */
  valueLoss?: number;
  /** With top-K OPD: the token mean of the top-K KL over the tokens that distil (its weighted mean is in `loss`). */
  topkKl?: number;
};

export interface StepResult {
  weights: LoraWeights;
  state: OptimizerState;
  metrics: StepMetrics;
  /**
   * Gradients before clipping, for tests and diagnostics: from the host update only. The
   * in-graph update (a GPU's default) leaves them where they were made rather than fetch 4 bytes
   * per trained weight a step that nothing reads; `gradients()` gives them on either.
   */
  grads?: LoraWeights;
  /**
   * Policy log-probs at the weights fed in (before the update), on the [B, T] grid: the
   * in-step old. Only the trained tokens (responseMask ≠ 0) are scored; every other position is 0.
   */
  logprobs: Float32Array;
  /** With a value head: the values at the weights fed in, on the same grid. */
  values?: Float32Array;
}

/**
 * A compiled training step for one model + LoRA + loss + optimizer configuration. A step with
 * a value head (`valueHead`) trains it as two more parameters: its `weights` maps then also
 * hold `value_head.weight` and `value_head.bias` (./value-head.ts), the optimizer state and
 * gradients too, and its batches carry returns and valuesOld.
 */
export interface TrainStep {
  readonly specs: LoraTensorSpec[];
  readonly executionProvider: string;
  readonly valueHead: boolean;
  /** Policy (base + LoRA) log-probs of every token on the [B, T] grid, no gradient (scoring; the old of a step without in-step old). */
  policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array>;
  /** Log-probs and values of every token (a step with a value head; `weights` holds it), no gradient. */
  policyValues(batch: StepBatch, weights: LoraWeights): Promise<{ logprobs: Float32Array; values: Float32Array }>;
  /** Base-model (adapter off) log-probs: the OPD teacher and the KL reference. */
  baseLogprobs(batch: StepBatch): Promise<Float32Array>;
  /**
   * The base model's (adapter off) K most likely tokens and their log-probs at each response
   * token of the batch (responseMask ≠ 0; 0 elsewhere), with the response tokens' own log-probs
   * beside them: the top-K OPD teacher. Never holds more than a vocabulary chunk per position.
   */
  baseTopK(batch: StepBatch, k: number): Promise<{ logprobs: Float32Array; topK: TeacherTopK }>;
  /**
   * Loss, gradients, clipping and one optimizer update, in place: the new values are written
   * into `weights`' arrays and `state`'s moments (made on the first step), and the result holds
   * those same arrays (./step-optimizer.ts applyUpdate says why). A caller that still needs the
   * weights or moments it passed passes copies (./lora.ts cloneWeights). A non-finite loss or
   * gradient norm leaves them as they were. The batch is not written to. A step
   * built with a micro-batch (./step-engine.ts TrainStepOptions.microBatch) runs the batch in
   * passes of that many rows and sums them (./micro-batch.ts): the same result as one pass.
   */
  step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult>;
  close(): Promise<void>;
}

