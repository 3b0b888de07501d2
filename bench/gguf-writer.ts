/**
 * Writes a Hugging Face checkpoint folder (Llama, Qwen2, Qwen3, Phi-3 or Granite, as src-main/model reads
 * them) as a GGUF v3 file that llama.cpp loads, so the benches can run llama.cpp on the very
 * weights Hindsight runs (bench/llama-cpp.ts). Written here rather than through llama.cpp's
 * Python converter, which this machine does not have.
 *
 * The file: the magic `GGUF`, version 3, the tensor and key counts (u64), the metadata
 * key/value pairs, one info record per tensor (name, dims innermost first, ggml type, offset
 * into the data section), padding to `general.alignment` (32), then the tensors, each at an
 * aligned offset. Strings are a u64 length and UTF-8 bytes; every number is little-endian.
 *
 * - Metadata: the architecture's hyper-parameters under `<arch>.*` (llama, qwen2, qwen3 are
 *   llama.cpp's names too), and a GPT-2-style byte-level BPE tokenizer from tokenizer.json
 *   (`tokenizer.ggml.tokens / token_type / merges`, the pre-tokenizer's name, BOS/EOS). The
 *   token list is padded with `[PADn]` tokens up to config.json's vocab_size, as checkpoints
 *   pad their embedding.
 * - Tensors: HF names map to llama.cpp's (`model.layers.3.self_attn.q_proj.weight` →
 *   `blk.3.attn_q.weight`, …). Llama's q and k rows are permuted into the interleaved pair
 *   order of llama.cpp's Llama RoPE; Qwen models use the split-half RoPE as HF does, so their
 *   rows stay. A tied model writes no `output.weight`: llama.cpp then uses the embedding.
 * - Types (`f32`, `q8_0`, `q4_0`, ./gguf-quant.ts): the layers' seven projections take the
 *   chosen type; norms and biases stay f32; the embedding (and an untied LM head) take
 *   `embeddings`, by default what Hindsight's `--quantize` gives its LM head: f32 in an f32
 *   file, q8_0 in a quantised one (a tied model's one matrix is both lookup and head).
 * - Phi-3 (`Phi3ForCausalLM`) as convert_hf_to_gguf.py's Phi3MiniModel writes it: architecture
 *   `phi3`; q/k/v as one `attn_qkv` and gate/up as one `ffn_up` (the parts the Checkpoint cuts
 *   them into, concatenated again in row order), rows not permuted (llama.cpp runs phi3 with
 *   NeoX RoPE); `phi3.context_length` config.json's max_position_embeddings, with
 *   `rope.scaling.original_context_length`, `attention.sliding_window` (0 for none),
 *   `rope.dimension_count` the rotated dimensions (partial rotation), and for LongRoPE
 *   `rope.scaling.attn_factor` and the f32 tensors `rope_factors_long` / `rope_factors_short`;
 *   no key/value length (llama.cpp takes hidden / heads, so they must agree).
 * - Granite (`GraniteForCausalLM`): architecture `granite`, Llama's tensors (q/k permuted), and its
 *   multipliers as `embedding_scale`, `attention.scale`, `residual_scale`, `logit_scale`.
 * - OLMo 2 (`Olmo2ForCausalLM`): architecture `olmo2`, q/k not permuted, `post_attention_norm` and
 *   `post_ffw_norm` in place of the input and pre-MLP norms, `attn_q_norm`/`attn_k_norm` whole.
 * - Ministral 3 (`Ministral3ForCausalLM`): architecture `mistral3`, Llama's tensors (q/k permuted),
 *   YaRN with its log multiplier, the query temperature as `attention.temperature_scale` (its floor
 *   is YaRN's original context, as llama.cpp reads it).
 * - SmolLM3 (`SmolLM3ForCausalLM`): architecture `smollm3`, Llama's tensors (q/k permuted); its NoPE
 *   layers must be every 4th, which llama.cpp assumes (there is no key for them).
 * - Gemma 2 and 3 as the converter writes them: `gemma2`/`gemma3`, norms stored as 1 + w, four
 *   norms a layer (`attn_norm`, `post_attention_norm`, `ffn_norm` before the MLP, `post_ffw_norm`),
 *   the caps (`attn_logit_softcapping`, `final_logit_softcapping`; llama.cpp's gemma2 caps both
 *   always, so a Gemma 2 without them is not written); query_pre_attn_scalar must be the head size.
 * - GLM-4: `glm4`, q/k not permuted (ggml's plain RoPE turns adjacent pairs, as GLM does), half of
 *   each head rotated, q/k/v biases, gate and up as one `ffn_up`, the four norms as Gemma's.
 * - Sliding layers (Gemma 2 and 3, OLMo 3, written as `olmo2`): `attention.sliding_window`, the pattern as
 *   a count (`attention.sliding_window_pattern`; llama.cpp takes 6 for gemma3, 4 for olmo2 where
 *   absent) and `rope.freq_base_swa`. RoPE scaling: linear as `rope.scaling.type`/`factor`; yarn
 *   with `original_context_length`, `yarn_beta_fast`/`_slow` and `yarn_attn_factor`.
 *
 * The file is written under a temporary name and renamed, so a half-written file is never
 * taken for a finished one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Checkpoint, type ModelConfig } from '../src-main/model/hf-checkpoint.js';
import { OWN_MODEL_TYPES, SANDWICH_NORMS } from '../src-main/model/model-config.js';
import { ROPE_PERMUTED_ARCHITECTURES } from '../src-main/model/gguf/model.js';
import { PART_MODULES, fusedProjectionsOf } from '../src-main/model/fused-projections.js';
import { encode, encodedBytes, GGML_TYPE_ID, type GgmlType } from './gguf-quant.js';
import { Bytes, GgufValue, writeMeta, type Meta } from './gguf-bytes.js';

export { GgufValue };

export type GgufFileType = 'f32' | 'q8_0' | 'q4_0';

export interface GgufOptions {
  type: GgufFileType;
  /** The embedding's and LM head's type; default f32 for f32 files, else q8_0, as Hindsight's --quantize. */
  embeddings?: GgufFileType;
}

