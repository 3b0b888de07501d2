/**
 * A Hugging Face checkpoint folder: `config.json` and its weights (`model.safetensors`, or
 * shards listed in `model.safetensors.index.json`).
 *
 * Supported families: Llama (`LlamaForCausalLM`; Mistral's `MistralForCausalLM` is the same
 * network, and so is Phi-3's `Phi3ForCausalLM` with fused projections, ./fused-projections.ts,
 * Granite's `GraniteForCausalLM` with four multipliers, SmolLM3's with layers without RoPE, and
 * OLMo 2's and 3's with norms after each branch), Qwen2 (q/k/v bias), Qwen3 (RMSNorm of q and k
 * over head_dim before RoPE), Gemma 2 and 3 (./gemma-config.ts; Gemma 3's multimodal folders'
 * text model too) and GLM-4 (Llama's attention with q/k/v biases, RoPE over adjacent pairs of half
 * of each head, gate/up fused, four norms a layer). Also: GQA, head_dim ≠ hidden/heads, tied embeddings, rope_theta, partial rotation, sliding
 * layers (./sliding-layers.ts), and rope_scaling of type `linear`, `llama3`, `longrope` or `yarn`
 * (./rope-config.ts; also as transformers 5's `rope_parameters`). Anything else is refused with a
 * message that names the file and the field or tensor, rather than producing wrong numbers.
 *
 * Weights are read lazily by name, widened to fp32 (see ./safetensors.ts for why), and
 * checked against the shape the config implies.
 *
 * A path ending in `.gguf` opens a GGUF file instead (./gguf/model.ts): its metadata stands for
 * config.json and its tensors, dequantised, for the safetensors, under Hugging Face's names.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32, type TensorEntry } from './safetensors.js';
import { ggufIdentityFiles, isGgufPath, openGgufModel, readGgufTensor, type GgufModel } from './gguf/model.js';
import { usedPositions, type ModelConfig, type ModelFamily, type RopeScaling } from './model-config.js';
import { rowBytes, splitFusedTensors } from './fused-projections.js';
import { gemma3MultimodalText, gemmaVersionOf, readGemma } from './gemma-config.js';
import { parseRopeScaling, readRope, ropeInverseFrequencies, type RopeRead } from './rope-config.js';
import { readSlidingLayers } from './sliding-layers.js';

export { ropeInverseFrequencies };

export type { ModelConfig, ModelFamily, RopeScaling };

const ARCHITECTURES: Record<string, ModelFamily> = {
  LlamaForCausalLM: 'llama',
  // Llama's layers, with a sliding attention window in its first version (below).
  MistralForCausalLM: 'llama',
  // Llama's layers with q/k/v and gate/up each stored as one matrix (./fused-projections.ts),
  // LongRoPE, and in Phi-4-mini a partial rotation.
  Phi3ForCausalLM: 'llama',
  // Llama's layers with four scalar multipliers (ModelConfig.multipliers).
  GraniteForCausalLM: 'llama',
  // Llama's layers, every 4th without RoPE (ModelConfig.noRopeLayers).
  SmolLM3ForCausalLM: 'llama',
  // Llama's layers with YaRN and a query temperature past the original context (ModelConfig.queryTemperature).
  Ministral3ForCausalLM: 'llama',
  // Llama's projections with norms after each branch instead of before, and q/k normed whole (ModelConfig.postNorms).
  Olmo2ForCausalLM: 'llama',
  // OLMo 2's layers, three of four sliding, the others with YaRN (ModelConfig.sliding).
  Olmo3ForCausalLM: 'llama',
  // Gemma 2: Llama's projections with four norms a layer, GELU, every other layer sliding, soft-capped attention and logits (./gemma-config.ts).
  Gemma2ForCausalLM: 'gemma2',
  // Gemma 3's text model: Gemma 2's layers, q/k normed, five of six sliding, no attention cap (./gemma-config.ts).
  Gemma3ForCausalLM: 'gemma3',
  // Its multimodal folders (4B and up): the text model in text_config, the weights under a root of their own.
  Gemma3ForConditionalGeneration: 'gemma3',
  // GLM-4 (0414 and Z1): Llama's attention with q/k/v biases, half of each head turned by RoPE over
  // adjacent pairs, gate and up in one gate_up_proj, four norms a layer (ModelConfig.sandwichNorms).
  Glm4ForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};

/** Architectures people bring that Hindsight does not run: why, and what runs instead. */
const REFUSED_ARCHITECTURES: Record<string, string> = {
  Mistral3ForConditionalGeneration: "Mistral 3's multimodal folder; its GGUF (mistral3) runs, and so does a Ministral3ForCausalLM folder",
  ...Object.fromEntries(['Gemma3nForCausalLM', 'Gemma3nForConditionalGeneration'].map((a) => [a, "Gemma 3n's per-layer embeddings and AltUp streams are not built; Gemma 2 and 3 run"])),
  ...Object.fromEntries(['Gemma4ForCausalLM', 'Gemma4ForConditionalGeneration'].map((a) => [a, "Gemma 4's per-layer head sizes and shared keys and values are not built; Gemma 2 and 3 run"])),
  ...Object.fromEntries(['Qwen3_5ForCausalLM', 'Qwen3_5ForConditionalGeneration', 'Qwen3NextForCausalLM'].map((a) => [a, 'its linear-attention (Gated DeltaNet) layers are not built; Qwen3 runs'])),
  ...Object.fromEntries(['MixtralForCausalLM', 'Qwen3MoeForCausalLM', 'Qwen3_5MoeForCausalLM', 'GptOssForCausalLM'].map((a) => [a, 'a mixture of experts, which is not built'])),
};

