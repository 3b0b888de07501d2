/**
 * PPO-clip, the policy loss of docs/design.md §Losses (the `ppo-clip` record of ./losses.ts,
 * which every built-in method names), as graph nodes on fp32 [B, T] log-probs:
 *
 *   ρ = exp(logp − old)
 *   obj = min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A)
 *   loss = −Σ mask·obj / Σ mask                       (token mean over the whole batch)
 *        + β · Σ mask·k3 / Σ mask,  k3 = exp(ref − logp) − (ref − logp) − 1   (when β > 0)
 *
 * rl, opd and combine differ only in their advantages (built by the trainer) and default
 * ε_high (their records in src-shared/training-methods.ts), so the graph is the same for all three. With a value head (the `gae` estimator) the
 * loss adds c_v · the clipped value loss ({@link appendValueLoss}, docs/design.md §Advantage estimators).
 *
 * Aggregation ({@link aggregator}, --loss-agg; docs/design.md §Losses): every "mean over the
 * trained tokens" here is the run's. `token-mean` is the Σ mask·x / Σ mask above; `sample-mean`
 * is Σ_b (Σ_t mask·x / max(Σ_t mask, 1)) / B, each row's own mean summed and divided by the
 * rows of the batch (a row with no trained token adds 0 and still counts), as OpenClaw-RL's
 * slime does by default. The host feeds either as one weight per token (./step-feeds.ts
 * lossWeightGrid): token-mean mask / max(Σ mask, 1), sample-mean mask / (max(Σ_t mask of its row,
 * 1) · B), both made over the whole batch, so both are Σ w·x in the graph and a micro-batch's pass
 * (gradient accumulation, ./micro-batch.ts) gives exactly its share of the batch's mean: every
 * term of the loss and every metric is such a mean, so the passes' sums are the one-pass step's.
 *
 * Top-K distillation ({@link appendTopKDistillation}, --opd-topk K): at each token the reverse
 * KL from the student to the teacher over the teacher's top K tokens plus a tail bin, weighted
 * by w_opd where the row has a teacher, averaged like the rest and added to the loss.
 *
 * Metrics, computed alongside (no gradient flows through them):
 *   clipfrac   the fraction of masked tokens whose clipped term won the min strictly, i.e.
 *              where the token's gradient is zero (ρ > 1+ε_high with A > 0, ρ < 1−ε_low with A < 0)
 *   approx_kl  the token mean of (ρ − 1) − log ρ = exp(logp − old) − (logp − old) − 1: the k3
 *              estimate of KL(old ‖ new) on tokens drawn from old
 *   tokens     Σ mask
 * Σ mask is floored at 1 so an all-masked batch gives loss 0, not NaN.
 *
 * In-step old ({@link appendInStepOld}). With one update per batch, `old` is the policy's own
 * log-prob at the start of the step, so it need not come from a separate forward pass:
 *
 *   old = oldFromPolicy ? stopgrad(logp) : old_in        (old_in: rollout log-probs)
 *   A   = A_in + w_opd·(teacher − old)                   (w_opd = 0 where a row has no teacher)
 *
 * Then ρ = 1 exactly in value, the gradient is A·∇logp (the min of two equal terms splits its
 * gradient evenly between them, and the clip passes it inside its closed range), clipfrac and
 * approx_kl are 0, and the OPD advantage sees the same old as the ratio, as it would with old
 * computed before the step. On a 125M model (bench/train.ts) this saves the forward pass that
 * computed old: about a third of a trainer step's CPU time, and for rl the forward session.
 */
import { GraphBuilder, int } from '../graph/ir.js';
import { stopGradient } from '../graph/autodiff.js';
import type { LossConfig } from './training-step.js';

export interface LossInputs {
  logprobs: string;
  mask: string;
  old: string;
  advantages: string;
  /** Reference (base-model) log-probs; required when klBeta > 0. */
  ref?: string;
  /** The run's mean over the trained tokens ({@link aggregator}); default the token mean of `mask`. */
  mean?: Aggregate;
}

/** A per-token value [N] → its mean over the trained tokens under the run's --loss-agg (a scalar). */
export type Aggregate = (value: string) => string;

