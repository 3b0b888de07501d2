/**
 * Reading a PEFT LoRA adapter folder, Hindsight's own or one trained elsewhere (TRL on a
 * cluster, say), into the one shape the rest of Hindsight uses: a single r and alpha for
 * every adapted linear (docs/design.md §Hand-off).
 *
 * What PEFT allows and Hindsight honours:
 *   - keys with or without the `base_model.model.` prefix, with or without the adapter name
 *     (`lora_A.default.weight`);
 *   - fp32, fp16, bf16 (and fp64) tensors;
 *   - `lora_alpha` with `r`, per-module `rank_pattern` / `alpha_pattern`, `use_rslora`
 *     (scaling alpha/√r instead of alpha/r);
 *   - `target_modules` as short names, full module paths, a regular expression or
 *     "all-linear", and `layers_to_transform`: the tensors in the file say which modules
 *     are adapted, and a module without tensors is simply not adapted;
 *   - a fused module's pair (Phi-3's qkv_proj, gate_up_proj), read as its parts' pairs
 *     (./fused-adapter.ts).
 *
 * Per-module ranks and scalings are folded into one exact equivalent: every pair is padded
 * with zeros to the largest rank R (zero rows of A and columns of B add nothing) and B is
 * multiplied by s_module / s_uniform, so s_uniform·B'·A' = s_module·B·A for every module.
 * An adapter without patterns or rsLoRA passes through bit for bit.
 *
 * What Hindsight cannot apply gets a one-line error naming it: DoRA, embedding LoRA, a
 * module the decoder does not have, biases, modules_to_save, fan_in_fan_out.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import type { ModelConfig } from '../model/hf-checkpoint.js';
import { LINEAR_TARGETS, type LinearTarget } from '../model/decoder.js';
import { readRegularFile } from '../model/regular-file.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32, type TensorEntry } from '../model/safetensors.js';
import { patternLookup } from './peft-pattern.js';
import { PEFT_MODULE_NAMES, PEFT_PREFIX, hfModulePath, linearShape, loraAKey, loraBKey, loraSpecs, targetFromModuleName } from './lora.js';
import { decoderModulePathOf } from '../model/module-root.js';
import { FUSED_PROJECTIONS, fusedModuleName, fusedProjectionOf, fusedProjectionsOf, partSpans, type FusedProjection } from '../model/fused-projections.js';
import { fusedByName, splitFusedPair } from './fused-adapter.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

export interface LoadedAdapter {
  lora: LoraConfig;
  specs: LoraTensorSpec[];
  weights: LoraWeights;
  baseModel: string | null;
}

/** Bounds on what an adapter folder may hold: a config file's bytes, a rank, an alpha, |scaling·B·A|. */
const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_RANK = 65_536;
const MAX_ALPHA = 1e6;
const MAX_UPDATE = 1e6;

/** PEFT's LoraConfig default when a config leaves lora_alpha out. */
const PEFT_DEFAULT_ALPHA = 8;
const EMBEDDING_MODULES = /(^|\.)(embed_tokens|wte|word_embeddings|embed_in)$/;
const MODULE_PATH = /^model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)$/;
/** Phi-3's fused modules (qkv_proj, gate_up_proj): read as their parts' pairs (./fused-adapter.ts). */
const FUSED_NAMES = FUSED_PROJECTIONS.map(fusedModuleName);

