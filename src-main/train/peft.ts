/**
 * PEFT LoRA adapter folders (docs/design.md §Training runs), readable by `peft.PeftModel.from_pretrained`:
 *
 *   adapter_config.json        peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
 *                              target_modules, lora_dropout 0, bias "none",
 *                              base_model_name_or_path
 *   adapter_model.safetensors  base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
 *                              [r, in] and …lora_B.weight [out, r], fp32
 *
 * A model whose checkpoint fuses projections (Phi-3) gets its fused modules' pairs
 * (./fused-adapter.ts). Both files are written atomically. Loading (./peft-read.ts) takes any PEFT LoRA folder,
 * also one trained elsewhere, and refuses what it cannot honour with a one-line message.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { f32Tensors, writeJsonAtomic, writeSafetensorsAtomic } from './files.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from './peft-read.js';
import { PEFT_MODULE_NAMES, PEFT_PREFIX, loraAKey, loraBKey, loraShapes } from './lora.js';
import { hfModulePathOf, rootTargetPattern } from '../model/module-root.js';
import { writtenPairs, type WrittenPair } from './fused-adapter.js';
import { fusedProjectionsOf } from '../model/fused-projections.js';
import type { ModelConfig } from '../model/model-config.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';

export { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readAdapter, type LoadedAdapter } from './peft-read.js';

export interface AdapterExport {
  lora: LoraConfig;
  specs: readonly LoraTensorSpec[];
  weights: LoraWeights;
  /** The base model folder (written as base_model_name_or_path). */
  baseModel: string;
  /** The base's config, which says whether its checkpoint fuses projections (Phi-3: ./fused-adapter.ts); absent: it does not. */
  model?: ModelConfig;
}

/**
 * adapter_config.json. A fused module (./fused-adapter.ts) has rank parts·r and alpha
 * parts·alpha, given per module by rank_pattern and alpha_pattern.
 */
export function adapterConfigJson(lora: LoraConfig, baseModel: string, pairs: readonly WrittenPair[] = [], model?: ModelConfig): Record<string, unknown> {
  const fused = new Map(pairs.filter((p) => p.parts).map((p) => [p.module.split('.').at(-1)!, p.parts!]));
  const modules = lora.targets.map((t) => PEFT_MODULE_NAMES[t]).filter((m) => !pairs.length || pairs.some((p) => p.module.endsWith(`.${m}`)));
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    r: lora.r,
    lora_alpha: lora.alpha,
    // A decoder under another root (Gemma 3's multimodal folders): a pattern that leaves the vision tower alone.
    target_modules: model?.moduleRoot ? rootTargetPattern(model.moduleRoot, modules) : [...modules, ...fused.keys()],
    ...(fused.size ? {
      rank_pattern: Object.fromEntries([...fused].map(([m, n]) => [m, n * lora.r])),
      alpha_pattern: Object.fromEntries([...fused].map(([m, n]) => [m, n * lora.alpha])),
    } : {}),
    lora_dropout: TRAIN_DEFAULTS.loraDropout,
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    init_lora_weights: true,
    modules_to_save: null,
    inference_mode: true,
    base_model_name_or_path: baseModel,
    revision: null,
  };
}

/** Writes the adapter folder (weights first, then the config, so a config never points at missing weights). */
export function writeAdapter(dir: string, adapter: AdapterExport): void {
  fs.mkdirSync(dir, { recursive: true });
  for (const key of loraShapes(adapter.specs, adapter.lora.r).keys()) {
    if (!adapter.weights.has(key)) throw new Error(`adapter export: missing LoRA tensor ${key}`);
  }
  const pairs = adapter.model && fusedProjectionsOf(adapter.model).length ? writtenPairs(adapter.model, adapter.specs, adapter.weights, adapter.lora.r) : [];
  const ordered = new Map<string, Float32Array>();
  const shapes = new Map<string, [number, number]>();
  // Keys as the base's Hugging Face model names its modules (a multimodal folder's root).
  const keyOf = (key: string) => PEFT_PREFIX + hfModulePathOf(key.slice(PEFT_PREFIX.length), adapter.model);
  if (pairs.length) {
    for (const p of pairs) {
      ordered.set(keyOf(loraAKey(p)), p.a).set(keyOf(loraBKey(p)), p.b);
      shapes.set(keyOf(loraAKey(p)), [p.rank, p.inFeatures]).set(keyOf(loraBKey(p)), [p.outFeatures, p.rank]);
    }
  } else {
    for (const [key, shape] of loraShapes(adapter.specs, adapter.lora.r)) {
      ordered.set(keyOf(key), adapter.weights.get(key)!);
      shapes.set(keyOf(key), shape);
    }
  }
  writeSafetensorsAtomic(path.join(dir, ADAPTER_WEIGHTS), f32Tensors(ordered, shapes), { format: 'pt' });
  writeJsonAtomic(path.join(dir, ADAPTER_CONFIG), adapterConfigJson(adapter.lora, adapter.baseModel, pairs, adapter.model));
}
