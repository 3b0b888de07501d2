/**
 * LoRA adapters over the decoder's linear layers (docs/design.md §Training runs): which tensors exist for a model
 * and a target list, and their initialisation.
 *
 * Each adapted linear y = x·Wᵀ gains s·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r], s = alpha / r.
 * Initialisation follows PEFT (`LoraLayer.reset_lora_parameters` with init_lora_weights=True):
 * A from torch's `kaiming_uniform_(a=√5)`, whose bound works out to 1/√in_features
 * (gain √(2/(1+a²)) = √(1/3), bound = gain·√3/√fan_in), and B = 0, so a fresh adapter
 * leaves the model exactly as it was. The numbers come from a seeded PRNG (mulberry32), in
 * spec order, so a seed always gives the same adapter; they are not torch's stream.
 */
import { UserError } from '../../src-shared/types.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { LINEAR_TARGETS, type LinearTarget } from '../model/decoder.js';
import { PEFT_MODULE_NAMES, loraAKey, loraBKey } from '../model/lora-inputs.js';
import { seededRandom } from '../model/sampling.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';

// The pairs, their PEFT names and shapes live beside the graph hook that feeds them (../model/lora-inputs.ts).
export { PEFT_MODULE_NAMES, PEFT_PREFIX, hfModulePath, linearShape, loraAKey, loraBKey, loraSpecs } from '../model/lora-inputs.js';

/** The adapter shape a run gets unless asked for another (src-shared/training.ts). */
export const DEFAULT_LORA: LoraConfig = { r: TRAIN_DEFAULTS.loraR, alpha: TRAIN_DEFAULTS.loraAlpha, targets: [...TRAIN_DEFAULTS.targets] };

/** Parses `q,k,v` (or `q_proj,k_proj` or `all`) into targets in canonical order. */
export function parseTargets(text: string): LinearTarget[] {
  const wanted = new Set<LinearTarget>();
  for (const raw of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (raw === 'all') {
      LINEAR_TARGETS.forEach((t) => wanted.add(t));
      continue;
    }
    const t = (LINEAR_TARGETS as readonly string[]).includes(raw) ? (raw as LinearTarget) : targetFromModuleName(raw);
    if (!t) throw new UserError(`unknown LoRA target '${raw}'; choose from ${LINEAR_TARGETS.join(',')} (or all)`);
    wanted.add(t);
  }
  if (wanted.size === 0) throw new UserError('no LoRA targets given; choose from ' + LINEAR_TARGETS.join(','));
  return LINEAR_TARGETS.filter((t) => wanted.has(t));
}

export function targetFromModuleName(name: string): LinearTarget | undefined {
  return (Object.entries(PEFT_MODULE_NAMES) as [LinearTarget, string][]).find(([, n]) => n === name)?.[0];
}

/** Shape of every LoRA tensor by key, for validation and export. */
export function loraShapes(specs: readonly LoraTensorSpec[], r: number): Map<string, [number, number]> {
  const shapes = new Map<string, [number, number]>();
  for (const s of specs) {
    shapes.set(loraAKey(s), [r, s.inFeatures]);
    shapes.set(loraBKey(s), [s.outFeatures, r]);
  }
  return shapes;
}

/** PEFT/torch's kaiming_uniform_(a=√5) bound for a [r, in] matrix. */
export function kaimingBound(inFeatures: number): number {
  return 1 / Math.sqrt(inFeatures);
}

/** A fresh adapter: A ~ U(−1/√in, 1/√in) from the seeded PRNG, B = 0. */
export function initLora(specs: readonly LoraTensorSpec[], r: number, seed: number): LoraWeights {
  if (!Number.isInteger(r) || r < 1) throw new UserError(`LoRA rank must be a whole number ≥ 1, got ${r}`);
  const rand = seededRandom(seed);
  const weights: LoraWeights = new Map();
  for (const spec of specs) {
    const bound = kaimingBound(spec.inFeatures);
    const a = new Float32Array(r * spec.inFeatures);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rand() - 1) * bound;
    weights.set(loraAKey(spec), a);
    weights.set(loraBKey(spec), new Float32Array(spec.outFeatures * r));
  }
  return weights;
}

/** Deep copy, so a caller can keep a snapshot while training goes on. */
export function cloneWeights(weights: ReadonlyMap<string, Float32Array>): Map<string, Float32Array> {
  return new Map([...weights].map(([k, v]) => [k, v.slice()]));
}