interface AdapterSettings {
  r: number;
  alpha: number;
  rslora: boolean;
  /** rank_pattern / alpha_pattern as PEFT looks them up (./peft-pattern.ts): a module path's value, if a key applies. */
  rankPattern: (modulePath: string) => number | undefined;
  alphaPattern: (modulePath: string) => number | undefined;
  /** True when target_modules names projections only (so every layer must have them). */
  everyLayer: boolean;
  /** target_modules when it is a list: every tensor's module must be one of them. */
  targetNames: string[] | null;
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
  const text = readRegularFile(configFile, MAX_CONFIG_BYTES).toString('utf8'); // not a pipe, not /dev/zero
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new UserError(`${configFile}: invalid JSON (${(err as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UserError(`${configFile}: must be a JSON object, found ${JSON.stringify(raw)?.slice(0, 40)}`);
  const settings = parseAdapterConfig(raw, configFile);
  const pairs = readPairs(weightsFile, model, settings);
  return { ...uniformAdapter(pairs, model, settings, weightsFile), baseModel: typeof raw.base_model_name_or_path === 'string' ? raw.base_model_name_or_path : null };
}

function numberRecord(value: unknown, field: string, fail: (m: string) => never, whole: boolean): Record<string, number> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) fail(`${field} must be an object of module pattern → number`);
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(value as object)) {
    if (typeof v !== 'number' || !(whole ? Number.isInteger(v) && v >= 1 && v <= MAX_RANK : Number.isFinite(v) && v > 0 && v <= MAX_ALPHA)) {
      fail(`${field}['${k.slice(0, 80)}'] must be ${whole ? `a whole number from 1 to ${MAX_RANK}` : `a positive number up to ${MAX_ALPHA}`}, found ${JSON.stringify(v)}`);
    }
    out[k] = v as number;
  }
  return out;
}

function parseAdapterConfig(raw: Record<string, unknown>, file: string): AdapterSettings {
  const fail = (msg: string): never => {
    throw new UserError(`${file}: ${msg}`);
  };
  if (raw.peft_type !== 'LORA') fail(`peft_type must be "LORA", found ${JSON.stringify(raw.peft_type)}`);
  const r = raw.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1 || r > MAX_RANK) fail(`r must be a whole number from 1 to ${MAX_RANK}, found ${JSON.stringify(r)}`);
  const alpha = raw.lora_alpha ?? PEFT_DEFAULT_ALPHA;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha) || Math.abs(alpha) > MAX_ALPHA) fail(`lora_alpha must be a number up to ${MAX_ALPHA}, found ${JSON.stringify(raw.lora_alpha)}`);
  if (raw.use_dora === true) fail('use_dora (DoRA) is not supported');
  if (raw.fan_in_fan_out === true) fail('fan_in_fan_out is not supported (Llama/Qwen linears are not Conv1D)');
  if (raw.bias !== undefined && raw.bias !== 'none') fail(`bias ${JSON.stringify(raw.bias)} is not supported (only "none")`);
  if (Array.isArray(raw.modules_to_save) && raw.modules_to_save.length) fail('modules_to_save is not supported (only LoRA weights)');
  if (Array.isArray(raw.trainable_token_indices) || (raw.trainable_token_indices && typeof raw.trainable_token_indices === 'object')) {
    fail('trainable_token_indices (embedding training) is not supported');
  }
  const everyLayer = checkTargetModules(raw.target_modules, fail) && raw.layers_to_transform == null;
  return {
    r: r as number,
    alpha: alpha as number,
    rslora: raw.use_rslora === true,
    rankPattern: patternLookup(numberRecord(raw.rank_pattern, 'rank_pattern', fail, true), 'rank_pattern', file),
    alphaPattern: patternLookup(numberRecord(raw.alpha_pattern, 'alpha_pattern', fail, false), 'alpha_pattern', file),
    everyLayer,
    targetNames: Array.isArray(raw.target_modules) ? (raw.target_modules as string[]) : null,
  };
}

/** Checks target_modules; true when it is a list of plain projection names. */
function checkTargetModules(modules: unknown, fail: (m: string) => never): boolean {
  if (typeof modules === 'string' && modules.trim()) return false; // a regular expression or "all-linear": the tensors decide
  if (!Array.isArray(modules) || modules.length === 0 || !modules.every((m) => typeof m === 'string')) {
    fail(`target_modules must be a list of module names such as ["q_proj","v_proj"] or a pattern, found ${JSON.stringify(modules)}`);
  }
  let plain = true;
  for (const m of modules as string[]) {
    if (EMBEDDING_MODULES.test(m)) fail(`target module '${m}' is an embedding: embedding LoRA is not supported`);
    const last = m.split('.').at(-1)!;
    if (!targetFromModuleName(last) && !FUSED_NAMES.includes(last)) fail(`target module '${m}' is not supported; supported: ${[...Object.values(PEFT_MODULE_NAMES), ...FUSED_NAMES].join(', ')}`);
    if (m.includes('.')) plain = false;
  }
  return plain;
}

interface LoraPair {
  spec: LoraTensorSpec;
  rank: number;
  scaling: number;
  a: Float32Array;
  b: Float32Array;
}

interface ParsedKey {
  modulePath: string;
  part: 'A' | 'B';
}

/** `base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight` → the module path and A/B, or an error naming what is unsupported. */
function parseKey(name: string, file: string): ParsedKey {
  const fail = (msg: string): never => {
    throw new UserError(`${file}: tensor '${name}': ${msg}`);
  };
  const bare = name.startsWith(PEFT_PREFIX) ? name.slice(PEFT_PREFIX.length) : name;
  if (/\.lora_magnitude_vector\b/.test(bare)) fail('DoRA (lora_magnitude_vector) is not supported');
  if (/\.lora_embedding_[AB]\b/.test(bare)) fail('embedding LoRA is not supported');
  const m = /^(.+)\.lora_([AB])(?:\.[^.]+)?\.(weight|bias)$/.exec(bare);
  if (!m) fail('not a LoRA weight Hindsight can apply (only lora_A/lora_B weights are)');
  if (m![3] === 'bias') fail('LoRA biases are not supported');
  return { modulePath: m![1]!, part: m![2] as 'A' | 'B' };
}

/** A module an adapter holds a pair for: one projection (`spec`), or a fused one whose parts it adapts. */
type ModuleSlot = { spec: LoraTensorSpec; fused?: undefined } | { fused: FusedProjection; layer: number; inFeatures: number; outFeatures: number; spec?: undefined };

function slotFor(modulePath: string, model: ModelConfig, file: string, tensor: string): ModuleSlot {
  const fail = (msg: string): never => {
    throw new UserError(`${file}: tensor '${tensor}': ${msg}`);
  };
  if (EMBEDDING_MODULES.test(modulePath)) fail(`module '${modulePath}' is an embedding: embedding LoRA is not supported`);
  const m = MODULE_PATH.exec(modulePath);
  const fused = m ? fusedByName(model, m[3]!) : undefined;
  const target = m && !fused ? targetFromModuleName(m[3]!) : undefined;
  // A model that fuses a projection has no separate module for its parts (PEFT would find none either).
  const unfused = target && fusedProjectionOf(model, target);
  if (!m || (!target && !fused) || unfused) {
    const fusedHere = fusedProjectionsOf(model);
    const names = [...LINEAR_TARGETS.filter((t) => !fusedProjectionOf(model, t)).map((t) => PEFT_MODULE_NAMES[t]), ...fusedHere.map(fusedModuleName)];
    fail(`module '${modulePath}' is not supported; Hindsight adapts model.layers.N.(self_attn|mlp).(${names.join('|')})${fusedHere.length ? ` on this model, whose checkpoint fuses ${fusedHere.map((f) => f.parts.join('/')).join(' and ')}` : ''}`);
  }
  const layer = Number(m![1]);
  if (layer >= model.numLayers) fail(`module '${modulePath}' does not exist: this model has ${model.numLayers} layers (0–${model.numLayers - 1}); is the adapter for another model?`);
  if (fused) return { fused, layer, inFeatures: model.hiddenSize, outFeatures: partSpans(model, fused).reduce((n, p) => n + p.rows, 0) };
  return { spec: { module: PEFT_PREFIX + modulePath, layer, target: target!, ...linearShape(model, target!) } };
}

function readPairs(file: string, model: ModelConfig, settings: AdapterSettings): LoraPair[] {
  const { tensors } = readSafetensorsHeader(file);
  // By the decoder's module path (a multimodal folder's root → model.layers.N); `stored` is the path
  // PEFT named it by, which its rank_pattern and alpha_pattern were matched against.
  const byModule = new Map<string, { slot: ModuleSlot; stored: string; a?: TensorEntry; b?: TensorEntry }>();
  for (const entry of tensors) {
    const { modulePath: stored, part } = parseKey(entry.name, file);
    const modulePath = decoderModulePathOf(stored, model);
    if (settings.targetNames && !settings.targetNames.some((t) => modulePath === t || modulePath.endsWith(`.${t}`))) {
      throw new UserError(`${file}: tensor '${entry.name}' does not belong to this model's LoRA: its module is not among target_modules ${JSON.stringify(settings.targetNames)}`);
    }
    const held = byModule.get(modulePath) ?? { slot: slotFor(modulePath, model, file, entry.name), stored };
    if (part === 'A') held.a = entry;
    else held.b = entry;
    byModule.set(modulePath, held);
  }
  const pairs: LoraPair[] = [];
  for (const [modulePath, { slot, stored, a, b }] of byModule) {
    if (!a || !b) throw new UserError(`${file}: module '${modulePath}' has lora_${a ? 'A' : 'B'} but no lora_${a ? 'B' : 'A'}`);
    const rank = settings.rankPattern(stored) ?? settings.r;
    const alpha = settings.alphaPattern(stored) ?? settings.alpha;
    const { inFeatures, outFeatures } = slot.spec ?? slot;
    checkShape(a, [rank, inFeatures], file);
    checkShape(b, [outFeatures, rank], file);
    const scaling = alpha / (settings.rslora ? Math.sqrt(rank) : rank);
    const whole = { rank, scaling, a: floats(a, file), b: floats(b, file) };
    checkUpdateBound(whole, modulePath, file);
    if (slot.spec) pairs.push({ spec: slot.spec, ...whole });
    else {
      for (const part of splitFusedPair(model, slot.fused, rank, inFeatures, whole.a, whole.b)) {
        const spec = { module: PEFT_PREFIX + hfModulePath(slot.layer, part.target), layer: slot.layer, target: part.target, ...linearShape(model, part.target) };
        pairs.push({ spec, rank: part.rank, scaling, a: part.a, b: part.b });
      }
    }
  }
  if (!pairs.length) throw new UserError(`${file}: holds no LoRA tensors`);
  return pairs;
}

