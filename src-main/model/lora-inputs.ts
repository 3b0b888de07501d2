/**
 * LoRA as graph inputs, shared by the training step (../train/step-graph.ts) and generation
 * with live adapter weights (./inference-engine.ts, docs/design.md §Rollouts): one built graph
 * serves every set of weights, since the weights are fed on each run instead of baked in.
 *
 * Each adapted projection y = x·Wᵀ (+ b) becomes y + ((x·Aᵀ)·s)·Bᵀ with A [r, in] and B [out, r]
 * as graph inputs named by their PEFT keys (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`),
 * s = alpha / r. The scaling is applied on the narrow [B, T, r] tensor, where it costs least.
 * With B = 0 the delta is exact zeros, so the output is the base model's.
 *
 * Also here, because both layers need them: which pairs a model has for a target list, and
 * their shapes.
 */
import { UserError } from '../../src-shared/types.js';
import { float, int } from '../graph/ir.js';
import type { ModelConfig } from './hf-checkpoint.js';
import { LINEAR_TARGETS, type LinearHook, type LinearTarget } from './decoder.js';
import { PART_MODULES } from './fused-projections.js';

/** The adapter's shape: rank, alpha (scaling = alpha / r) and the adapted projections. */
export interface LoraShape {
  r: number;
  alpha: number;
  targets: readonly LinearTarget[];
}

/**
 * One LoRA pair for one linear, named by its PEFT module path
 * (`base_model.model.model.layers.0.self_attn.q_proj`). A is [r, in], B is [out, r], row-major.
 */
export interface LoraSpec {
  module: string;
  layer: number;
  target: LinearTarget;
  inFeatures: number;
  outFeatures: number;
}

/** PEFT's name for each target (the HF module's last path element). */
export const PEFT_MODULE_NAMES = Object.fromEntries(Object.entries(PART_MODULES).map(([t, module]) => [t, module.split('.').at(-1)!])) as Record<LinearTarget, string>;

/** The PEFT key prefix of a module: PeftModel wraps the HF model twice (`base_model.model.`). */
export const PEFT_PREFIX = 'base_model.model.';

export const loraAKey = (spec: Pick<LoraSpec, 'module'>) => `${spec.module}.lora_A.weight`;
export const loraBKey = (spec: Pick<LoraSpec, 'module'>) => `${spec.module}.lora_B.weight`;

/** The HF module path of one projection (as the decoder builder names it). */
export function hfModulePath(layer: number, target: LinearTarget): string {
  return `model.layers.${layer}.${PART_MODULES[target]}`;
}

/** [in, out] of each target's projection for this model. */
export function linearShape(config: ModelConfig, target: LinearTarget): { inFeatures: number; outFeatures: number } {
  const { hiddenSize: H, numHeads, numKvHeads, headDim, intermediateSize: I } = config;
  switch (target) {
    case 'q': return { inFeatures: H, outFeatures: numHeads * headDim };
    case 'k':
    case 'v': return { inFeatures: H, outFeatures: numKvHeads * headDim };
    case 'o': return { inFeatures: numHeads * headDim, outFeatures: H };
    case 'gate':
    case 'up': return { inFeatures: H, outFeatures: I };
    case 'down': return { inFeatures: I, outFeatures: H };
  }
}

/** Every LoRA pair for a model, layer by layer, targets in canonical order. */
export function loraSpecs(config: ModelConfig, targets: readonly LinearTarget[]): LoraSpec[] {
  const ordered = LINEAR_TARGETS.filter((t) => targets.includes(t));
  const specs: LoraSpec[] = [];
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const target of ordered) {
      specs.push({ module: PEFT_PREFIX + hfModulePath(layer, target), layer, target, ...linearShape(config, target) });
    }
  }
  return specs;
}