/**
 * The run's mean over the trained tokens: with `weights` (float32 [N], the host's weight of each
 * token in the batch's mean, token-mean or sample-mean; ./step-feeds.ts lossWeightGrid), Σ w·x,
 * which the training graph always takes; without, the token mean of this pass's own tokens,
 * Σ mask·x / max(Σ mask, 1). `tokens` is Σ mask either way.
 */
export function aggregator(b: GraphBuilder, mask: string, weights?: string): { mean: Aggregate; tokens: string } {
  const tokens = sumAll(b, mask);
  if (weights) return { mean: (v) => sumAll(b, b.mul(weights, v)), tokens };
  const denom = b.max(tokens, b.scalar(1));
  return { mean: (v) => b.div(sumAll(b, b.mul(mask, v)), denom), tokens };
}

export interface LossValues {
  loss: string;
  clipfrac: string;
  approxKl: string;
  tokens: string;
}

/** Σ of every element of x, a scalar. */
export const sumAll = (b: GraphBuilder, x: string) => b.op('ReduceSum', [x], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;

/** k3(p ‖ q) = exp(p − q) − (p − q) − 1, element-wise, for two log-prob tensors (the KL penalty passes ref and logp, approx KL logp and old). */
function k3(b: GraphBuilder, p: string, q: string): string {
  const d = b.sub(p, q);
  return b.sub(b.sub(b.exp(d), d), b.scalar(1));
}

export interface InStepOldInputs {
  logprobs: string;
  /** Rollout log-probs where given. */
  old: string;
  /** 1 where old is the policy's own log-prob (stopgrad), 0 where `old` gives it. */
  oldFromPolicy: string;
  /** The part of the advantage that does not depend on old (w_rl·r). */
  advantages: string;
  teacher: string;
  opdWeights: string;
}

/** The old log-probs and advantages the loss trains on (see the module comment). */
export function appendInStepOld(b: GraphBuilder, x: InStepOldInputs): { old: string; advantages: string } {
  const fromPolicy = b.greater(x.oldFromPolicy, b.scalar(0.5));
  const old = b.where(fromPolicy, stopGradient(b, x.logprobs), x.old);
  const advantages = b.add(x.advantages, b.mul(x.opdWeights, b.sub(x.teacher, old)));
  return { old, advantages };
}

export function appendPolicyLoss(b: GraphBuilder, x: LossInputs, cfg: LossConfig): LossValues {
  const tokenMean = aggregator(b, x.mask);
  const tokens = tokenMean.tokens;
  const maskedMean = x.mean ?? tokenMean.mean;

  const ratio = b.exp(b.sub(x.logprobs, x.old));
  const clipped = b.op('Clip', [ratio, b.scalar(1 - cfg.epsLow), b.scalar(1 + cfg.epsHigh)], {}, 1, [{ dtype: 'float32', shape: b.shapeOf(ratio) }])[0]!;
  const unclippedObj = b.mul(ratio, x.advantages);
  const clippedObj = b.mul(clipped, x.advantages);
  let loss = b.neg(maskedMean(b.min(unclippedObj, clippedObj)));
  if (cfg.klBeta > 0) {
    if (!x.ref) throw new Error('the KL penalty (klBeta > 0) needs reference log-probs');
    loss = b.add(loss, b.mul(b.scalar(cfg.klBeta), maskedMean(k3(b, x.ref, x.logprobs))));
  }
  const clipfrac = maskedMean(b.cast(b.less(clippedObj, unclippedObj), 'float32'));
  // k3(logp ‖ old) = (ρ − 1) − log ρ.
  const approxKl = maskedMean(k3(b, x.logprobs, x.old));
  return { loss, clipfrac, approxKl, tokens };
}

/** The value head's loss settings (docs/design.md §Advantage estimators). */
export interface ValueHeadConfig {
  /** ε_v: how far a value may move from its start-of-step value before the clipped term binds. */
  clip: number;
  /** c_v: the value loss's weight in the total loss. */
  coef: number;
}

export interface ValueLossInputs {
  values: string;
  /** The values at the start of the step (no gradient). */
  valuesOld: string;
  returns: string;
  mask: string;
  /** The run's mean over the trained tokens; default the token mean of `mask`. */
  mean?: Aggregate;
}

/**
 * ½ · mean of max((V − R)², (V_old + clip(V − V_old, −ε_v, ε_v) − R)²) over the trained
 * tokens, the run's mean as for the policy loss (token-mean: Σ mask·… / Σ mask, floored at 1).
 */
export function appendValueLoss(b: GraphBuilder, x: ValueLossInputs, cfg: ValueHeadConfig): string {
  const square = (v: string) => b.mul(v, v);
  const moved = b.clip(b.sub(x.values, x.valuesOld), b.scalar(-cfg.clip), b.scalar(cfg.clip));
  const unclipped = square(b.sub(x.values, x.returns));
  const clipped = square(b.sub(b.add(x.valuesOld, moved), x.returns));
  const mean = x.mean ?? aggregator(b, x.mask).mean;
  return b.mul(b.scalar(0.5), mean(b.max(unclipped, clipped)));
}

// ── top-K on-policy distillation ─────────────────────────────────────────────────────────

/**
 * Where the tail's log is taken by its series rather than as log(1 − eˢ): above −ln 2 the
 * subtraction would lose the tail's digits (1 − e^(−1e-7) is 1.19e-7 in fp32, for 1.0e-7).
 */
const LN2 = Math.LN2;
/** Top-K mass is capped at e^(−1e-7) before the tail is taken, as OpenClaw-RL does, so the tail is never log 0. */
export const TAIL_CAP = -1e-7;

/**
 * log(1 − eˢ) for s ≤ 0 [any shape], with its gradient: log1p(−eˢ) below −ln 2, and above it
 * log(−s) + log(1 + s/2 + s²/6 + …) (1 − eˢ = −s·Σ sⁿ/(n+1)!, eleven terms: within 1e-10 on
 * (−ln 2, 0)), each branch fed a clamped s so the branch not taken stays finite (a Where's
 * gradient is 0·∞ = NaN otherwise). torch.log(−torch.expm1(s)) to float precision.
 */
export function log1mExp(b: GraphBuilder, s: string): string {
  const far = b.min(s, b.scalar(-LN2));
  const direct = b.log(b.sub(b.scalar(1), b.exp(far)));
  const near = b.max(s, b.scalar(-LN2));
  // Horner: Σ_{n=0}^{10} sⁿ/(n+1)!
  let poly = b.scalar(1 / factorial(11));
  for (let n = 9; n >= 0; n--) poly = b.add(b.mul(poly, near), b.scalar(1 / factorial(n + 1)));
  const series = b.add(b.log(b.neg(near)), b.log(poly));
  return b.where(b.less(s, b.scalar(-LN2)), direct, series);
}

function factorial(n: number): number {
  let f = 1;
  for (let i = 2; i <= n; i++) f *= i;
  return f;
}

/**
 * K log-probs [N, K] → K + 1 bins [N, K + 1]: the K, then the tail log(1 − Σ_k p_k), with
 * log Σ_k p_k capped at {@link TAIL_CAP}. log Σ_k p_k is x₀ − logsoftmax(x)₀ (stable, and with
 * LogSoftmax's gradient).
 */
export function withTail(b: GraphBuilder, logprobs: string): string {
  const first = b.slice(logprobs, [0], [1], [1]);
  const logMass = b.sub(first, b.slice(b.logSoftmax(logprobs, -1), [0], [1], [1])); // [N, 1]
  return b.concat([logprobs, log1mExp(b, b.min(logMass, b.scalar(TAIL_CAP)))], -1);
}

export interface TopKInputs {
  /** The student's log-probs of the teacher's K tokens at each token, float32 [N, K] (with gradient). */
  student: string;
  /** The teacher's top-K log-probs, float32 [N, K]. */
  teacher: string;
  /** Each token's weight in the term, float32 [N]: w_opd on the trained tokens of rows with a teacher, else 0. */
  weights: string;
}

/**
 * Top-K distillation, as OpenClaw-RL's openclaw-opd/topk_distillation_loss.py: per token the
 * reverse KL over the K teacher tokens and the tail, KL_t = Σ_j p_s,j·(log p_s,j − log p_t,j)
 * (torch's kl_div(teacher, student, log_target=True) summed), then `mean(weights·KL)`.
 * Returns the term and KL_t [N].
 */
export function appendTopKDistillation(b: GraphBuilder, x: TopKInputs, mean: Aggregate): { loss: string; perToken: string } {
  const s = withTail(b, x.student), t = withTail(b, x.teacher);
  const perToken = b.reduceSum(b.mul(b.exp(s), b.sub(s, t)), [-1], false);
  return { loss: mean(b.mul(x.weights, perToken)), perToken };
}