/**
 * Refuses an update no model survives: |scaling·B·A| is at most scaling·rank·max|A|·max|B|,
 * and past MAX_UPDATE (a real adapter's is near 1) the forward pass overflows to NaN, which
 * would otherwise come out as token 0 and log-probs of null with exit 0.
 */
function checkUpdateBound(pair: Pick<LoraPair, 'rank' | 'scaling' | 'a' | 'b'>, modulePath: string, file: string): void {
  const maxAbs = (x: Float32Array) => x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  const bound = Math.abs(pair.scaling) * pair.rank * maxAbs(pair.a) * maxAbs(pair.b);
  if (!(bound <= MAX_UPDATE)) {
    throw new UserError(`${file}: module '${modulePath}': its update scaling·B·A can reach ${bound.toPrecision(3)}, beyond ${MAX_UPDATE} (weights or lora_alpha far too large); the model would compute non-finite values`);
  }
}

function checkShape(entry: TensorEntry, expected: [number, number], file: string): void {
  if (entry.shape.length !== 2 || entry.shape[0] !== expected[0] || entry.shape[1] !== expected[1]) {
    throw new UserError(`${file}: tensor '${entry.name}' has shape [${entry.shape}], expected [${expected}] (the rank from adapter_config.json and the model's sizes)`);
  }
}

