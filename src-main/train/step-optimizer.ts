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
import { ort } from '../model/ort-session.js';
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

/** The in-graph update's scalar inputs (float32, from {@link updateScalars}). */
export const SCALAR_INPUTS = ['opt_lr', 'opt_decay', 'opt_step_size', 'opt_bc2_sqrt'] as const;
/** Its flat vectors: the AdamW moments in, and the updated weights and moments out, every trained tensor in {@link flatOrder}. */
export const FLAT = { m: 'opt_m', v: 'opt_v', newParams: 'opt_new_params', newM: 'opt_new_m', newV: 'opt_new_v' } as const;

/** The gradients' global norm, before clipping: an output of the in-graph update. */
export const GRAD_NORM = 'grad_norm';

/** The in-graph update's outputs: the norm and the new flat vectors, what a step that updates reads back. */
export function updateOutputs(cfg: OptimizerConfig): string[] {
  return [GRAD_NORM, FLAT.newParams, ...(cfg.kind === 'adamw' ? [FLAT.newM, FLAT.newV] : [])];
}

/** The order the trained tensors take in the flat vectors: by key, which the graph and the engine both know. */
export const flatOrder = (keys: Iterable<string>): string[] => [...keys].sort();

/**
 * Appends clipping and the update to a training graph, over every trained tensor joined into
 * one vector: a dozen kernels for the whole update instead of a dozen per tensor (392 tensors
 * at a 28-layer model with LoRA on all seven targets), and three flat outputs instead of one per
 * tensor and moment. Inputs: the scalars of {@link updateScalars} (as `opt_*`) and, for AdamW,
 * the moments `opt_m` / `opt_v` [N]. Outputs `grad_norm`, `opt_new_params` and, for AdamW,
 * `opt_new_m` / `opt_new_v`, all [N] in {@link flatOrder}.
 */
export function appendUpdate(b: GraphBuilder, cfg: OptimizerConfig, params: Map<string, string>, grads: Map<string, string>): void {
  const [lr, decay, stepSize, bc2Sqrt] = SCALAR_INPUTS.map((n) => b.input(n, 'float32', []));
  const keys = flatOrder(params.keys());
  const flat = (values: string[]) => b.concat(values.map((v) => b.reshape(v, [-1])), 0);
  const g = flat(keys.map((k) => grads.get(k)!));
  const p = flat(keys.map((k) => params.get(k)!));
  const norm = b.sqrt(b.op('ReduceSum', [b.mul(g, g)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!);
  b.output(b.identityAs(norm, GRAD_NORM));
  const scale = cfg.maxGradNorm > 0
    ? b.where(b.greater(norm, b.scalar(cfg.maxGradNorm)), b.div(b.scalar(cfg.maxGradNorm), b.add(norm, b.scalar(CLIP_EPS))), b.scalar(1))
    : b.scalar(1);
  const gs = b.mul(g, scale);
  if (cfg.kind === 'sgd') {
    const step = cfg.weightDecay ? b.add(gs, b.mul(b.scalar(cfg.weightDecay), p)) : gs;
    b.output(b.identityAs(b.sub(p, b.mul(lr!, step)), FLAT.newParams));
    return;
  }
  const [beta1, beta2] = cfg.betas;
  const shape = b.shapeOf(g) ?? ['N'];
  const m0 = b.input(FLAT.m, 'float32', shape), v0 = b.input(FLAT.v, 'float32', shape);
  const m1 = b.add(b.mul(b.scalar(beta1), m0), b.mul(b.scalar(1 - beta1), gs));
  const v1 = b.add(b.mul(b.scalar(beta2), v0), b.mul(b.scalar(1 - beta2), b.mul(gs, gs)));
  const denom = b.add(b.div(b.sqrt(v1), bc2Sqrt!), b.scalar(cfg.eps));
  b.output(b.identityAs(b.sub(b.mul(p, decay!), b.mul(stepSize!, b.div(m1, denom))), FLAT.newParams));
  b.output(b.identityAs(m1, FLAT.newM));
  b.output(b.identityAs(v1, FLAT.newV));
}

/**
 * Where each trained tensor lies in the in-graph update's flat vectors ({@link flatOrder}). The
 * AdamW moments live in one flat vector each, which `state` sees as per-tensor views (what a
 * checkpoint saves and the host update reads), so a step feeds them without a copy.
 */
export class FlatLayout {
  private readonly spans: { key: string; offset: number; length: number }[] = [];
  readonly size: number;

  constructor(sizes: Map<string, number>) {
    let offset = 0;
    for (const key of flatOrder(sizes.keys())) {
      this.spans.push({ key, offset, length: sizes.get(key)! });
      offset += sizes.get(key)!;
    }
    this.size = offset;
  }

  /** The scalars and, for AdamW, the flat moments of `state` (made flat on first use, and after a resume). */
  feeds(cfg: OptimizerConfig, state: OptimizerState): Record<string, ort.Tensor> {
    const s = updateScalars(cfg, state.step + 1);
    const feeds: Record<string, ort.Tensor> = {};
    [s.lr, s.decay, s.stepSize, s.bc2Sqrt].forEach((v, i) => (feeds[SCALAR_INPUTS[i]!] = new ort.Tensor('float32', Float32Array.of(v), [])));
    if (cfg.kind === 'adamw') {
      feeds[FLAT.m] = new ort.Tensor('float32', this.flatten(state.m), [this.size]);
      feeds[FLAT.v] = new ort.Tensor('float32', this.flatten(state.v), [this.size]);
    }
    return feeds;
  }

  /** Writes a step's flat outputs into `weights` and `state`'s moments, in place. */
  apply(cfg: OptimizerConfig, out: ort.InferenceSession.OnnxValueMapType, weights: LoraWeights, state: OptimizerState): void {
    const data = (name: string) => (out[name] as ort.Tensor).data as Float32Array;
    const params = data(FLAT.newParams);
    for (const { key, offset, length } of this.spans) weights.get(key)!.set(params.subarray(offset, offset + length));
    if (cfg.kind === 'adamw') {
      this.flatten(state.m).set(data(FLAT.newM));
      this.flatten(state.v).set(data(FLAT.newV));
    }
  }

  /** `moments` as one flat vector: the one its views already share, else a new one (zeros where a tensor has none yet) that they become views of. */
  private flatten(moments: Map<string, Float32Array>): Float32Array {
    const first = moments.get(this.spans[0]!.key);
    const shared = first && first.buffer.byteLength === this.size * 4 && this.spans.every(({ key, offset, length }) => {
      const a = moments.get(key);
      return a !== undefined && a.buffer === first.buffer && a.byteOffset === offset * 4 && a.length === length;
    });
    if (shared) return new Float32Array(first.buffer, 0, this.size);
    const flat = new Float32Array(this.size);
    for (const { key, offset, length } of this.spans) {
      const own = moments.get(key);
      if (own) flat.set(own, offset);
      moments.set(key, flat.subarray(offset, offset + length));
    }
    return flat;
  }
}
