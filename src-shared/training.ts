/**
 * Training's vocabulary and defaults, defined once. The trainer (src-main/train/), the
 * `hindsight train` flags and their --help, the background training of live capture, the
 * API contract and the Training page all read them from here, so a default changed here
 * changes everywhere. Node-free on purpose: the browser bundle loads this file.
 */
import { number, ValidationError, type Schema } from './validate.js';
import { methodRecord, TRAIN_METHODS, type TrainMethod } from './training-methods.js';

// The methods themselves are records in ./training-methods.ts; their names are re-exported
// here because every setting of a run is read from this file.
export { TRAIN_METHODS, type TrainMethod };

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

/**
 * How the frozen base's projections (and the LM head) are stored in a run or for inference:
 * `none` keeps them as the model has them; `int8` and `int4` keep them as blockwise quantised
 * codes (MatMulNBits' layout, docs/design.md §Quantisation), in training too (QLoRA,
 * docs/design.md §QLoRA): the LoRA weights, their gradients, the optimizer and the loss stay
 * fp32. Defined here, Node-free, so that the Training page can offer the choice.
 */
export type Quantize = 'none' | 'int8' | 'int4';
export const QUANTIZE_CHOICES: readonly Quantize[] = ['none', 'int8', 'int4'];

/**
 * How a run holds its frozen base, in one word for its card and the Past runs table: the
 * quantisation when there is one (it wins over the precision in the step), else the precision
 * asked for or, when none was, the device's default: what the step ran with.
 */
export function baseWeightsOf(run: { device: TrainDevice; quantize?: Quantize; precision?: Precision }): Quantize | Precision {
  return run.quantize && run.quantize !== 'none' ? run.quantize : (run.precision ?? defaultPrecision(run.device));
}

/**
 * How a step's per-token loss becomes one number (docs/design.md §Losses, "Aggregation"):
 * `token-mean` averages over every trained token of the batch, so a long reply weighs as many
 * times more as it has tokens; `sample-mean` averages each sample over its own trained tokens,
 * sums, and divides by the batch's samples (one with no trained token still counts), so every
 * sample weighs the same: OpenClaw-RL's default (slime without --calculate-per-token-loss).
 */
export type LossAgg = 'token-mean' | 'sample-mean';
export const LOSS_AGGS: readonly LossAgg[] = ['token-mean', 'sample-mean'];

/** The top-K of on-policy distillation when it is turned on without a K: OpenClaw-RL's (--distill-topk 50). */
export const OPD_TOPK_ON = 50;

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

/**
 * A run's recomputation in two words for its card and the Past runs table, beside its base: only
 * when it was chosen (on or off); `auto`, or a run recorded before the choice, adds nothing, to
 * keep them short.
 */
export function recomputeWordsOf(run: { recompute?: RecomputeMode }): string | null {
  return run.recompute && run.recompute !== 'auto' ? `recomputation ${run.recompute}` : null;
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
  /** The frozen base as the model has it; int8 / int4 store it quantised (QLoRA). */
  quantize: 'none' as Quantize,

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
  /**
   * How the per-token loss is averaged over the batch (LossAgg): sample-mean, as OpenClaw-RL, since
   * under token-mean one long reply made over half of a demo run's step in 5 of 50 steps
   * (bench/loss-agg.ts; docs/design.md §Losses, "Aggregation").
   */
  lossAgg: 'sample-mean' as LossAgg,
  /** On-policy distillation over the teacher's top K tokens and a tail bin; 0: the sampled token's advantage (docs/design.md §Top-K distillation). */
  opdTopK: 0,
} as const;

/** PPO-clip's upper epsilon: the method's own default (./training-methods.ts). */
export function defaultEpsHigh(method: TrainMethod): number {
  return methodRecord(method).defaults.epsHigh;
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

/** A run's tokens per row when none is asked for: TRAIN_DEFAULTS.maxLength, or the model's `positions` (max_position_embeddings) if fewer. */
export function defaultMaxLength(positions: number): number {
  return Math.min(TRAIN_DEFAULTS.maxLength, positions);
}

/** The reason, in a run's `skipped` counts, of samples that do not fit `maxLength` tokens. */
export function overLengthReason(maxLength: number): string {
  return `over ${maxLength.toLocaleString('en-US')} tokens`;
}

/**
 * The line that says samples were left out for their length: "3 samples over 2,048 tokens
 * skipped; raise --max-length (this model holds up to 4,096)". Its advice must be one the reader
 * can follow on that model: when the run's max length already is the model's `positions`
 * (max_position_embeddings), no setting can train them, and the line says so instead.
 * `reader`: the CLI's flag or the Training page's field.
 */
export function overLengthNote(count: number, maxLength: number, positions: number, reader: 'cli' | 'app' = 'cli'): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const what = `${n(count)} sample${count === 1 ? '' : 's'} ${overLengthReason(maxLength)} skipped`;
  if (maxLength >= positions) return `${what}; this model reads at most ${n(positions)} tokens, so ${count === 1 ? 'it cannot' : 'they cannot'} be trained on it (a model with more positions could)`;
  return reader === 'cli'
    ? `${what}; raise --max-length (this model holds up to ${n(positions)})`
    : `${what}; raise Max length (tokens), up to this model's ${n(positions)}, to train ${count === 1 ? 'it' : 'them'}`;
}

