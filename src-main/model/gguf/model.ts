/**
 * A GGUF file as a checkpoint: its metadata as the ModelConfig that config.json gives a
 * Hugging Face folder, and its tensors under the Hugging Face names the decoder builder asks
 * for, in Hugging Face's layout.
 *
 * Architectures: `llama`, `qwen2` (q/k/v biases), `qwen3` (q/k RMSNorm) and `phi3`; tied heads
 * (no output.weight) and untied. llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute)
 * reorders the rows of Llama's attn_q and attn_k within each head, from Hugging Face's
 * rotate-half RoPE layout to ggml's interleaved one; {@link unpermuteRows} undoes it, so the
 * decoder sees the weights it would read from the safetensors. Qwen2, Qwen3 and Phi-3 are
 * converted without it (ggml runs them with NeoX RoPE, Hugging Face's layout).
 *
 * Phi-3 (Phi3MiniModel in the converter) is Llama's network stored as transformers stores it:
 * q/k/v as one `attn_qkv` and gate/up as one `ffn_up` (gate's rows first), each cut here into
 * its parts' byte ranges (../fused-projections.ts), so quantised blocks stay as they are; a
 * partial rotation (`phi3.rope.dimension_count` < head size: Phi-4-mini); LongRoPE as the
 * tensors `rope_factors_short` / `rope_factors_long` (a divisor per rotated pair) and
 * `phi3.rope.scaling.attn_factor`. Hindsight stays within the original context, where llama.cpp
 * (llama_model::get_rope_factors, for a context up to original_context_length) and transformers
 * both take the short factors, so those are read and the long ones left; the context is capped
 * there, and at a sliding window (`phi3.attention.sliding_window`, 0 for none), as
 * ../hf-checkpoint.ts caps a folder's.
 *
 * OLMo 2 (`olmo2`): Llama's projections, not permuted, with `post_attention_norm` and
 * `post_ffw_norm` after each branch and no norm before them, `attn_q_norm`/`attn_k_norm` over the
 * whole projection (ModelConfig.postNorms); with `attention.sliding_window`, OLMo 3, whose
 * sliding layers (../sliding-layers.ts) keep the plain RoPE and the others YaRN's.
 *
 * Mistral 3 (`mistral3`: Mistral Small 3.x, Ministral 3) is Llama's file (q/k permuted), with
 * YaRN (`rope.scaling.yarn_log_multiplier` its mscale_all_dim) and `attention.temperature_scale`,
 * the query temperature's beta over YaRN's original context (ModelConfig.queryTemperature).
 *
 * SmolLM3 (`smollm3`) is Llama's file (q/k permuted) whose every 4th layer skips RoPE, as
 * llama.cpp fixes it (n_no_rope_layer_step).
 *
 * Gemma 2 and 3 (`gemma2`, `gemma3`): their four norms a layer (post_attention_norm, ffn_norm
 * before the MLP, post_ffw_norm) stored as 1 + w, read back as w; the sliding layers' window,
 * pattern and RoPE base and the soft-caps as llama.cpp reads them (../gemma-config.ts
 * gemmaFromGguf); q/k not permuted; an Ollama file's vision tower left unread.
 *
 * GLM-4 (`glm4`: GLM-4-0414, GLM-Z1) keeps q/k as the checkpoint has them (ggml's plain RoPE turns
 * adjacent pairs, as GLM does: ModelConfig.ropeInterleaved) on half of each head
 * (`rope.dimension_count`), gate and up as one `ffn_up` (cut into parts as Phi-3's), and Gemma's
 * four norms under GLM's names (ModelConfig.sandwichNorms); GLM-4V's M-RoPE
 * (`rope.dimension_sections`) is refused.
 *
 * Granite (`granite`) is Llama's file with `embedding_scale`, `attention.scale`, `residual_scale`
 * and `logit_scale` (ModelConfig.multipliers), its q/k rows permuted as Llama's.
 *
 * Anything else (another architecture, per-layer head counts, partial RoPE outside Phi-3, rope
 * scaling other than linear, Llama 3's or Phi-3's LongRoPE) is one UserError line naming it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../../src-shared/types.js';
import { SANDWICH_NORMS, usedPositions, type ModelConfig, type ModelFamily, type RopeScaling } from '../model-config.js';
import { rowBytes, splitFusedTensors } from '../fused-projections.js';
import { gemmaFromGguf, gemmaVersionOf } from '../gemma-config.js';
import { slidingFromGguf } from '../sliding-layers.js';
import { ropeScaling } from './rope-metadata.js';
import { dequantize } from './dequantize.js';
import { ggmlTypeName } from './ggml-types.js';
import { openGguf, readGgufTensorBytes, type GgufFile, type GgufTensorInfo } from './reader.js';

const FAMILIES: Record<string, { family: ModelFamily; architecture: string }> = {
  llama: { family: 'llama', architecture: 'LlamaForCausalLM' },
  qwen2: { family: 'qwen2', architecture: 'Qwen2ForCausalLM' },
  qwen3: { family: 'qwen3', architecture: 'Qwen3ForCausalLM' },
  // Llama's layers with fused projections, LongRoPE and partial rotation (see the module comment).
  phi3: { family: 'llama', architecture: 'Phi3ForCausalLM' },
  // Llama's layers with four multipliers (ModelConfig.multipliers).
  granite: { family: 'llama', architecture: 'GraniteForCausalLM' },
  // Llama's projections, norms after each branch, q/k normed whole (ModelConfig.postNorms); not permuted.
  olmo2: { family: 'llama', architecture: 'Olmo2ForCausalLM' },
  // Llama's file (Mistral Small 3.x, Ministral 3), with YaRN and a query temperature where it says so.
  mistral3: { family: 'llama', architecture: 'Ministral3ForCausalLM' },
  // Llama's file, every 4th layer without RoPE (llama.cpp's fixed step).
  smollm3: { family: 'llama', architecture: 'SmolLM3ForCausalLM' },
  // Gemma 2, and Gemma 3's text model (../gemma-config.ts gemmaFromGguf reads their layout).
  gemma2: { family: 'gemma2', architecture: 'Gemma2ForCausalLM' },
  gemma3: { family: 'gemma3', architecture: 'Gemma3ForCausalLM' },
  // GLM-4 (0414, Z1): Llama's projections (not permuted: ggml's plain RoPE is GLM's adjacent pairs), half of each head turned, gate and up fused, four norms.
  glm4: { family: 'llama', architecture: 'Glm4ForCausalLM' },
};

/** The architectures whose q/k rows llama.cpp's converter permutes (LlamaModel.permute, which Granite's, SmolLM3's and Ministral 3's converters inherit). */
export const ROPE_PERMUTED_ARCHITECTURES: ReadonlySet<string> = new Set(['llama', 'granite', 'smollm3', 'mistral3']);