/**
 * The decoder's linear hook that adds LoRA with A and B as graph inputs (named by their PEFT
 * keys) on every targeted projection. `onPair` hears of each pair as it is added, with the
 * names of its two inputs, in the decoder's order (layer by layer, q k v o gate up down).
 *
 * `gemm` (inference graphs where ./ort-session.ts INFERENCE_FUSIONS says `fusedLora`): the
 * branch as two Gemms over the rows, ((x·Aᵀ)·s) from the first (transB, alpha = s) and
 * (that·Bᵀ + base) from the second (transB, C = the base's product): two kernels where the
 * standard form dispatches six (two Transposes of the fed A and B, two MatMuls, the Mul and the
 * Add), every step. The reshapes to rows and back copy nothing. Autodiff has no rule for Gemm
 * (../graph/ops/), so the training step keeps the standard form.
 */
export function loraInputHook(lora: LoraShape, onPair: (spec: LoraSpec, a: string, b: string) => void = () => {}, gemm = false): LinearHook {
  const targets = new Set(lora.targets);
  const scaling = lora.alpha / lora.r;
  return (g, site, base) => {
    if (!targets.has(site.target)) return base;
    const spec: LoraSpec = { module: PEFT_PREFIX + site.module, layer: site.layer, target: site.target, inFeatures: site.inFeatures, outFeatures: site.outFeatures };
    const a = g.input(loraAKey(spec), 'float32', [lora.r, site.inFeatures]);
    const bb = g.input(loraBKey(spec), 'float32', [site.outFeatures, lora.r]);
    onPair(spec, a, bb);
    if (gemm) {
      const rows = g.reshape(site.input, [-1, site.inFeatures]);
      const count = g.shapeOf(rows)?.[0] ?? g.fresh('rows');
      const [down] = g.op('Gemm', [rows, a], { transB: int(1), alpha: float(scaling) }, 1, [{ dtype: 'float32', shape: [count, lora.r] }]);
      const [sum] = g.op('Gemm', [down!, bb, g.reshape(base, [-1, site.outFeatures])], { transB: int(1) }, 1, [{ dtype: 'float32', shape: [count, site.outFeatures] }]);
      return g.reshapeTo(sum!, g.shape(base), g.shapeOf(base));
    }
    const down = g.mul(g.matmul(site.input, g.transpose(a, [1, 0])), g.scalar(scaling));
    return g.add(base, g.matmul(down, g.transpose(bb, [1, 0])));
  };
}

/** Checks a LoRA shape before a graph is built on it. */
export function checkLoraShape(lora: LoraShape): void {
  if (!Number.isInteger(lora.r) || lora.r < 1) throw new UserError(`LoRA rank must be a whole number ≥ 1, got ${lora.r}`);
  if (!Number.isFinite(lora.alpha)) throw new UserError(`LoRA alpha must be a finite number, got ${lora.alpha}`);
  if (!lora.targets.length) throw new UserError('LoRA needs at least one target projection');
}

/**
 * Checks that `weights` holds exactly the pairs of `specs` with the sizes rank `r` gives, and
 * that every value is finite; throws a UserError naming the first problem.
 */
export function checkLoraWeights(specs: readonly LoraSpec[], r: number, weights: ReadonlyMap<string, Float32Array>): void {
  const expected = new Map<string, number>();
  for (const s of specs) {
    expected.set(loraAKey(s), r * s.inFeatures);
    expected.set(loraBKey(s), s.outFeatures * r);
  }
  for (const key of weights.keys()) if (!expected.has(key)) throw new UserError(`LoRA weights: unexpected tensor ${key} (not a pair of this model and these targets)`);
  for (const [key, size] of expected) {
    const data = weights.get(key);
    if (!data) throw new UserError(`LoRA weights: missing tensor ${key}`);
    if (data.length !== size) throw new UserError(`LoRA weights: ${key} has ${data.length} values, expected ${size} (rank ${r})`);
    for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i]!)) throw new UserError(`LoRA weights: ${key} holds a non-finite value at ${i}`);
  }
}
