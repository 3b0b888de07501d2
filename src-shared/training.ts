/**
 * Training's vocabulary and defaults, defined once. The trainer (src-main/train/), the
 * `hindsight train` flags and their --help, the background training of live capture, the
 * API contract and the Training page all read them from here, so a default changed here
 * changes everywhere. Node-free on purpose: the browser bundle loads this file.
 */

export type TrainMethod = 'rl' | 'opd' | 'combine';
export const TRAIN_METHODS: readonly TrainMethod[] = ['rl', 'opd', 'combine'];

/**
 * Where a model runs (ONNX Runtime's execution provider): `cpu` everywhere; `cuda` once its
 * provider is installed (`npm run setup:gpu`); `webgpu`, which onnxruntime-node carries for
 * Linux x64, Windows and macOS, on any GPU with a Vulkan, Direct3D 12 or Metal driver
 * (docs/design.md §Devices).
 */
export type TrainDevice = 'cpu' | 'cuda' | 'webgpu';
export const TRAIN_DEVICES: readonly TrainDevice[] = ['cpu', 'cuda', 'webgpu'];

/**
 * The arithmetic of the frozen base's projections (q/k/v/o/gate/up/down): `fp16` stores those
 * weights in half precision and multiplies in it (a GPU's tensor cores), while everything a
 * run learns or sums stays fp32: LoRA's A and B, the norms, attention, the LM head, the
 * log-softmax, the loss, the optimizer (docs/design.md §Precision). `fp32` everywhere else.
 */
export type Precision = 'fp32' | 'fp16';
export const PRECISIONS: readonly Precision[] = ['fp32', 'fp16'];

/**
 * fp16 on CUDA, where it scored ×1.8 and trained ×1.2 faster than fp32 on an H200 with the
 * CPU's first-step loss to 1e-6. fp32 elsewhere: the CPU's fp16 matmul is slower than its
 * fp32, and on WebGPU fp16 gained under 10% while its gradients at the 0.6B shape were wrong
 * (a gradient norm of 0.30 for fp32's 0.72; README, GPU). `--precision fp16` still asks for it.
 */
export function defaultPrecision(device: TrainDevice): Precision {
  return device === 'cuda' ? 'fp16' : 'fp32';
}

export type OptimizerKind = 'adamw' | 'sgd';
export const OPTIMIZER_KINDS: readonly OptimizerKind[] = ['adamw', 'sgd'];

/**
 * Activation recomputation in the training step (docs/design.md §Memory): `on` recomputes
 * each layer's activations in the backward pass instead of keeping them, `auto` does so for
 * runs whose rows may reach {@link RECOMPUTE_AUTO_FROM} tokens.
 */
export type RecomputeMode = 'auto' | 'on' | 'off';
export const RECOMPUTE_MODES: readonly RecomputeMode[] = ['auto', 'on', 'off'];

/**
 * Where `auto` turns recomputation on: --max-length at or above this. Measured with
 * bench/train-memory.ts (README, Benchmarks): from here on the activations it frees are a
 * large share of the step's peak memory, for about a third more CPU time per step.
 */
export const RECOMPUTE_AUTO_FROM = 1024;

/** Whether a run with this mode and --max-length recomputes. */
export function recomputeOn(mode: RecomputeMode, maxLength: number): boolean {
  return mode === 'on' || (mode === 'auto' && maxLength >= RECOMPUTE_AUTO_FROM);
}

/** The decoder linears a LoRA adapter can target, in canonical (PEFT module) order. */
export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/**
 * The trainer's defaults: what a run uses for every setting it is not given. Steps have no
 * number here: an unset step count means one epoch, ⌈rows / batch size⌉.
 */
export const TRAIN_DEFAULTS = {
  /** The CLI's method when --method is left out. */
  method: 'rl' as TrainMethod,
  batchSize: 16,
  /**
   * Tokens per row (prompt + reply); capped by the model's own maximum. Longer chats keep
   * their system turn and latest turns; a longer reply is skipped (overLengthNote).
   */
  maxLength: 2048,
  seed: 0,
  device: 'cpu' as TrainDevice,
  /** A checkpoint every N steps and at the end; 0: only at the end. */
  saveEvery: 10,
  /** Activation recomputation: on for long rows (recomputeOn). */
  recompute: 'auto' as RecomputeMode,

  // LoRA: scaling alpha / r; PEFT's lora_dropout is written as 0 (no dropout is applied).
  loraR: 16,
  loraAlpha: 32,
  loraDropout: 0,
  targets: LORA_TARGETS as readonly LoraTarget[],

  // Optimizer. The learning rate is constant over the run.
  optimizer: 'adamw' as OptimizerKind,
  lr: 1e-4,
  betas: [0.9, 0.98] as readonly [number, number],
  adamEps: 1e-8,
  weightDecay: 0,
  /** Global gradient-norm clip; 0 disables it. */
  maxGradNorm: 1,

  // PPO-clip loss; epsHigh depends on the method (defaultEpsHigh).
  epsLow: 0.2,
  /** k3 KL penalty against the base model (adapter off). */
  klBeta: 0,
  /** Combined advantages: wOpd·(teacher − old) + wRl·reward. */
  wOpd: 1,
  wRl: 1,
} as const;

/** PPO-clip's upper epsilon: 0.28 when rewards drive the update (rl, combine), 0.2 for pure distillation. */
export function defaultEpsHigh(method: TrainMethod): number {
  return method === 'opd' ? 0.2 : 0.28;
}

/**
 * Where the app (the Training page's form, live capture's background runs) starts rather
 * than from TRAIN_DEFAULTS: Combined uses whichever signal a sample has, a reward or a
 * hint, and the page's form needs a step count to show.
 */
export const APP_TRAIN_DEFAULTS = {
  method: 'combine' as TrainMethod,
  steps: 50,
} as const;

/**
 * The hint length rule (docs/design.md §Votes): a hint a judge extracted is dropped when it
 * has this many characters or fewer after trimming. A hint the user typed is always used;
 * the annotator only points out that it is this short (shortHintNote).
 */
export const SHORT_HINT_CHARS = 10;

/** The annotator's note on a typed hint shorter than the judges' rule, or null. */
export function shortHintNote(hint: string | null | undefined): string | null {
  const length = hint?.trim().length ?? 0;
  if (length === 0 || length > SHORT_HINT_CHARS) return null;
  return `${length} character${length === 1 ? '' : 's'}: a judge's hint needs more than ${SHORT_HINT_CHARS}, but a hint you type is always used for training.`;
}

/** The reason, in a run's `skipped` counts, of samples that do not fit `maxLength` tokens. */
export function overLengthReason(maxLength: number): string {
  return `over ${maxLength.toLocaleString('en-US')} tokens`;
}

/**
 * The line that says samples were left out for their length: "3 samples over 2,048 tokens
 * skipped; raise --max-length". `remedy` is how the reader can train them.
 */
export function overLengthNote(count: number, maxLength: number, remedy = 'raise --max-length'): string {
  return `${count.toLocaleString('en-US')} sample${count === 1 ? '' : 's'} ${overLengthReason(maxLength)} skipped; ${remedy}`;
}