/** The `general.architecture` values Hindsight runs. */
export const GGUF_ARCHITECTURES: readonly string[] = Object.keys(FAMILIES);

/** GGUF tensor names (without `blk.N.`) → Hugging Face's. */
const LAYER_NAMES: Record<string, string> = {
  attn_norm: 'input_layernorm',
  ffn_norm: 'post_attention_layernorm',
  attn_q: 'self_attn.q_proj',
  attn_k: 'self_attn.k_proj',
  attn_v: 'self_attn.v_proj',
  attn_output: 'self_attn.o_proj',
  attn_q_norm: 'self_attn.q_norm',
  attn_k_norm: 'self_attn.k_norm',
  ffn_gate: 'mlp.gate_proj',
  ffn_up: 'mlp.up_proj',
  ffn_down: 'mlp.down_proj',
};
const TOP_NAMES: Record<string, string> = { token_embd: 'model.embed_tokens', output_norm: 'model.norm', output: 'lm_head' };
/**
 * Phi-3's layers (llama.cpp's phi3 tensors): attn_qkv, and ffn_up holding gate then up (llama.cpp
 * runs it as SwiGLU over its two halves, as transformers' Phi3MLP chunks gate_up_proj); no
 * separate q/k/v or gate, which a phi3 file is refused for rather than read half fused.
 */
const PHI3_LAYER_NAMES: Record<string, string | undefined> = {
  ...LAYER_NAMES, attn_qkv: 'self_attn.qkv_proj', ffn_up: 'mlp.gate_up_proj', attn_q: undefined, attn_k: undefined, attn_v: undefined, ffn_gate: undefined,
};

