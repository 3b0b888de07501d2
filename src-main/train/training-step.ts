// The seam between the training-step graph (autodiff, loss, optimizer: src-main/train/step/)
// and the trainer around it (batches, LoRA init, PEFT I/O, checkpoints, the loop). Both sides
// are written against this file; see SPEC §5 for the semantics of every field.
import type { LinearTarget } from '../model/decoder.js';

export type TrainMethod = 'rl' | 'opd' | 'combine';
export type OptimizerKind = 'adamw' | 'sgd';

export interface LoraConfig {
  r: number; // default 16
  alpha: number; // default 32; scaling = alpha / r
  targets: LinearTarget[]; // default q,k,v,o,gate,up,down
}

export interface OptimizerConfig {
  kind: OptimizerKind;
  lr: number; // default 1e-4
  betas: [number, number]; // AdamW, default [0.9, 0.98]
  eps: number; // default 1e-8
  weightDecay: number; // default 0
  /** Global gradient-norm clip; 0 disables. Default 1.0. Scale = maxNorm / (norm + 1e-6) when norm > maxNorm. */
  maxGradNorm: number;
}

export interface LossConfig {
  method: TrainMethod;
  epsLow: number; // 0.2
  epsHigh: number; // 0.28 for rl, 0.2 for opd (combine: 0.28)
  klBeta: number; // k3 penalty against the base (adapter off); default 0
}

/**
 * One LoRA pair for one linear, named by its PEFT module path
 * (`base_model.model.model.layers.0.self_attn.q_proj`). A is [r, in], B is [out, r], row-major.
 */
export interface LoraTensorSpec {
  module: string;
  layer: number;
  target: LinearTarget;
  inFeatures: number;
  outFeatures: number;
}

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
 * that token is read from the logits at t−1 (SPEC §5), so responseMask[b][0] is always 0.
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
   * In-step old (one update per batch; see step/loss.ts): 1 where old_t is the policy's own
   * log-prob, computed inside the step with its gradient stopped; 0 where oldLogprobs (a
   * rollout's) gives it. Absent: all zeros, old is oldLogprobs everywhere.
   */
  oldFromPolicy?: Float32Array; // [B*T]
  /** OPD: the step adds opdWeights·(teacherLogprobs − old) to advantages. Absent: zeros. */
  teacherLogprobs?: Float32Array; // [B*T]
  opdWeights?: Float32Array; // [B*T]
}

export interface StepMetrics {
  loss: number;
  gradNorm: number; // before clipping
  clipfrac: number; // fraction of masked tokens where the clip was active
  approxKl: number; // token-mean k3 of old vs new
  tokens: number; // Σ mask
}

export interface StepResult {
  weights: LoraWeights;
  state: OptimizerState;
  metrics: StepMetrics;
  /** Gradients before clipping, for tests and diagnostics. */
  grads: LoraWeights;
  /** Policy log-probs at the weights fed in (before the update), on the [B, T] grid: the in-step old. */
  logprobs: Float32Array;
}

/** A compiled training step for one model + LoRA + loss + optimizer configuration. */
export interface TrainStep {
  readonly specs: LoraTensorSpec[];
  readonly executionProvider: string;
  /** Policy (base + LoRA) log-probs on the [B, T] grid, no gradient (scoring; the old of a step without in-step old). */
  policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array>;
  /** Base-model (adapter off) log-probs: the OPD teacher and the KL reference. */
  baseLogprobs(batch: StepBatch): Promise<Float32Array>;
  /** Loss, gradients, clipping and one optimizer update. Pure: inputs are not mutated. */
  step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult>;
  close(): Promise<void>;
}
