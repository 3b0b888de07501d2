/**
 * PEFT LoRA adapter folders (docs/design.md §Training runs), readable by `peft.PeftModel.from_pretrained`:
 *
 *   adapter_config.json        peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha,
 *                              target_modules, lora_dropout 0, bias "none",
 *                              base_model_name_or_path
 *   adapter_model.safetensors  base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight
 *                              [r, in] and …lora_B.weight [out, r], fp32
 *
 * Both files are written atomically. Loading (for `--init-adapter` and resume) checks the
 * config, every tensor's presence and shape, and refuses what it cannot honour
 * (rsLoRA, DoRA, biases, fan_in_fan_out, other target modules, layers the model lacks)
 * with a message naming the folder and the field or tensor.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import type { ModelConfig } from '../model/hf-checkpoint.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32 } from '../model/safetensors.js';
import type { LinearTarget } from '../model/decoder.js';
import { f32Tensors, writeJsonAtomic, writeSafetensorsAtomic } from './files.js';
import { PEFT_MODULE_NAMES, loraShapes, loraSpecs, targetFromModuleName } from './lora.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

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

export interface LoadedAdapter {
  lora: LoraConfig;
  specs: LoraTensorSpec[];
  weights: LoraWeights;
  baseModel: string | null;
}

/** Reads and validates a PEFT LoRA folder against a model's config. */
export function readAdapter(dir: string, model: ModelConfig): LoadedAdapter {
  const configFile = path.join(dir, ADAPTER_CONFIG);
  const weightsFile = path.join(dir, ADAPTER_WEIGHTS);
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new UserError(`adapter folder not found: ${dir}`);
  if (!fs.existsSync(configFile)) throw new UserError(`${dir}: not a PEFT adapter folder (missing ${ADAPTER_CONFIG})`);
  if (!fs.existsSync(weightsFile)) {
    const hint = fs.existsSync(path.join(dir, 'adapter_model.bin')) ? ' (adapter_model.bin is not supported: save with safe_serialization=True)' : '';
    throw new UserError(`${dir}: missing ${ADAPTER_WEIGHTS}${hint}`);
  }
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(fs.readFileSync(configFile, 'utf8'));
  } catch (err) {
    throw new UserError(`${configFile}: invalid JSON (${(err as Error).message})`);
  }
  const lora = parseAdapterConfig(raw, configFile);
  const specs = loraSpecs(model, lora.targets);
  const weights = readAdapterTensors(weightsFile, specs, lora.r);
  return { lora, specs, weights, baseModel: typeof raw.base_model_name_or_path === 'string' ? raw.base_model_name_or_path : null };
}

function parseAdapterConfig(raw: Record<string, unknown>, file: string): LoraConfig {
  const fail = (msg: string): never => {
    throw new UserError(`${file}: ${msg}`);
  };
  if (raw.peft_type !== 'LORA') fail(`peft_type must be "LORA", found ${JSON.stringify(raw.peft_type)}`);
  const r = raw.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1) fail(`r must be a whole number ≥ 1, found ${JSON.stringify(r)}`);
  const alpha = raw.lora_alpha ?? r;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha)) fail(`lora_alpha must be a number, found ${JSON.stringify(raw.lora_alpha)}`);
  if (raw.use_rslora === true) fail('use_rslora (scaling alpha/√r) is not supported; Hindsight uses alpha/r');
  if (raw.use_dora === true) fail('use_dora (DoRA) is not supported');
  if (raw.fan_in_fan_out === true) fail('fan_in_fan_out is not supported (Llama/Qwen linears are not Conv1D)');
  if (raw.bias !== undefined && raw.bias !== 'none') fail(`bias ${JSON.stringify(raw.bias)} is not supported (only "none")`);
  if (raw.rank_pattern && Object.keys(raw.rank_pattern as object).length) fail('rank_pattern (per-module ranks) is not supported');
  if (raw.alpha_pattern && Object.keys(raw.alpha_pattern as object).length) fail('alpha_pattern (per-module alphas) is not supported');
  if (Array.isArray(raw.modules_to_save) && raw.modules_to_save.length) fail('modules_to_save is not supported (only LoRA weights)');
  if (Array.isArray(raw.layers_to_transform) || typeof raw.layers_to_transform === 'number') fail('layers_to_transform is not supported');
  const modules = raw.target_modules;
  if (!Array.isArray(modules) || modules.length === 0 || !modules.every((m) => typeof m === 'string')) {
    fail(`target_modules must be a list of module names such as ["q_proj","v_proj"], found ${JSON.stringify(modules)}`);
  }
  const targets = new Set<LinearTarget>();
  for (const m of modules as string[]) {
    const t = targetFromModuleName(m);
    if (!t) fail(`target module '${m}' is not supported; supported: ${Object.values(PEFT_MODULE_NAMES).join(', ')}`);
    targets.add(t!);
  }
  const ordered = (Object.keys(PEFT_MODULE_NAMES) as LinearTarget[]).filter((t) => targets.has(t));
  return { r: r as number, alpha: alpha as number, targets: ordered };
}

/** PEFT sometimes keeps the adapter name in keys (`lora_A.default.weight`); normalise it away. */
function normaliseKey(key: string): string {
  return key.replace(/\.lora_([AB])\.(?!weight$)[^.]+\.weight$/, '.lora_$1.weight');
}

function readAdapterTensors(file: string, specs: LoraTensorSpec[], r: number): LoraWeights {
  const shapes = loraShapes(specs, r);
  const { tensors } = readSafetensorsHeader(file);
  const weights: LoraWeights = new Map();
  for (const entry of tensors) {
    const key = normaliseKey(entry.name);
    const expected = shapes.get(key);
    if (!expected) {
      throw new UserError(`${file}: tensor '${entry.name}' does not belong to this model's LoRA (${specs.length} modules, layers 0–${specs.at(-1)?.layer ?? 0}); is the adapter for another model?`);
    }
    if (entry.shape.length !== 2 || entry.shape[0] !== expected[0] || entry.shape[1] !== expected[1]) {
      throw new UserError(`${file}: tensor '${entry.name}' has shape [${entry.shape}], expected [${expected}] (r=${r} from adapter_config.json and the model's sizes)`);
    }
    const data = toFloat32(readTensorBytes(entry), entry.dtype, `${file}: tensor '${entry.name}'`);
    if (!data.every(Number.isFinite)) throw new UserError(`${file}: tensor '${entry.name}' holds non-finite values`);
    weights.set(key, data.slice());
  }
  const missing = [...shapes.keys()].filter((k) => !weights.has(k));
  if (missing.length) throw new UserError(`${file}: missing ${missing.length} LoRA tensor(s), e.g. '${missing[0]}'`);
  return weights;
}