/** Four norms a layer (Gemma, GLM-4): llama.cpp's ffn_norm is the norm before the MLP, as Llama's, but Hugging Face names it otherwise. */
function sandwichLayerNames(norms: (typeof SANDWICH_NORMS)[keyof typeof SANDWICH_NORMS]): Record<string, string | undefined> {
  return { ...LAYER_NAMES, post_attention_norm: norms.afterAttention, ffn_norm: norms.beforeMlp, post_ffw_norm: norms.afterMlp };
}
const GEMMA_LAYER_NAMES = sandwichLayerNames(SANDWICH_NORMS.gemma);
/** GLM-4's: its four norms, and gate and up in one ffn_up (gate's rows first), as Phi-3's. */
const GLM4_LAYER_NAMES: Record<string, string | undefined> = { ...sandwichLayerNames(SANDWICH_NORMS.glm4), ffn_up: 'mlp.gate_up_proj', ffn_gate: undefined };

/** OLMo 2's two norms a layer, after attention and after the MLP; none before them. */
const OLMO2_LAYER_NAMES: Record<string, string | undefined> = {
  ...LAYER_NAMES, attn_norm: undefined, ffn_norm: undefined, post_attention_norm: 'post_attention_layernorm', post_ffw_norm: 'post_feedforward_layernorm',
};

/** The layer tensors' Hugging Face names for `arch` (Llama's where the architecture has no table of its own). */
const LAYER_NAMES_OF: Record<string, Record<string, string | undefined>> = { phi3: PHI3_LAYER_NAMES, gemma2: GEMMA_LAYER_NAMES, gemma3: GEMMA_LAYER_NAMES, olmo2: OLMO2_LAYER_NAMES, glm4: GLM4_LAYER_NAMES };

/**
 * A vision tower's and projector's tensors (`v.*`, `mm.*`: Ollama's Gemma 3 and Mistral 3 files carry
 * them beside the text model, under the names llama.cpp's mmproj files use), which a text model does not read.
 */
export function isVisionTensor(ggufName: string): boolean {
  return /^(v|mm)\./.test(ggufName);
}

/**
 * Whether a tensor of `arch` holds RoPE's parameters rather than a weight the decoder reads:
 * Llama 3's rope_freqs (folded into ropeScaling) and Phi-3's LongRoPE factors (the short ones
 * read into ropeScaling; the long ones, past the original context, never used).
 */
export function isRopeTensor(ggufName: string, arch: string): boolean {
  return ggufName === 'rope_freqs.weight' || (arch === 'phi3' && (ggufName === 'rope_factors_short.weight' || ggufName === 'rope_factors_long.weight'));
}

/** The Hugging Face name of a GGUF tensor of `arch` (default llama's names), or undefined for one the decoder does not use. */
export function huggingFaceName(ggufName: string, arch?: string): string | undefined {
  const m = /^(?:blk\.(\d+)\.)?([a-z_]+)\.(weight|bias)$/.exec(ggufName);
  if (!m) return undefined;
  const [, layer, base, kind] = m;
  const mapped = layer !== undefined ? (LAYER_NAMES_OF[arch ?? ''] ?? LAYER_NAMES)[base!] : TOP_NAMES[base!];
  if (!mapped) return undefined;
  return layer !== undefined ? `model.layers.${layer}.${mapped}.${kind}` : `${mapped}.${kind}`;
}

export interface GgufTensor {
  /** Where its bytes are; a part of a fused tensor (Phi-3) has its rows' bytes and dims, under the fused tensor's name. */
  info: GgufTensorInfo;
  /** Hugging Face's order: [out, in] for a matrix. */
  shape: number[];
  /** Llama's attn_q/attn_k: the head count whose row permutation is undone on read. */
  permuteHeads?: number;
  /** Gemma's norms: llama.cpp's converter stored 1 + w, and the decoder reads w, as config.json's models store it. */
  minusOne?: boolean;
}

export interface GgufModel {
  file: string;
  files: string[];
  gguf: GgufFile;
  config: ModelConfig;
  tensors: Map<string, GgufTensor>;
}

