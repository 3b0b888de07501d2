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
}

export interface LossValues {
  loss: string;
  clipfrac: string;
  approxKl: string;
  tokens: string;
}

const sumAll = (b: GraphBuilder, x: string) => b.op('ReduceSum', [x], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;

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
  const tokens = sumAll(b, x.mask);
  const denom = b.max(tokens, b.scalar(1));
  const maskedMean = (v: string) => b.div(sumAll(b, b.mul(x.mask, v)), denom);

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
}

/**
 * ½ · Σ mask · max((V − R)², (V_old + clip(V − V_old, −ε_v, ε_v) − R)²) / Σ mask, with
 * Σ mask floored at 1 as for the policy loss.
 */
export function appendValueLoss(b: GraphBuilder, x: ValueLossInputs, cfg: ValueHeadConfig): string {
  const square = (v: string) => b.mul(v, v);
  const moved = b.clip(b.sub(x.values, x.valuesOld), b.scalar(-cfg.clip), b.scalar(cfg.clip));
  const unclipped = square(b.sub(x.values, x.returns));
  const clipped = square(b.sub(b.add(x.valuesOld, moved), x.returns));
  const denom = b.max(sumAll(b, x.mask), b.scalar(1));
  return b.mul(b.scalar(0.5), b.div(sumAll(b, b.mul(x.mask, b.max(unclipped, clipped))), denom));
}
