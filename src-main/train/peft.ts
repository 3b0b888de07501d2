/**
 * PEFT LoRA adapter folders (docs/design.md §Training runs), readable by `peft.PeftModel.from_pretrained`:
 *
 *   adapter_config.json        peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
 *                              target_modules, lora_dropout 0, bias "none",
 *                              base_model_name_or_path
 *   adapter_model.safetensors  base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
 *                              [r, in] and …lora_B.weight [out, r], fp32
 *
 * Both files are written atomically. Loading (./peft-read.ts) takes any PEFT LoRA folder,
 * also one trained elsewhere, and refuses what it cannot honour with a one-line message.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { f32Tensors, writeJsonAtomic, writeSafetensorsAtomic } from './files.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from './peft-read.js';
import { PEFT_MODULE_NAMES, loraShapes } from './lora.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';

export { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readAdapter, type LoadedAdapter } from './peft-read.js';

export interface AdapterExport {
  lora: LoraConfig;
  specs: readonly LoraTensorSpec[];
  weights: LoraWeights;
  /** The base model folder (written as base_model_name_or_path). */
  baseModel: string;
}

export function adapterConfigJson(lora: LoraConfig, baseModel: string): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    r: lora.r,
    lora_alpha: lora.alpha,
    target_modules: lora.targets.map((t) => PEFT_MODULE_NAMES[t]),
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
  const shapes = loraShapes(adapter.specs, adapter.lora.r);
  const ordered = new Map<string, Float32Array>();
  for (const key of shapes.keys()) {
    const data = adapter.weights.get(key);
    if (!data) throw new Error(`adapter export: missing LoRA tensor ${key}`);
    ordered.set(key, data);
  }
  writeSafetensorsAtomic(path.join(dir, ADAPTER_WEIGHTS), f32Tensors(ordered, shapes), { format: 'pt' });
  writeJsonAtomic(path.join(dir, ADAPTER_CONFIG), adapterConfigJson(adapter.lora, adapter.baseModel));
}