function floats(entry: TensorEntry, file: string): Float32Array {
  const data = toFloat32(readTensorBytes(entry), entry.dtype, `${file}: tensor '${entry.name}'`);
  if (!data.every(Number.isFinite)) throw new UserError(`${file}: tensor '${entry.name}' holds non-finite values`);
  return data.slice();
}

/** Folds per-module ranks and scalings into one r and alpha (see the module comment). */
function uniformAdapter(pairs: LoraPair[], model: ModelConfig, settings: AdapterSettings, file: string): { lora: LoraConfig; specs: LoraTensorSpec[]; weights: LoraWeights } {
  const present = new Set(pairs.map((p) => p.spec.target));
  // A list of plain names promises those projections in every layer: what is absent is missing.
  // (A fused module's name promises nothing of its parts: a part it leaves alone has no pair. Nor
  // does the name of a part this model fuses: PEFT finds no such module, and adapts none.)
  if (settings.everyLayer) for (const name of settings.targetNames ?? []) {
    const target = targetFromModuleName(name);
    if (target && !fusedProjectionOf(model, target)) present.add(target);
  }
  const targets = LINEAR_TARGETS.filter((t: LinearTarget) => present.has(t));
  const specs = loraSpecs(model, targets);
  const uniform = !settings.rslora && pairs.every((p) => p.rank === settings.r && p.scaling === settings.alpha / settings.r);
  const r = uniform ? settings.r : Math.max(...pairs.map((p) => p.rank));
  const reference = pairs.find((p) => p.rank === r)!;
  const alpha = uniform ? settings.alpha : reference.scaling * r;
  const scaling = alpha / r;
  const byModule = new Map(pairs.map((p) => [p.spec.module, p]));
  const weights: LoraWeights = new Map();
  const missing: string[] = [];
  for (const spec of specs) {
    const pair = byModule.get(spec.module);
    if (!pair) missing.push(spec.module);
    weights.set(loraAKey(spec), padRows(pair?.a, pair?.rank ?? 0, r, spec.inFeatures));
    weights.set(loraBKey(spec), padColumns(pair?.b, pair?.rank ?? 0, r, spec.outFeatures, pair ? pair.scaling / scaling : 1));
  }
  if (missing.length && settings.everyLayer) {
    throw new UserError(`${file}: missing ${missing.length * 2} LoRA tensor(s), e.g. '${missing[0]}.lora_A.weight'`);
  }
  return { lora: { r, alpha, targets }, specs, weights };
}

/** A [rank, in] → [r, in]: the extra rows are zero. */
function padRows(a: Float32Array | undefined, rank: number, r: number, inF: number): Float32Array {
  const out = new Float32Array(r * inF);
  if (a) out.set(a.subarray(0, rank * inF));
  return out;
}

/** B [out, rank] → [out, r], scaled by `factor`: the extra columns are zero. */
function padColumns(b: Float32Array | undefined, rank: number, r: number, outF: number, factor: number): Float32Array {
  if (b && rank === r && factor === 1) return b;
  const out = new Float32Array(outF * r);
  if (!b) return out;
  for (let o = 0; o < outF; o++) for (let k = 0; k < rank; k++) out[o * r + k] = b[o * rank + k]! * factor;
  return out;
}