export const GGUF_ALIGNMENT = 32;
const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
/** general.file_type: LLAMA_FTYPE_ALL_F32, MOSTLY_Q8_0, MOSTLY_Q4_0. */
const FILE_TYPE: Record<GgufFileType, number> = { f32: 0, q8_0: 7, q4_0: 2 };


/** llama_token_type: how llama.cpp treats each vocabulary entry. */
const TOKEN_NORMAL = 1, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4, TOKEN_UNUSED = 5;

interface PlannedTensor {
  name: string;
  hfName: string;
  /** HF shape, outermost first; GGUF stores it reversed. */
  shape: number[];
  type: GgmlType;
  /** Rows to permute for llama.cpp's Llama RoPE (q and k of the llama family): the head count. */
  permuteHeads?: number;
  /** A fused tensor (Phi-3): the parts' HF names, concatenated in this order. */
  parts?: string[];
  /** A tensor that is no checkpoint weight (Phi-3's LongRoPE factors): its values. */
  values?: Float32Array;
  offset: number;
  bytes: number;
}

// ---- the tokenizer ---------------------------------------------------------------------------

interface TokenizerJson {
  added_tokens?: { id: number; content: string; special?: boolean }[];
  pre_tokenizer?: unknown;
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[] };
}

/** llama.cpp's name for the pre-tokenizer's split rule, recognised from tokenizer.json. */
function preTokenizerName(pre: unknown, file: string): string {
  const text = JSON.stringify(pre ?? null);
  if (text.includes('\\\\p{N}{1,3}')) return 'llama-bpe'; // Llama 3: digits in groups of up to three
  if (text.includes('"Split"') && text.includes('\\\\p{N}|')) return 'qwen2'; // Qwen2/2.5/3: one digit at a time
  const p = pre as { type?: string; use_regex?: boolean } | null;
  if (p?.type === 'ByteLevel' && p.use_regex !== false) return 'gpt-2';
  throw new Error(`${file}: pre-tokenizer ${text.slice(0, 120)}… is not one this writer knows (Llama 3, Qwen2, GPT-2 byte level)`);
}