/**
 * A q/k projection's rows moved between llama.cpp's interleaved RoPE order, row h·hd + 2i + t of
 * head h, and Hugging Face's rotate-half order, row h·hd + t·hd/2 + i. Reading a GGUF goes to
 * Hugging Face's ({@link unpermuteRows}); writing one (train/gguf-adapter.ts) goes back.
 */
function reorderHeadRows(data: Float32Array, heads: number, cols: number, toGgml: boolean): Float32Array {
  const rows = data.length / cols;
  const hd = rows / heads, half = hd / 2;
  const out = new Float32Array(data.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let t = 0; t < 2; t++) {
        const ggmlRow = h * hd + 2 * i + t, hfRow = h * hd + t * half + i;
        const [from, to] = toGgml ? [hfRow * cols, ggmlRow * cols] : [ggmlRow * cols, hfRow * cols];
        out.set(data.subarray(from, from + cols), to);
      }
    }
  }
  return out;
}

/** ggml's interleaved q/k rows → Hugging Face's, per head. */
export function unpermuteRows(data: Float32Array, heads: number, cols: number): Float32Array {
  return reorderHeadRows(data, heads, cols, false);
}

/** Hugging Face's q/k rows → ggml's interleaved order, per head: the inverse of {@link unpermuteRows}. */
export function permuteRows(data: Float32Array, heads: number, cols: number): Float32Array {
  return reorderHeadRows(data, heads, cols, true);
}

/** A tensor's values as fp32 in Hugging Face's layout. */
export function readGgufTensor(t: GgufTensor): Float32Array {
  const elements = t.shape.reduce((a, d) => a * d, 1);
  const data = dequantize(readGgufTensorBytes(t.info), t.info.type, elements, `${t.info.file}: tensor '${t.info.name}'`);
  if (t.minusOne) return data.map((v) => v - 1);
  return t.permuteHeads ? unpermuteRows(data, t.permuteHeads, t.shape.length === 2 ? t.shape[1]! : 1) : data;
}

/**
 * A path ending in `.gguf`, or a file that starts with GGUF's magic whatever its name: Ollama
 * keeps its models as blobs named by their hash (`blobs/sha256-…`), with no extension.
 */