function readJson(file: string, what: string): Record<string, unknown> {
  if (!fs.existsSync(file)) throw new UserError(`${what}: missing file ${file}`);
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UserError(`${file}: invalid JSON (${(err as Error).message})`);
  }
}

/** Parses and validates `config.json`. */
export function readModelConfig(dir: string): ModelConfig {
  const file = path.join(dir, 'config.json');
  let raw = readJson(file, `model folder ${dir}`);
  const archs = (raw.architectures as string[] | undefined) ?? [];
  const arch = archs.find((a) => a in ARCHITECTURES);
  if (!arch) {
    const known = Object.keys(ARCHITECTURES).join(', ');
    const why = archs.map((a) => REFUSED_ARCHITECTURES[a]).find(Boolean);
    throw new UserError(`${file}: unsupported architecture ${JSON.stringify(archs.length ? archs : raw.model_type ?? null)}${why ? ` (${why})` : ''}; supported: ${known}`);
  }
  const family = ARCHITECTURES[arch]!;
  if (arch === 'Gemma3ForConditionalGeneration') raw = gemma3MultimodalText(raw, file);
  const num = (key: string, fallback?: number): number => {
    const v = raw[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new UserError(`${file}: '${key}' must be a number, found ${JSON.stringify(raw[key])}`);
    return v;
  };
  const act = raw.hidden_act ?? 'silu';
  const gemmaVersion = gemmaVersionOf(family);
  if (!gemmaVersion && act !== 'silu') throw new UserError(`${file}: hidden_act '${act}' is not supported (only silu)`);
  if (raw.use_sliding_window === true) throw new UserError(`${file}: use_sliding_window is not supported`);
  const hiddenSize = num('hidden_size');
  const numHeads = num('num_attention_heads');
  // Families whose RoPE is given per layer type (sliding and global layers), each type's scaling read as any other.
  const parseScaling = (scaling: unknown) => parseRopeScaling(scaling, file, raw, 1);
  const numLayers = num('num_hidden_layers');
  const gemma = gemmaVersion ? readGemma(raw, file, gemmaVersion, numLayers, parseScaling) : undefined;
  // OLMo 3's sliding layers: every 4th global, one base for all (its 4.5x configs name no other).
  const olmoSliding = arch === 'Olmo3ForCausalLM' ? readSlidingLayers(raw, file, numLayers, { pattern: 4, theta: 500_000 }, parseScaling) : undefined;
  const typed = gemma ?? olmoSliding; // RoPE given per layer type
  const rope: RopeRead = typed ? { theta: typed.ropeTheta, scaling: typed.ropeScaling, partial: 1 } : readRope(raw, file, num);
  const eos = raw.eos_token_id;
  const eosTokenIds = Array.isArray(eos) ? (eos as number[]) : typeof eos === 'number' ? [eos] : [];
  const config: ModelConfig = {
    family,
    architecture: arch,
    vocabSize: num('vocab_size'),
    hiddenSize,
    intermediateSize: num('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads: num('num_key_value_heads', numHeads),
    headDim: typeof raw.head_dim === 'number' ? raw.head_dim : hiddenSize / numHeads,
    rmsNormEps: num('rms_norm_eps', 1e-6),
    ropeTheta: rope.theta,
    ropeScaling: rope.scaling,
    tieWordEmbeddings: raw.tie_word_embeddings === true,
    // attention_bias: biases on q, k, v and o (Llama, Qwen3); Qwen2 has q, k, v biases always and no o bias.
    qkvBias: family === 'qwen2' || raw.attention_bias === true,
    oBias: family !== 'qwen2' && raw.attention_bias === true,
    mlpBias: raw.mlp_bias === true,
    qkNorm: family === 'qwen3' || family === 'gemma3',
    bosTokenId: typeof raw.bos_token_id === 'number' ? raw.bos_token_id : undefined,
    eosTokenIds,
    maxPositionEmbeddings: contextCap(arch, raw, num('max_position_embeddings', 4096), rope),
  };
  const rotaryDim = Math.floor(config.headDim * rope.partial);
  if (rotaryDim !== config.headDim) config.rotaryDim = rotaryDim;
  if (gemma) Object.assign(config, { gemma: gemma.layout, sliding: gemma.sliding, sandwichNorms: 'gemma' });
  if (arch === 'SmolLM3ForCausalLM') config.noRopeLayers = noRopeLayers(raw, file, config.numLayers);
  if (arch === 'Ministral3ForCausalLM') config.queryTemperature = queryTemperature(raw, file);
  if (arch === 'Olmo2ForCausalLM' || arch === 'Olmo3ForCausalLM') Object.assign(config, { qkNorm: true, qkNormWhole: true, postNorms: true });
  // GLM-4's attention_bias puts biases on q, k and v only (its o_proj has none).
  if (arch === 'Glm4ForCausalLM') Object.assign(config, { oBias: false, sandwichNorms: 'glm4', ropeInterleaved: true });
  if (olmoSliding) config.sliding = olmoSliding.sliding;
  if (arch === 'Gemma3ForConditionalGeneration') config.moduleRoot = MULTIMODAL_ROOT;
  if (arch === 'GraniteForCausalLM') {
    config.multipliers = { embedding: num('embedding_multiplier', 1), attention: num('attention_multiplier', 1), residual: num('residual_multiplier', 1), logits: num('logits_scaling', 1) };
    if (!(config.multipliers.logits > 0)) throw new UserError(`${file}: logits_scaling must be a positive number, found ${config.multipliers.logits}`);
  }
  if (!Number.isInteger(config.headDim)) throw new UserError(`${file}: head_dim is missing and hidden_size is not a multiple of num_attention_heads`);
  if ((config.rotaryDim ?? config.headDim) % 2) throw new UserError(`${file}: RoPE's ${config.rotaryDim ?? config.headDim} dimensions per head must be an even number`);
  if (numHeads % config.numKvHeads) throw new UserError(`${file}: num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${config.numKvHeads}`);
  return config;
}

/**
 * Ministral 3's query temperature (transformers' get_llama_4_attn_scale): `llama_4_scaling_beta`
 * over YaRN's `original_max_position_embeddings`, both in its RoPE parameters; none where beta is
 * absent or 0. Its attention has no window (`sliding_window` set is refused).
 */
function queryTemperature(raw: Record<string, unknown>, file: string): ModelConfig['queryTemperature'] {
  if (typeof raw.sliding_window === 'number') throw new UserError(`${file}: sliding_window ${raw.sliding_window} is not supported for Ministral 3`);
  const params = (raw.rope_parameters ?? raw.rope_scaling ?? {}) as Record<string, unknown>;
  const beta = params.llama_4_scaling_beta, floorScale = params.original_max_position_embeddings;
  if (beta === undefined || beta === null || beta === 0) return undefined;
  if (typeof beta !== 'number' || !Number.isFinite(beta) || typeof floorScale !== 'number' || !(floorScale > 0)) {
    throw new UserError(`${file}: llama_4_scaling_beta ${JSON.stringify(beta)} needs a number and original_max_position_embeddings in rope_parameters`);
  }
  return { beta, floorScale };
}

/**
 * SmolLM3's layers without RoPE: `no_rope_layers` (1 where a layer turns q and k, 0 where it does
 * not), else every `no_rope_layer_interval`-th layer (4), as transformers counts them.
 */
function noRopeLayers(raw: Record<string, unknown>, file: string, numLayers: number): boolean[] {
  const given = raw.no_rope_layers;
  if (given !== undefined && given !== null) {
    if (!Array.isArray(given) || given.length !== numLayers || !given.every((v) => v === 0 || v === 1)) throw new UserError(`${file}: no_rope_layers must be ${numLayers} entries of 0 or 1, found ${JSON.stringify(given)?.slice(0, 80)}`);
    return given.map((v) => v === 0);
  }
  const interval = raw.no_rope_layer_interval ?? 4;
  if (typeof interval !== 'number' || !Number.isInteger(interval) || interval < 1) throw new UserError(`${file}: no_rope_layer_interval must be a positive integer, found ${JSON.stringify(interval)}`);
  return Array.from({ length: numLayers }, (_, i) => (i + 1) % interval === 0);
}

/**
 * The positions a model is used at (ModelConfig's usedPositions): a sliding window caps them for
 * the architectures whose window the decoder does not build (Mistral 7B v0.1: 4,096 of 32,768
 * positions; Phi-3-mini-4k: 2,047 of 4,096; later Mistrals set `sliding_window` to null), and so
 * does LongRoPE's original context. Qwen2 and Qwen3 configs carry a `sliding_window` too, used
 * only under `use_sliding_window` (refused above).
 */
function contextCap(arch: string, raw: Record<string, unknown>, positions: number, rope: RopeRead): number {
  const window = SLIDING_WINDOW_ARCHITECTURES.has(arch) && typeof raw.sliding_window === 'number' ? raw.sliding_window : undefined;
  return usedPositions(positions, { window, longRopeOriginal: rope.scaling?.type === 'longrope' ? rope.originalContext : undefined });
}
const SLIDING_WINDOW_ARCHITECTURES = new Set(['MistralForCausalLM', 'Phi3ForCausalLM']);

/** transformers 5's root of Gemma 3's text model in its multimodal folders (ModelConfig.moduleRoot). */
export const MULTIMODAL_ROOT = 'model.language_model';

/**
 * The stored names of a multimodal folder's text-model tensors by the names the decoder asks for:
 * `model.language_model.X` (transformers 5) and `language_model.model.X` (4.5x) as `model.X`,
 * 4.5x's `language_model.lm_head.weight` as `lm_head.weight`. The vision tower keeps its names.
 */
function rootAliases(names: Iterable<string>): Map<string, string> {
  const aliases = new Map<string, string>();
  for (const name of names) {
    const m = /^(?:model\.language_model|language_model\.model)\.(.*)$/.exec(name);
    if (m) aliases.set(`model.${m[1]}`, name);
    else if (name === 'language_model.lm_head.weight') aliases.set('lm_head.weight', name);
  }
  return aliases;
}

/** Weights of a checkpoint, indexed by tensor name across shards; read on demand. */
export class Checkpoint {
  /** Stored name → the decoder's name, where they differ (the reverse of `aliases`). */
  private readonly decoderNames: Map<string, string>;

  private constructor(
    readonly dir: string,
    readonly config: ModelConfig,
    private readonly entries: Map<string, TensorEntry>,
    private readonly files: string[],
    /** Set when the checkpoint is a GGUF file (`dir` is then the file's path). */
    readonly gguf?: GgufModel,
    /** The decoder's name → the stored one, where they differ (ModelConfig.moduleRoot). */
    private readonly aliases: Map<string, string> = new Map(),
  ) {
    this.decoderNames = new Map([...aliases].map(([ours, stored]) => [stored, ours]));
  }

  static open(dir: string): Checkpoint {
    if (isGgufPath(dir)) {
      const g = openGgufModel(dir);
      const entries = new Map<string, TensorEntry>();
      for (const [name, t] of g.tensors) entries.set(name, { name, dtype: 'F32', shape: t.shape, file: t.info.file, begin: t.info.begin, end: t.info.end });
      return new Checkpoint(dir, g.config, entries, g.files, g);
    }
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new UserError(`model folder not found: ${dir}`);
    const config = readModelConfig(dir);
    const entries = new Map<string, TensorEntry>();
    const files = weightFiles(dir);
    for (const file of files) {
      for (const e of readSafetensorsHeader(file).tensors) entries.set(e.name, e);
    }
    // Phi-3's fused q/k/v and gate/up: each part a cut of the fused tensor's bytes.
    splitFusedTensors(config, entries, dir, (e) => e.shape[0] ?? 0, (e, name, start, rows) => ({ ...e, name, shape: [rows, ...e.shape.slice(1)], ...rowBytes(e.begin, e.end, e.shape[0]!, start, rows) }));
    return new Checkpoint(dir, config, entries, files, undefined, config.moduleRoot ? rootAliases(entries.keys()) : undefined);
  }

  has(name: string): boolean {
    return this.entries.has(this.aliases.get(name) ?? name);
  }

  /** The name the decoder knows a stored tensor by (the same, but for a multimodal folder's text model). */
  decoderName(stored: string): string {
    return this.decoderNames.get(stored) ?? stored;
  }

  /**
   * Names the weights' content (a JSON text): the folder, the hash of config.json, and each
   * weight file's size and modification time; `variant` names a form of them (a --quantize
   * choice). Sessions share, and the graph cache keeps, one weights file per identity.
   */
  identity(variant?: string): string {
    if (this.gguf) {
      const config = crypto.createHash('sha256').update(JSON.stringify(this.config)).digest('hex').slice(0, 16);
      return JSON.stringify({ dir: path.resolve(this.dir), config, files: ggufIdentityFiles(this.gguf), ...(variant ? { variant } : {}) });
    }
    const files = this.files.map((f) => {
      const st = fs.statSync(f);
      return `${path.basename(f)}:${st.size}:${st.mtimeMs}`;
    });
    const config = crypto.createHash('sha256').update(fs.readFileSync(path.join(this.dir, 'config.json'))).digest('hex').slice(0, 16);
    return JSON.stringify({ dir: path.resolve(this.dir), config, files, ...(variant ? { variant } : {}) });
  }

  /** Every tensor's name as stored (a multimodal folder's vision tower too). */
  get tensorNames(): string[] {
    return [...this.entries.keys()];
  }

  /** A tensor by the decoder's name or the stored one. */
  entry(name: string): TensorEntry {
    const e = this.entries.get(this.aliases.get(name) ?? name);
    if (!e) {
      const where = this.files.length === 1 ? this.files[0]! : `${this.dir} (${this.files.map((f) => path.basename(f)).join(', ')})`;
      throw new UserError(`${where}: missing tensor '${name}', which ${this.gguf ? 'its metadata requires' : 'config.json requires'}`);
    }
    return e;
  }

  /** Reads a tensor as fp32, checking its shape. */
  readFloat32(name: string, expectedShape: number[]): Float32Array {
    const e = this.entry(name);
    this.checkShape(name, expectedShape);
    if (this.gguf) return readGgufTensor(this.gguf.tensors.get(name)!);
    return toFloat32(readTensorBytes(e), e.dtype, `${e.file}: tensor '${name}'`);
  }

  checkShape(name: string, expectedShape: number[]): void {
    const e = this.entry(name);
    if (e.shape.length !== expectedShape.length || e.shape.some((d, i) => d !== expectedShape[i])) {
      throw new UserError(`${e.file}: tensor '${name}' has shape [${e.shape}], expected [${expectedShape}] from ${this.gguf ? 'its metadata' : 'config.json'}`);
    }
  }
}

/** The safetensors files of a checkpoint: the index's shards, or the single file. */
function weightFiles(dir: string): string[] {
  const index = path.join(dir, 'model.safetensors.index.json');
  if (fs.existsSync(index)) {
    const map = readJson(index, dir).weight_map as Record<string, string> | undefined;
    if (!map || typeof map !== 'object') throw new UserError(`${index}: has no weight_map`);
    const files = [...new Set(Object.values(map))].map((f) => path.join(dir, f));
    for (const f of files) if (!fs.existsSync(f)) throw new UserError(`${index}: lists shard ${path.basename(f)}, which is missing (${f})`);
    return files;
  }
  const single = path.join(dir, 'model.safetensors');
  if (fs.existsSync(single)) return [single];
  const any = fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort();
  if (any.length) return any.map((f) => path.join(dir, f));
  throw new UserError(`${dir}: missing weights (no model.safetensors, model.safetensors.index.json or *.safetensors)`);
}