function tokenizerMeta(dir: string, config: ModelConfig): [string, Meta][] {
  const file = path.join(dir, 'tokenizer.json');
  const tok = JSON.parse(fs.readFileSync(file, 'utf8')) as TokenizerJson;
  if (tok.model.type !== 'BPE') throw new Error(`${file}: a ${tok.model.type} tokenizer; this writer handles byte-level BPE only`);
  const tokens: string[] = new Array(config.vocabSize);
  const types = new Int32Array(config.vocabSize);
  const place = (id: number, text: string, type: number) => {
    if (id >= config.vocabSize) throw new Error(`${file}: token id ${id} ('${text}') is past config.json's vocab_size ${config.vocabSize}`);
    tokens[id] = text;
    types[id] = type;
  };
  for (const [text, id] of Object.entries(tok.model.vocab)) place(id, text, TOKEN_NORMAL);
  for (const a of tok.added_tokens ?? []) place(a.id, a.content, a.special ? TOKEN_CONTROL : TOKEN_USER_DEFINED);
  for (let id = 0; id < config.vocabSize; id++) if (tokens[id] === undefined) place(id, `[PAD${id}]`, TOKEN_UNUSED);
  const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  const tokenizerConfig = readJsonIfAny(path.join(dir, 'tokenizer_config.json'));
  const generation = readJsonIfAny(path.join(dir, 'generation_config.json'));
  const genEos = generation.eos_token_id;
  const eos = config.eosTokenIds[0] ?? (Array.isArray(genEos) ? genEos[0] : genEos);
  const padText = typeof tokenizerConfig.pad_token === 'string' ? tokenizerConfig.pad_token : undefined;
  const padId = padText !== undefined ? tokens.indexOf(padText) : -1;
  const meta: [string, Meta][] = [
    ['tokenizer.ggml.model', { kind: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { kind: 'string', value: preTokenizerName(tok.pre_tokenizer, file) }],
    ['tokenizer.ggml.tokens', { kind: 'strings', value: tokens }],
    ['tokenizer.ggml.token_type', { kind: 'i32s', value: types }],
    ['tokenizer.ggml.merges', { kind: 'strings', value: merges }],
    ['tokenizer.ggml.add_bos_token', { kind: 'bool', value: tokenizerConfig.add_bos_token === true }],
  ];
  if (config.bosTokenId !== undefined) meta.push(['tokenizer.ggml.bos_token_id', { kind: 'u32', value: config.bosTokenId }]);
  if (typeof eos === 'number') meta.push(['tokenizer.ggml.eos_token_id', { kind: 'u32', value: eos }]);
  if (padId >= 0) meta.push(['tokenizer.ggml.padding_token_id', { kind: 'u32', value: padId }]);
  return meta;
}

function readJsonIfAny(file: string): Record<string, unknown> {
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
}

// ---- metadata and tensors ----------------------------------------------------------------------

/** llama.cpp's architecture for a checkpoint: its family's name, or its own (phi3, granite). */
const ggufArch = (c: ModelConfig): string => OWN_MODEL_TYPES[c.architecture] ?? c.family;

/** What a Phi-3 GGUF takes from config.json as it is, not as Hindsight caps it. */
interface Phi3Raw {
  positions: number;
  original: number;
  window: number;
  longFactor?: number[];
}

function phi3Raw(dir: string): Phi3Raw {
  const raw = readJsonIfAny(path.join(dir, 'config.json'));
  const rope = (raw.rope_parameters ?? raw.rope_scaling ?? {}) as Record<string, unknown>;
  const positions = Number(raw.max_position_embeddings);
  const original = Number(rope.original_max_position_embeddings ?? raw.original_max_position_embeddings ?? positions);
  const window = typeof raw.sliding_window === 'number' ? raw.sliding_window : 0;
  return { positions, original, window, ...(Array.isArray(rope.long_factor) ? { longFactor: rope.long_factor as number[] } : {}) };
}

function modelMeta(config: ModelConfig, name: string, type: GgufFileType, phi3?: Phi3Raw): [string, Meta][] {
  const s = config.ropeScaling;
  if (s && s.type !== 'linear' && s.type !== 'yarn' && !(phi3 && s.type === 'longrope')) throw new Error(`rope_scaling ${s.type} is not written by this GGUF writer (linear, yarn and Phi-3's LongRoPE are)`);
  if (config.gemma && Math.abs(config.gemma.attentionScale * Math.sqrt(config.headDim) - 1) > 1e-6) throw new Error("llama.cpp scales Gemma's attention by 1/√head size: query_pre_attn_scalar must be the head size");
  if (config.family === 'gemma2' && !(config.gemma?.attentionSoftcap && config.gemma.finalSoftcap)) throw new Error("llama.cpp's gemma2 caps attention and logits always: a Gemma 2 without both caps is not written");
  if (config.rotaryDim !== undefined && !phi3 && config.architecture !== 'Glm4ForCausalLM') throw new Error('a partial rotation is written for Phi-3 and GLM-4 only (llama.cpp rotates whole heads elsewhere)');
  if (config.noRopeLayers?.some((skips, i) => skips !== ((i + 1) % 4 === 0))) throw new Error("llama.cpp's smollm3 skips RoPE on every 4th layer: other NoPE layers are not written");
  if (phi3 && config.numHeads * config.headDim !== config.hiddenSize) throw new Error(`llama.cpp's phi3 takes head_dim as hidden_size / heads: ${config.numHeads} × ${config.headDim} ≠ ${config.hiddenSize}`);
  const arch = ggufArch(config);
  const u32 = (value: number): Meta => ({ kind: 'u32', value });
  const heads: [string, Meta][] = phi3 ? [] : [[`${arch}.attention.key_length`, u32(config.headDim)], [`${arch}.attention.value_length`, u32(config.headDim)]];
  const phi3Keys: [string, Meta][] = !phi3 ? [] : [
    [`${arch}.rope.scaling.original_context_length`, u32(phi3.original)],
    [`${arch}.attention.sliding_window`, u32(phi3.window)],
    ...(s?.type === 'longrope' ? [[`${arch}.rope.scaling.attn_factor`, { kind: 'f32', value: s.attentionFactor }] as [string, Meta]] : []),
  ];
  return [
    ['general.architecture', { kind: 'string', value: arch }],
    ['general.name', { kind: 'string', value: name }],
    ['general.alignment', u32(GGUF_ALIGNMENT)],
    ['general.file_type', u32(FILE_TYPE[type])],
    [`${arch}.context_length`, u32(phi3 ? phi3.positions : config.maxPositionEmbeddings)],
    [`${arch}.embedding_length`, u32(config.hiddenSize)],
    [`${arch}.block_count`, u32(config.numLayers)],
    [`${arch}.feed_forward_length`, u32(config.intermediateSize)],
    [`${arch}.attention.head_count`, u32(config.numHeads)],
    [`${arch}.attention.head_count_kv`, u32(config.numKvHeads)],
    ...heads,
    [`${arch}.attention.layer_norm_rms_epsilon`, { kind: 'f32', value: config.rmsNormEps }],
    [`${arch}.rope.freq_base`, { kind: 'f32', value: config.ropeTheta }],
    [`${arch}.rope.dimension_count`, u32(config.rotaryDim ?? config.headDim)],
    [`${arch}.vocab_size`, u32(config.vocabSize)],
    ...phi3Keys,
    ...slidingMeta(config, arch),
    ...ropeScalingMeta(config, arch),
    ...(config.gemma?.attentionSoftcap ? [[`${arch}.attn_logit_softcapping`, { kind: 'f32', value: config.gemma.attentionSoftcap }] as [string, Meta]] : []),
    ...(config.gemma?.finalSoftcap ? [[`${arch}.final_logit_softcapping`, { kind: 'f32', value: config.gemma.finalSoftcap }] as [string, Meta]] : []),
    ...(config.queryTemperature ? [[`${arch}.attention.temperature_scale`, { kind: 'f32', value: config.queryTemperature.beta }] as [string, Meta]] : []),
    // Granite's multipliers, under the names its converter gives them.
    ...(config.multipliers ? ([
      [`${arch}.embedding_scale`, { kind: 'f32', value: config.multipliers.embedding }], [`${arch}.attention.scale`, { kind: 'f32', value: config.multipliers.attention }],
      [`${arch}.residual_scale`, { kind: 'f32', value: config.multipliers.residual }], [`${arch}.logit_scale`, { kind: 'f32', value: config.multipliers.logits }],
    ] as [string, Meta][]) : []),
  ];
}

/** Sliding layers' keys (Gemma 2 and 3, OLMo 3): the window, the pattern as a count (every released model's is one), their base. */
function slidingMeta(config: ModelConfig, arch: string): [string, Meta][] {
  const sw = config.sliding;
  if (!sw) return [];
  const pattern = sw.layers.findIndex((slides) => !slides) + 1;
  if (!pattern || sw.layers.some((slides, i) => slides !== (i % pattern < pattern - 1))) throw new Error('sliding layers that do not follow a count pattern are not written');
  return [
    [`${arch}.attention.sliding_window`, { kind: 'u32', value: sw.window }],
    [`${arch}.attention.sliding_window_pattern`, { kind: 'u32', value: pattern }],
    [`${arch}.rope.freq_base_swa`, { kind: 'f32', value: sw.ropeTheta }],
  ];
}

/** Linear and YaRN scaling as the converter writes them (TextModel.set_gguf_parameters). */
function ropeScalingMeta(config: ModelConfig, arch: string): [string, Meta][] {
  const s = config.ropeScaling;
  const f32 = (key: string, value: number): [string, Meta] => [`${arch}.rope.scaling.${key}`, { kind: 'f32', value }];
  if (s?.type === 'linear') return [[`${arch}.rope.scaling.type`, { kind: 'string', value: 'linear' }], f32('factor', s.factor)];
  if (s?.type !== 'yarn') return [];
  // An attention factor other than llama.cpp's own, 0.1·ln(factor) + 1, goes as the log multiplier m that
  // makes it (that over 0.1·m·ln(factor) + 1): Ministral 3's mscale_all_dim.
  const own = 0.1 * Math.log(s.factor) + 1;
  const logMul = Math.abs(s.attentionFactor - own) < 1e-6 ? [] : [f32('yarn_log_multiplier', (own / s.attentionFactor - 1) / (0.1 * Math.log(s.factor)))];
  return [
    [`${arch}.rope.scaling.type`, { kind: 'string', value: 'yarn' }], f32('factor', s.factor),
    [`${arch}.rope.scaling.original_context_length`, { kind: 'u32', value: s.originalMaxPositionEmbeddings }],
    f32('yarn_beta_fast', s.betaFast), f32('yarn_beta_slow', s.betaSlow), f32('yarn_attn_factor', s.attentionFactor), ...logMul,
  ];
}

/**
 * A layer's norms as llama.cpp names them ([gguf, Hugging Face]): those written before its projections
 * (the input norm) and after them, where the converter puts them. Gemma has four, OLMo 2 two after
 * its branches only, every other family an input norm and a norm before the MLP.
 */
function layerNorms(c: ModelConfig): { before: [string, string][]; after: [string, string][] } {
  const post: [string, string][] = [['post_attention_norm', 'post_attention_layernorm'], ['post_ffw_norm', 'post_feedforward_layernorm']];
  if (c.postNorms) return { before: [], after: post };
  if (c.sandwichNorms) {
    const n = SANDWICH_NORMS[c.sandwichNorms];
    return { before: [['attn_norm', 'input_layernorm']], after: [['post_attention_norm', n.afterAttention], ['ffn_norm', n.beforeMlp], ['post_ffw_norm', n.afterMlp]] };
  }
  return { before: [['attn_norm', 'input_layernorm']], after: [['ffn_norm', 'post_attention_layernorm']] };
}

const PROJECTIONS: [string, string][] = [
  ['self_attn.q_proj', 'attn_q'], ['self_attn.k_proj', 'attn_k'], ['self_attn.v_proj', 'attn_v'], ['self_attn.o_proj', 'attn_output'],
  ['mlp.gate_proj', 'ffn_gate'], ['mlp.up_proj', 'ffn_up'], ['mlp.down_proj', 'ffn_down'],
];

/** Every tensor to write, in file order, with its type; offsets are filled in later. */
function planTensors(ckpt: Checkpoint, options: GgufOptions, phi3?: Phi3Raw): PlannedTensor[] {
  const c = ckpt.config;
  const out: PlannedTensor[] = [];
  const add = (name: string, hfName: string, type: GgmlType, permuteHeads?: number) => {
    const shape = ckpt.entry(hfName).shape;
    out.push({ name, hfName, shape, type, permuteHeads, offset: 0, bytes: 0 });
  };
  const s = c.ropeScaling;
  if (phi3 && s?.type === 'longrope') {
    // The converter writes both sets (llama.cpp takes the long ones past the original context).
    const values = (v: number[]) => ({ hfName: '', shape: [v.length], type: 'f32' as const, values: Float32Array.from(v), offset: 0, bytes: 0 });
    out.push({ name: 'rope_factors_long.weight', ...values(phi3.longFactor ?? s.shortFactor) });
    out.push({ name: 'rope_factors_short.weight', ...values(s.shortFactor) });
  }
  const embeddingType: GgmlType = options.embeddings ?? (options.type === 'f32' ? 'f32' : 'q8_0');
  add('token_embd.weight', 'model.embed_tokens.weight', embeddingType);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    const norms = layerNorms(c);
    for (const [gguf, hf] of norms.before) add(`blk.${i}.${gguf}.weight`, `${p}.${hf}.weight`, 'f32');
    for (const [hf, gguf] of PROJECTIONS) {
      const fused = fusedProjectionsOf(c).find((f) => f.parts.some((t) => PART_MODULES[t] === hf));
      if (fused) {
        // Phi-3, GLM-4: the fused tensor where its first part would be, its parts' rows in order.
        if (ckpt.has(`${p}.${hf}.bias`)) throw new Error(`${p}.${hf}.bias: a bias on a fused projection is not written`);
        if (PART_MODULES[fused.parts[0]!] !== hf) continue;
        const parts = fused.parts.map((t) => `${p}.${PART_MODULES[t]}.weight`);
        const shapes = parts.map((n) => ckpt.entry(n).shape);
        out.push({ name: `blk.${i}.${fused.gguf}.weight`, hfName: parts[0]!, parts, shape: [shapes.reduce((n, sh) => n + sh[0]!, 0), shapes[0]![1]!], type: options.type, offset: 0, bytes: 0 });
        continue;
      }
      const heads = ROPE_PERMUTED_ARCHITECTURES.has(ggufArch(c)) ? { attn_q: c.numHeads, attn_k: c.numKvHeads }[gguf] : undefined;
      add(`blk.${i}.${gguf}.weight`, `${p}.${hf}.weight`, options.type, heads);
      if (ckpt.has(`${p}.${hf}.bias`)) {
        if (heads) throw new Error(`${p}.${hf}.bias: a Llama q/k bias would need the RoPE permutation too; not written`);
        add(`blk.${i}.${gguf}.bias`, `${p}.${hf}.bias`, 'f32');
      }
    }
    if (c.qkNorm) {
      add(`blk.${i}.attn_q_norm.weight`, `${p}.self_attn.q_norm.weight`, 'f32');
      add(`blk.${i}.attn_k_norm.weight`, `${p}.self_attn.k_norm.weight`, 'f32');
    }
    for (const [gguf, hf] of norms.after) add(`blk.${i}.${gguf}.weight`, `${p}.${hf}.weight`, 'f32');
  }
  add('output_norm.weight', 'model.norm.weight', 'f32');
  if (!c.tieWordEmbeddings && ckpt.has('lm_head.weight')) add('output.weight', 'lm_head.weight', embeddingType);
  let offset = 0;
  for (const t of out) {
    t.offset = offset;
    t.bytes = encodedBytes(t.type, t.shape.reduce((a, d) => a * d, 1));
    offset = align(offset + t.bytes, GGUF_ALIGNMENT);
  }
  return out;
}

