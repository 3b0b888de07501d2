/**
 * The optimizer update and global gradient-norm clipping, twice: in TypeScript on the
 * gradients a session returns (`applyUpdate`), and as graph nodes appended to the training
 * graph (`appendUpdate`). ./step-engine.ts picks one; its doc comment has the measurements.
 *
 * Semantics (both versions, following torch):
 * - clipping (torch.nn.utils.clip_grad_norm_): norm = ‖all gradients‖₂; when maxGradNorm > 0
 *   and norm > maxGradNorm every gradient is scaled by maxGradNorm / (norm + 1e-6).
 * - SGD (torch.optim.SGD, no momentum): g ← g + wd·p; p ← p − lr·g.
 * - AdamW (torch.optim.AdamW): p ← p·(1 − lr·wd); m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²;
 *   p ← p − (lr / (1−β₁ᵗ)) · m / (√v / √(1−β₂ᵗ) + eps), with t the step count after increment.
 */
import { GraphBuilder, int } from '../graph/ir.js';
import type { LoraWeights, OptimizerConfig, OptimizerState } from './training-step.js';

export const CLIP_EPS = 1e-6;

/** ‖g‖₂ over every tensor, accumulated in float64. */
export function globalGradNorm(grads: LoraWeights): number {
  let sum = 0;
  for (const g of grads.values()) for (let i = 0; i < g.length; i++) sum += g[i]! * g[i]!;
  return Math.sqrt(sum);
}

export function clipScale(norm: number, maxGradNorm: number): number {
  return maxGradNorm > 0 && norm > maxGradNorm ? maxGradNorm / (norm + CLIP_EPS) : 1;
}

/** The scalars an update needs, computed once per step in float64. */
export function updateScalars(cfg: OptimizerConfig, step: number) {
  const [beta1, beta2] = cfg.betas;
  return {
    lr: cfg.lr,
    decay: 1 - cfg.lr * cfg.weightDecay,
    stepSize: cfg.lr / (1 - beta1 ** step),
    bc2Sqrt: Math.sqrt(1 - beta2 ** step),
  };
}

export function emptyState(): OptimizerState {
  return { step: 0, m: new Map(), v: new Map() };
}

/**
 * One optimizer update on host arrays, in place: each weight and (AdamW) its two moments are
 * overwritten with the next step's values, the moments made on the first step and kept in
 * `state` from then on. A step so holds one copy of each, not the old and the new side by side
 * (at an 8B model's LoRA the moments alone are about 350 MB). Returns the same arrays.
 */
export function applyUpdate(cfg: OptimizerConfig, weights: LoraWeights, grads: LoraWeights, state: OptimizerState, scale: number): { weights: LoraWeights; state: OptimizerState } {
  // Every gradient is there before the first weight is written: never half an update.
  for (const key of weights.keys()) if (!grads.has(key)) throw new Error(`optimizer: no gradient for '${key}'`);
  const step = state.step + 1;
  const s = updateScalars(cfg, step);
  const [beta1, beta2] = cfg.betas;
  for (const [key, p] of weights) {
    const g = grads.get(key)!;
    if (cfg.kind === 'sgd') {
      const lr = cfg.lr, wd = cfg.weightDecay;
      for (let i = 0; i < p.length; i++) p[i] = p[i]! - lr * (g[i]! * scale + wd * p[i]!);
    } else {
      // Plain locals and typed arrays only: this loop runs over every LoRA weight each step.
      const m = moment(state.m, key, p.length), v = moment(state.v, key, p.length);
      const { decay, stepSize, bc2Sqrt } = s;
      const eps = cfg.eps, c1 = 1 - beta1, c2 = 1 - beta2;
      for (let i = 0; i < p.length; i++) {
        const gi = g[i]! * scale;
        m[i] = beta1 * m[i]! + c1 * gi;
        v[i] = beta2 * v[i]! + c2 * gi * gi;
        // m and v are read back as stored, rounded to fp32 (torch keeps them in fp32 too).
        p[i] = p[i]! * decay - stepSize * m[i]! / (Math.sqrt(v[i]!) / bc2Sqrt + eps);
      }
    }
  }
  return { weights, state: { step, m: state.m, v: state.v } };
}

/** A parameter's AdamW moment as `moments` keeps it across steps; zeros, added to it, before its first step. */
export function moment(moments: Map<string, Float32Array>, key: string, size: number): Float32Array {
  let a = moments.get(key);
  if (!a) moments.set(key, (a = new Float32Array(size)));
  return a;
}

/** Names of the in-graph optimizer's extra inputs and outputs for one parameter. */
export const stateNames = (key: string) => ({ m: `m.${key}`, v: `v.${key}`, newP: `new.${key}`, newM: `new_m.${key}`, newV: `new_v.${key}` });
export const SCALAR_INPUTS = ['opt_lr', 'opt_decay', 'opt_step_size', 'opt_bc2_sqrt'] as const;

/**
 * Appends clipping and the update to a training graph. Inputs: the scalars of
 * {@link updateScalars} (as `opt_*`) and, for AdamW, `m.<key>` / `v.<key>`. Outputs
 * `grad_norm`, `new.<key>` and, for AdamW, `new_m.<key>` / `new_v.<key>`.
 */
export function appendUpdate(b: GraphBuilder, cfg: OptimizerConfig, params: Map<string, string>, grads: Map<string, string>): void {
  const [lr, decay, stepSize, bc2Sqrt] = SCALAR_INPUTS.map((n) => b.input(n, 'float32', []));
  const squares = [...grads.values()].map((g) => b.op('ReduceSum', [b.mul(g, g)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!);
  const norm = b.sqrt(squares.reduce((acc, s) => b.add(acc, s)));
  b.output(b.identityAs(norm, 'grad_norm'));
  const scale = cfg.maxGradNorm > 0
    ? b.where(b.greater(norm, b.scalar(cfg.maxGradNorm)), b.div(b.scalar(cfg.maxGradNorm), b.add(norm, b.scalar(CLIP_EPS))), b.scalar(1))
    : b.scalar(1);
  const [beta1, beta2] = cfg.betas;
  for (const [key, p] of params) {
    const g = b.mul(grads.get(key)!, scale);
    const names = stateNames(key);
    if (cfg.kind === 'sgd') {
      const step = cfg.weightDecay ? b.add(g, b.mul(b.scalar(cfg.weightDecay), p)) : g;
      b.output(b.identityAs(b.sub(p, b.mul(lr!, step)), names.newP));
      continue;
    }
    const shape = b.shapeOf(p)!;
    const m0 = b.input(names.m, 'float32', shape), v0 = b.input(names.v, 'float32', shape);
    const m1 = b.add(b.mul(b.scalar(beta1), m0), b.mul(b.scalar(1 - beta1), g));
    const v1 = b.add(b.mul(b.scalar(beta2), v0), b.mul(b.scalar(1 - beta2), b.mul(g, g)));
    const denom = b.add(b.div(b.sqrt(v1), bc2Sqrt!), b.scalar(cfg.eps));
    const updated = b.sub(b.mul(p, decay!), b.mul(stepSize!, b.div(m1, denom)));
    b.output(b.identityAs(updated, names.newP));
    b.output(b.identityAs(m1, names.newM));
    b.output(b.identityAs(v1, names.newV));
  }
}