/**
 * One numeric training option's bounds: the CLI flag (`hindsight train --<flag>`), the field
 * the app sends (`trainStart`'s TrainConfig, a dotted path under it; null when the app does
 * not send it), the name the training step's own checks use, whether it is a whole number, and
 * its range. The CLI, the API contract, the run settings and the training step all check
 * against these (checkBound, boundProblem), so an option has one set of bounds everywhere.
 */
export interface OptionBound {
  flag: string;
  field: string | null;
  label: string;
  integer: boolean;
  min: number;
  /** `min` itself is refused (> min rather than ≥ min). */
  minExclusive?: boolean;
  /** None: any finite number from `min` up. */
  max?: number;
  /** `max` itself is refused (< max rather than ≤ max). */
  maxExclusive?: boolean;
}

const int = (flag: string, field: string | null, label: string, min: number, max?: number): OptionBound => ({ flag, field, label, integer: true, min, max });
/** A real number ≥ min (> min with `above`), up to `max` (below it with `below`). */
const real = (flag: string, field: string | null, label: string, min: number, opts: { above?: boolean; max?: number; below?: boolean } = {}): OptionBound => ({
  flag, field, label, integer: false, min, ...(opts.above ? { minExclusive: true } : {}),
  ...(opts.max !== undefined ? { max: opts.max } : {}), ...(opts.below ? { maxExclusive: true } : {}),
});

/**
 * The bounds of every numeric option of `hindsight train` (and of its app form), defined once.
 * The maxima of sizes (steps, batch size, rank, lengths, …) are sanity limits against a typo
 * that would otherwise run out of memory or time, well above any run this app makes.
 */
export const TRAIN_BOUNDS = {
  steps: int('steps', 'steps', 'steps', 1, 1_000_000),
  batchSize: int('batch-size', 'batchSize', 'batch size', 1, 4096),
  // Rows per pass of the step (gradient accumulation); unset: the most the memory estimate fits.
  microBatch: int('micro-batch', 'microBatch', 'micro-batch', 1, 4096),
  // 0 would train nothing while the run looks fine. AdamW moves every weight by about lr a
  // step, and LoRA's weights are far smaller than 1, so a rate above 1 is a typo, not a setting.
  lr: real('lr', 'lr', 'learning rate', 0, { above: true, max: 1 }),
  loraR: int('lora-r', 'loraR', 'LoRA rank', 1, 1024),
  // The update is scaled by alpha / r: alpha 0 would leave the model as it is.
  loraAlpha: real('lora-alpha', 'loraAlpha', 'LoRA alpha', 0, { above: true, max: 100_000 }),
  // A row is a chat template's prompt plus at least one reply token: under 16 tokens no chat
  // fits, and every sample would be skipped. Whether the model's positions hold the length
  // is checked against its config.json (run-settings.ts maxLengthFor).
  maxLength: int('max-length', 'maxLength', 'max length', 16, 1_048_576),
  /** 0: only at the end. */
  saveEvery: int('save-every', 'checkpointEvery', 'checkpoint interval', 0),
  /** 0: only at the start and the end. */
  evalEvery: int('eval-every', null, 'evaluation interval', 0),
  /** 0 turns clipping off. */
  maxGradNorm: real('max-grad-norm', null, 'max grad norm', 0),
  klBeta: real('kl-beta', null, 'KL β', 0),
  // PPO-clip keeps the ratio within [1 − ε_low, 1 + ε_high]: ε_low ≥ 1 would let it reach 0
  // (no lower clip at all), so ε_low stays below 1; ε_high has no such limit.
  epsLow: real('eps-low', null, 'clip ε_low', 0, { max: 1, below: true }),
  epsHigh: real('eps-high', null, 'clip ε_high', 0),
  // Combine's advantage is w_opd·gap + w_rl·reward: a negative weight would train against the signal.
  wOpd: real('w-opd', null, 'teacher gap weight', 0),
  wRl: real('w-rl', null, 'reward weight', 0),
  // The teacher's top K per reply token (0: off). Each position keeps K head rows of the student
  // ([N, K, hidden]), so K is kept to a size a distillation uses (OpenClaw-RL: 50; TRL's SDFT: 100).
  opdTopK: int('opd-topk', 'opdTopK', 'top-K', 0, 1024),
  threads: int('threads', null, 'threads', 1, 1024),
  // The PRNG (mulberry32) takes 32 bits: a larger seed would silently repeat a smaller one's stream.
  seed: int('seed', 'seed', 'seed', 0, 2 ** 32 - 1),
  ppoEpochs: int('ppo-epochs', 'onPolicy.ppoEpochs', 'PPO epochs', 1, 100),
  /** 0: the whole batch is one minibatch; at most the largest batch. */
  minibatch: int('minibatch', null, 'minibatch', 0, 4096),
  gamma: real('gamma', null, 'γ', 0, { max: 1 }),
  lambda: real('lambda', null, 'λ', 0, { max: 1 }),
  // The value clip is a distance the value may move per batch: 0 would freeze the value head.
  valueClip: real('value-clip', null, 'value clip', 0, { above: true }),
  valueCoef: real('value-coef', null, 'value loss weight', 0),
  // On-policy runs (hindsight train --on-policy).
  rollouts: int('rollouts', 'onPolicy.rollouts', 'rollouts per context', 1, 256),
  contextsPerStep: int('contexts-per-step', 'onPolicy.contextsPerStep', 'contexts per step', 1, 4096),
  maxTurns: int('max-turns', 'onPolicy.maxTurns', 'max turns', 1, 100),
  maxTokens: int('max-tokens', 'onPolicy.maxTokens', 'max tokens', 1, 131_072),
  /** 0 is greedy. */
  temperature: real('temperature', null, 'temperature', 0),
  // The nucleus is the smallest set of tokens whose mass reaches top-p: 0 would hold none.
  topP: real('top-p', null, 'top-p', 0, { above: true, max: 1 }),
  toolTimeoutMs: int('tool-timeout-ms', null, 'tool timeout', 1),
  toolErrorLimit: int('tool-error-limit', null, 'tool error limit', 1),
  votes: int('votes', null, 'votes', 1),
} as const satisfies Record<string, OptionBound>;