const align = (n: number, a: number) => Math.ceil(n / a) * a;

/** HF's split-half q/k rows → llama.cpp's interleaved pairs: row h·d + j·d/2 + i goes to h·d + 2i + j. */
export function permuteForLlamaRope(w: Float32Array, heads: number, cols: number): Float32Array {
  const rows = w.length / cols;
  const d = rows / heads;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < 2; j++) {
      for (let i = 0; i < d / 2; i++) {
        const from = (h * d + j * (d / 2) + i) * cols;
        out.set(w.subarray(from, from + cols), (h * d + 2 * i + j) * cols);
      }
    }
  }
  return out;
}

function concatenated(arrays: Float32Array[]): Float32Array {
  const out = new Float32Array(arrays.reduce((n, a) => n + a.length, 0));
  arrays.reduce((at, a) => (out.set(a, at), at + a.length), 0);
  return out;
}

/** Writes `modelDir` as a GGUF file at `outFile`; returns its size and tensor count. */
export function writeGguf(modelDir: string, outFile: string, options: GgufOptions): { bytes: number; tensors: number } {
  const ckpt = Checkpoint.open(modelDir);
  const phi3 = ggufArch(ckpt.config) === 'phi3' ? phi3Raw(modelDir) : undefined;
  const tensors = planTensors(ckpt, options, phi3);
  const meta = [...modelMeta(ckpt.config, path.basename(path.resolve(modelDir)), options.type, phi3), ...tokenizerMeta(modelDir, ckpt.config)];
  const head = new Bytes();
  head.u32(GGUF_MAGIC);
  head.u32(3);
  head.u64(tensors.length);
  head.u64(meta.length);
  for (const [key, m] of meta) writeMeta(head, key, m);
  for (const t of tensors) {
    head.string(t.name);
    head.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) head.u64(d);
    head.u32(GGML_TYPE_ID[t.type]);
    head.u64(t.offset);
  }
  head.pad(GGUF_ALIGNMENT);
  const header = head.done();
  const tmp = `${outFile}.${process.pid}.tmp`;
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  const fd = fs.openSync(tmp, 'w');
  let end = header.length;
  try {
    fs.writeSync(fd, header, 0, header.length, 0);
    for (const t of tensors) {
      let values = t.values ?? (t.parts ? concatenated(t.parts.map((n) => ckpt.readFloat32(n, ckpt.entry(n).shape))) : ckpt.readFloat32(t.hfName, t.shape));
      if (t.permuteHeads) values = permuteForLlamaRope(values, t.permuteHeads, t.shape[1]!);
      if (ckpt.config.gemma && t.name.endsWith('norm.weight')) values = values.map((v) => v + 1); // Gemma's converter stores 1 + w
      // f32 goes out as it is read (its encoding is a view): no second copy of a large embedding.
      const bytes = encode(t.type, values);
      fs.writeSync(fd, bytes, 0, bytes.length, header.length + t.offset);
      end = header.length + t.offset + bytes.length;
    }
    const padded = align(end, GGUF_ALIGNMENT);
    if (padded > end) fs.writeSync(fd, Buffer.alloc(padded - end), 0, padded - end, end);
    end = padded;
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, outFile);
  return { bytes: end, tensors: tensors.length };
}