export function isGgufPath(p: string): boolean {
  if (/\.gguf$/i.test(p)) return true;
  let fd: number | undefined;
  try {
    if (!fs.statSync(p).isFile()) return false;
    fd = fs.openSync(p, 'r');
    const magic = Buffer.alloc(4);
    return fs.readSync(fd, magic, 0, 4, 0) === 4 && magic.toString('latin1') === 'GGUF';
  } catch {
    return false;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** Opens a GGUF model (one file, or any part of a split one). */
export function openGgufModel(file: string): GgufModel {
  if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) throw new UserError(`model file not found: ${file}`);
  const gguf = openGguf(file);
  return { file, files: gguf.files, gguf, ...ggufModelLayout(gguf, file) };
}

/**
 * The ModelConfig a GGUF's metadata stands for and its tensors under Hugging Face's names, every
 * rule above checked (a UserError names what is not run). `gguf` may be a header read with its
 * long arrays skipped (the model list's, ../model-inspect.ts): nothing here reads those.
 */
export function ggufModelLayout(gguf: GgufFile, file: string): Pick<GgufModel, 'config' | 'tensors'> {
  const where = path.basename(file);
  const meta = gguf.metadata;
  const arch = meta.get('general.architecture');
  if (typeof arch !== 'string') throw new UserError(`${file}: has no general.architecture`);
  const fam = FAMILIES[arch];
  if (!fam) throw new UserError(`${file}: architecture '${arch}' is not supported (supported: ${Object.keys(FAMILIES).join(', ')})`);

  // Ollama's first Gemma 3 files wrote some text-model keys under `gemma3.text.`.
  const get = (key: string) => meta.get(`${arch}.${key}`) ?? (arch === 'gemma3' ? meta.get(`${arch}.text.${key}`) : undefined);
  const num = (key: string, fallback?: number): number => {
    const v = get(key) ?? fallback;
    if (Array.isArray(v)) throw new UserError(`${file}: ${arch}.${key} differs between layers (${JSON.stringify(v.slice(0, 8))}…), which is not supported`);
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new UserError(`${file}: ${arch}.${key} must be a number, found ${v === undefined ? 'nothing' : JSON.stringify(String(v))}`);
    return v;
  };

  const byName = new Map<string, GgufTensorInfo>(gguf.tensors.map((t) => [t.name, t]));
  const embd = byName.get('token_embd.weight');
  if (!embd || embd.dims.length !== 2) throw new UserError(`${file}: missing tensor 'token_embd.weight'`);
  const hiddenSize = num('embedding_length');
  const numHeads = num('attention.head_count');
  const headDim = num('attention.key_length', hiddenSize / numHeads);
  const rotary = num('rope.dimension_count', headDim);
  // Only Phi-3's and GLM-4's converters write fewer rotated dimensions than a head has (partial_rotary_factor).
  if (rotary !== headDim && arch !== 'phi3' && arch !== 'glm4') throw new UserError(`${file}: partial RoPE (${arch}.rope.dimension_count ${rotary} of head size ${headDim}) is not supported`);
  if (!(Number.isInteger(rotary) && rotary > 0 && rotary <= headDim && rotary % 2 === 0)) throw new UserError(`${file}: ${arch}.rope.dimension_count ${rotary} must be an even number of dimensions, at most the head size ${headDim}`);
  if (num('attention.value_length', headDim) !== headDim) throw new UserError(`${file}: ${arch}.attention.value_length differs from key_length, which is not supported`);

  const idOf = (key: string): number | undefined => {
    const v = meta.get(`tokenizer.ggml.${key}`);
    return typeof v === 'number' ? v : undefined;
  };
  const eos = [idOf('eos_token_id'), idOf('eot_token_id'), idOf('eom_token_id')].filter((x): x is number => x !== undefined);
  const has = (suffix: string) => byName.has(`blk.0.${suffix}`);
  const config: ModelConfig = {
    family: fam.family,
    architecture: fam.architecture,
    vocabSize: embd.dims[1]!,
    hiddenSize,
    intermediateSize: num('feed_forward_length'),
    numLayers: num('block_count'),
    numHeads,
    numKvHeads: num('attention.head_count_kv', numHeads),
    headDim,
    rmsNormEps: num('attention.layer_norm_rms_epsilon', 1e-6),
    ropeTheta: num('rope.freq_base', get('rope.global.freq_base') as number ?? 10000),
    ropeScaling: ropeScaling(gguf, arch, file, byName, rotary, num('rope.freq_base', 10000)),
    tieWordEmbeddings: !byName.has('output.weight'),
    qkvBias: fam.family === 'qwen2' || has('attn_q.bias'),
    oBias: fam.family !== 'qwen2' && has('attn_output.bias'),
    mlpBias: has('ffn_up.bias'),
    qkNorm: fam.family === 'qwen3' || fam.family === 'gemma3',
    bosTokenId: idOf('bos_token_id'),
    eosTokenIds: [...new Set(eos)],
    maxPositionEmbeddings: num('context_length', 4096),
  };
  if (rotary !== headDim) config.rotaryDim = rotary;
  // Granite's converter writes each multiplier only where it is set (llama.cpp: 0 or absent is 1, and 1/√head_dim for attention).
  if (arch === 'granite') {
    const scale = (key: string, otherwise: number) => num(key, 0) || otherwise;
    config.multipliers = { embedding: scale('embedding_scale', 1), attention: scale('attention.scale', 1 / Math.sqrt(headDim)), residual: scale('residual_scale', 1), logits: scale('logit_scale', 1) };
  }
  const gemmaVersion = gemmaVersionOf(fam.family);
  if (gemmaVersion) {
    const { layout, sliding } = gemmaFromGguf(gemmaVersion, get, file, config);
    Object.assign(config, { gemma: layout, sandwichNorms: 'gemma', ...(sliding ? { sliding } : {}) });
  }
  if (arch === 'olmo2') {
    Object.assign(config, { qkNorm: true, qkNormWhole: true, postNorms: true });
    // OLMo 3 is llama.cpp's olmo2 with sliding layers (every 4th global; one base unless freq_base_swa says otherwise).
    const sliding = slidingFromGguf(get, file, config.numLayers, 4, config.ropeTheta);
    if (sliding) Object.assign(config, { architecture: 'Olmo3ForCausalLM', sliding });
  }
  if (arch === 'mistral3') {
    // llama.cpp: the temperature's floor is YaRN's original context (n_ctx_orig_yarn).
    const beta = num('attention.temperature_scale', 0), original = num('rope.scaling.original_context_length', 0);
    if (beta !== 0 && !(original > 0)) throw new UserError(`${file}: mistral3.attention.temperature_scale needs rope.scaling.original_context_length`);
    if (beta !== 0) config.queryTemperature = { beta, floorScale: original };
  }
  if (arch === 'glm4') {
    if (get('rope.dimension_sections') !== undefined) throw new UserError(`${file}: glm4.rope.dimension_sections (M-RoPE, GLM-4V's) is not supported`);
    Object.assign(config, { sandwichNorms: 'glm4', ropeInterleaved: true });
  }
  if (arch === 'smollm3') config.noRopeLayers = Array.from({ length: config.numLayers }, (_, i) => (i + 1) % 4 === 0); // llama.cpp: n_no_rope_layer_step 4
  if (arch === 'phi3') {
    // Capped as a folder's config.json is (ModelConfig's usedPositions): Phi-4 says 0 for no window.
    const original = config.ropeScaling?.type === 'longrope' ? num('rope.scaling.original_context_length', 0) : 0;
    config.maxPositionEmbeddings = usedPositions(config.maxPositionEmbeddings, { window: num('attention.sliding_window', 0), longRopeOriginal: original });
    const bias = gguf.tensors.find((t) => /^blk\.\d+\.(attn_qkv|ffn_up)\.bias$/.test(t.name));
    if (bias) throw new UserError(`${where}: tensor '${bias.name}': a bias on Phi-3's fused projections is not supported`);
  }
  if (!Number.isInteger(headDim) || headDim % 2) throw new UserError(`${file}: head size ${headDim} must be an even whole number`);
  if (numHeads % config.numKvHeads) throw new UserError(`${file}: ${arch}.attention.head_count ${numHeads} is not a multiple of head_count_kv ${config.numKvHeads}`);

  const tensors = new Map<string, GgufTensor>();
  for (const info of gguf.tensors) {
    if (isRopeTensor(info.name, arch) || isVisionTensor(info.name)) continue; // folded into ropeScaling; not the text model's
    const name = huggingFaceName(info.name, arch);
    if (!name) throw new UserError(`${where}: tensor '${info.name}' (${ggmlTypeName(info.type)}) is not part of a ${arch} model Hindsight can run`);
    const shape = [...info.dims].reverse();
    const m = /^blk\.\d+\.attn_([qk])\./.exec(info.name);
    // Llama's q/k rows were permuted for ggml's interleaved RoPE; Phi-3's are not (NeoX RoPE).
    const permuteHeads = ROPE_PERMUTED_ARCHITECTURES.has(arch) && m ? (m[1] === 'q' ? numHeads : config.numKvHeads) : undefined;
    const minusOne = config.gemma !== undefined && name.endsWith('norm.weight'); // Gemma's norms, stored as 1 + w
    tensors.set(name, { info, shape, ...(permuteHeads ? { permuteHeads } : {}), ...(minusOne ? { minusOne } : {}) });
  }
  // Phi-3's attn_qkv and ffn_up: each part its run of rows, which is a run of the tensor's bytes.
  splitFusedTensors(config, tensors, where, (t) => t.shape[0] ?? 0, (t, _name, start, rows) => ({
    info: { ...t.info, dims: [t.info.dims[0]!, rows], ...rowBytes(t.info.begin, t.info.end, t.shape[0]!, start, rows) },
    shape: [rows, t.shape[1]!],
  }));
  return { config, tensors };
}


/** What names a GGUF model's weights: its files' sizes and times. */
export function ggufIdentityFiles(model: GgufModel): string[] {
  return model.files.map((f) => {
    const st = fs.statSync(f);
    return `${path.basename(f)}:${st.size}:${st.mtimeMs}`;
  });
}