export type BoundedOption = keyof typeof TRAIN_BOUNDS;
export const BOUNDED_OPTIONS = Object.keys(TRAIN_BOUNDS) as BoundedOption[];

/** The range in words: "> 0 and ≤ 1", "an integer ≥ 1 and ≤ 4096". */
export function boundText(option: BoundedOption): string {
  const b: OptionBound = TRAIN_BOUNDS[option];
  const range = `${b.minExclusive ? '>' : '≥'} ${b.min}${b.max === undefined ? '' : ` and ${b.maxExclusive ? '<' : '≤'} ${b.max}`}`;
  return b.integer ? `an integer ${range}` : range;
}

/** Why `value` is outside the option's bounds ("must be > 0 and ≤ 1, got 0"), or null when it is inside. */
export function boundProblem(option: BoundedOption, value: number): string | null {
  const b: OptionBound = TRAIN_BOUNDS[option];
  const inside = typeof value === 'number' && Number.isFinite(value) && (!b.integer || Number.isInteger(value)) &&
    (b.minExclusive ? value > b.min : value >= b.min) && (b.max === undefined || (b.maxExclusive ? value < b.max : value <= b.max));
  return inside ? null : `must be ${boundText(option)}, got ${typeof value === 'number' ? value : JSON.stringify(value)}`;
}

/** The one error line of a value outside the option's bounds, naming its flag ("--lr must be > 0 and ≤ 1, got 0"), or null. */
export function checkBound(option: BoundedOption, value: number): string | null {
  const problem = boundProblem(option, value);
  return problem && `--${TRAIN_BOUNDS[option].flag} ${problem}`;
}

/** The attributes of the option's number input on a page: the inclusive bounds (a browser cannot say "> 0"), and its step. */
export function inputBounds(option: BoundedOption): { min?: number; max?: number; step: number | 'any' } {
  const b: OptionBound = TRAIN_BOUNDS[option];
  return { ...(b.minExclusive ? {} : { min: b.min }), ...(b.max === undefined || b.maxExclusive ? {} : { max: b.max }), step: b.integer ? 1 : 'any' };
}

/** The API contract's validator of a bounded option: a finite number within TRAIN_BOUNDS, or a ValidationError naming the field. */
export function bounded(option: BoundedOption): Schema<number> {
  const finite = number();
  return {
    parse(value, field) {
      const n = finite.parse(value, field);
      const problem = boundProblem(option, n);
      if (problem) throw new ValidationError(field, problem);
      return n;
    },
  };
}
