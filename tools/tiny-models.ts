/**
 * Tiny random checkpoints in Hugging Face layout, for tests of the model core and the
 * trainer: `config.json`, `model.safetensors` (or shards with `model.safetensors.index.json`),
 * `tokenizer.json` (a real byte-level BPE with ChatML and think/tool special tokens),
 * `tokenizer_config.json` with a ChatML chat template, and `generation_config.json`.
 *
 * Everything is deterministic in `seed`: the same options write byte-identical files.
 *
 *     const dir = writeTinyModel(tmpDir, { family: 'qwen3', tie: true, dtype: 'BF16' });
 */
import fs from 'node:fs';
import path from 'node:path';
import { fp16ToFloat32, float32ToFp16 } from '../src-main/model/half.js';
import { float32ToBf16, writeSafetensors, type TensorToWrite } from '../src-main/model/safetensors.js';
import { seededRandom } from '../src-main/model/sampling.js';

/**
 * phi3: Llama's layers with q/k/v and gate/up stored fused (qkv_proj, gate_up_proj), as Phi-3
 * checkpoints have them, with Phi-3.5's LongRoPE (maxPositions its original context, twice that
 * its extended one) and Phi-4-mini's partial rotation (half of each head here). granite: Llama's
 * layers with Granite's four multipliers, none of them 1. gemma3: Gemma 3's layers (four norms, q/k
 * norms, GELU), a sliding first layer with a 4-position window and a global last one with linear RoPE
 * scaling, in transformers 4.5x's config form (rope_local_base_freq, sliding_window_pattern); its
 * norm weights are drawn around 0, as Gemma stores w for a scale of 1 + w. smollm3: Llama's layers,
 * every 4th without RoPE (config.json's no_rope_layer_interval, left to its default). olmo2: norms
 * after attention and the MLP and none before, q and k normed across the whole projection. olmo3:
 * olmo2's layers, every 4th global with YaRN (×4 over an original 16 positions), the others sliding
 * over 4, in transformers 4.5x's config form. ministral3: Llama's layers with YaRN (×4 over an
 * original 8 positions, its mscale ratio 1) and the query temperature from position 8 on.
 * glm4: GLM-4's layers (q/k/v biases, half of each head turned by RoPE over adjacent pairs, gate and
 * up in one gate_up_proj, norms after attention and the MLP as well as before).
 * gemma2: Gemma 3's layers without q/k norms, every other layer sliding over 4 positions, one
 * RoPE base, and caps low enough to bend these small weights' values (attention 1, logits 2,
 * where Gemma 2 has 50 and 30), in transformers 4.5x's config form.
 */
export type TinyFamily = 'llama' | 'qwen2' | 'qwen3' | 'phi3' | 'granite' | 'gemma2' | 'gemma3' | 'glm4' | 'smollm3' | 'olmo2' | 'olmo3' | 'ministral3';

export interface TinyModelOptions {
  family: TinyFamily;
  /** tie_word_embeddings (no lm_head.weight written). */
  tie?: boolean;
  dtype?: 'F32' | 'BF16' | 'F16';
  /** Split the weights over this many shards with an index file. */
  shards?: number;
  seed?: number;
  hiddenSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  /** Deliberately ≠ hiddenSize / numHeads by default, to exercise that path. */
  headDim?: number;
  intermediateSize?: number;
  /** Standard deviation of the random weights. */
  std?: number;
  /** Model vocabulary (≥ the tokenizer's); default: the tokenizer's size + 3. */
  vocabSize?: number;
  /** config.json's max_position_embeddings; default 512. */
  maxPositions?: number;
  /** gemma2, gemma3: query_pre_attn_scalar; default 1.5 × headDim (llama.cpp takes the head size: a GGUF's model sets that). */
  queryPreAttnScalar?: number;
}

export interface TinyModel {
  dir: string;
  config: Record<string, unknown>;
  /** fp32 values of every tensor as written (after bf16 rounding where used). */
  weights: Map<string, { shape: number[]; data: Float32Array }>;
}

// The generator the app samples with; re-exported for the trainer tests that seed their inputs from here.
export { seededRandom };

function gaussian(rand: () => number): number {
  const u = Math.max(rand(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
}

// ---- tokenizer ---------------------------------------------------------------------------

export const TINY_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tool_call>', '</tool_call>'];

export const TINY_CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** GPT-2's reversible byte → printable-character map used by byte-level BPE. */
function bytesToUnicode(): string[] {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCharCode(printable(b) ? b : 256 + extra++));
  return out;
}

/** Common English pieces; each merge's result joins the vocabulary. */
const MERGES: [string, string][] = [
  ['Ġ', 't'], ['h', 'e'], ['Ġt', 'he'], ['i', 'n'], ['a', 'n'], ['e', 'r'], ['o', 'n'], ['Ġ', 'a'],
  ['r', 'e'], ['Ġ', 's'], ['Ġ', 'w'], ['o', 'u'], ['i', 's'], ['Ġ', 'o'], ['e', 'd'], ['in', 'g'],
  ['Ġ', 'b'], ['Ġ', 'c'], ['Ġ', 'h'], ['l', 'l'], ['Ġ', 'i'], ['a', 't'], ['o', 'r'], ['Ġa', 'n'],
];

/** A byte-level BPE tokenizer.json: 256 bytes + merges + special tokens. */
export function tinyTokenizerJson(): { json: Record<string, unknown>; size: number } {
  const vocab: Record<string, number> = {};
  for (const ch of bytesToUnicode()) vocab[ch] = Object.keys(vocab).length;
  for (const [a, b] of MERGES) vocab[a + b] ??= Object.keys(vocab).length;
  const base = Object.keys(vocab).length;
  // As in Qwen: the ChatML markers are special (skipped when decoding), think and tool-call tags are not.
  const added = TINY_SPECIAL_TOKENS.map((content, i) => ({
    id: base + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: content.startsWith('<|'),
  }));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: MERGES.map(([a, b]) => `${a} ${b}`),
    },
  };
  return { json, size: base + added.length };
}

// ---- weights -----------------------------------------------------------------------------

function tensorShapes(c: Required<Omit<TinyModelOptions, 'shards' | 'seed' | 'dtype' | 'std' | 'vocabSize' | 'maxPositions' | 'queryPreAttnScalar'>> & { vocabSize: number }): [string, number[]][] {
  const { hiddenSize: H, numHeads, numKvHeads, headDim: d, intermediateSize: I, vocabSize: V } = c;
  const out: [string, number[]][] = [['model.embed_tokens.weight', [V, H]]];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    const olmo = c.family === 'olmo2' || c.family === 'olmo3';
    if (!olmo) out.push([`${p}.input_layernorm.weight`, [H]]);
    if (c.family === 'phi3') out.push([`${p}.self_attn.qkv_proj.weight`, [(numHeads + 2 * numKvHeads) * d, H]]);
    else {
      out.push([`${p}.self_attn.q_proj.weight`, [numHeads * d, H]]);
      out.push([`${p}.self_attn.k_proj.weight`, [numKvHeads * d, H]]);
      out.push([`${p}.self_attn.v_proj.weight`, [numKvHeads * d, H]]);
    }
    if (c.family === 'qwen2' || c.family === 'glm4') {
      out.push([`${p}.self_attn.q_proj.bias`, [numHeads * d]]);
      out.push([`${p}.self_attn.k_proj.bias`, [numKvHeads * d]]);
      out.push([`${p}.self_attn.v_proj.bias`, [numKvHeads * d]]);
    }
    if (c.family === 'qwen3' || c.family === 'gemma3') {
      out.push([`${p}.self_attn.q_norm.weight`, [d]]);
      out.push([`${p}.self_attn.k_norm.weight`, [d]]);
    }
    if (olmo) out.push([`${p}.self_attn.q_norm.weight`, [numHeads * d]], [`${p}.self_attn.k_norm.weight`, [numKvHeads * d]]);
    out.push([`${p}.self_attn.o_proj.weight`, [H, numHeads * d]]);
    if (c.family === 'glm4') out.push([`${p}.post_self_attn_layernorm.weight`, [H]], [`${p}.post_mlp_layernorm.weight`, [H]]);
    out.push([`${p}.post_attention_layernorm.weight`, [H]]);
    const gemma = c.family === 'gemma2' || c.family === 'gemma3';
    if (gemma) out.push([`${p}.pre_feedforward_layernorm.weight`, [H]]);
    if (gemma || olmo) out.push([`${p}.post_feedforward_layernorm.weight`, [H]]);
    if (c.family === 'phi3' || c.family === 'glm4') out.push([`${p}.mlp.gate_up_proj.weight`, [2 * I, H]]);
    else {
      out.push([`${p}.mlp.gate_proj.weight`, [I, H]]);
      out.push([`${p}.mlp.up_proj.weight`, [I, H]]);
    }
    out.push([`${p}.mlp.down_proj.weight`, [H, I]]);
  }
  out.push(['model.norm.weight', [H]]);
  if (!c.tie) out.push(['lm_head.weight', [V, H]]);
  return out;
}

const ARCH: Record<TinyFamily, string> = { llama: 'LlamaForCausalLM', qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM', phi3: 'Phi3ForCausalLM', granite: 'GraniteForCausalLM', glm4: 'Glm4ForCausalLM', gemma2: 'Gemma2ForCausalLM', gemma3: 'Gemma3ForCausalLM', smollm3: 'SmolLM3ForCausalLM', olmo2: 'Olmo2ForCausalLM', olmo3: 'Olmo3ForCausalLM', ministral3: 'Ministral3ForCausalLM' };

/** Gemma 3's own fields: the first layer slides (all but the last, with the pattern at the layer count). */
function gemma3Fields(numLayers: number, queryPreAttnScalar: number): Record<string, unknown> {
  return {
    model_type: 'gemma3_text', hidden_activation: 'gelu_pytorch_tanh', sliding_window: 4, sliding_window_pattern: numLayers,
    query_pre_attn_scalar: queryPreAttnScalar, rope_local_base_freq: 10000, rope_scaling: { rope_type: 'linear', factor: 8 },
    attn_logit_softcapping: null, final_logit_softcapping: null,
  };
}

/** Gemma 2's own fields: every other layer sliding (its default pattern), caps that bend the tiny model's scores and logits. */
function gemma2Fields(queryPreAttnScalar: number): Record<string, unknown> {
  return {
    model_type: 'gemma2', hidden_activation: 'gelu_pytorch_tanh', sliding_window: 4, query_pre_attn_scalar: queryPreAttnScalar,
    rope_theta: 10000, attn_logit_softcapping: 1, final_logit_softcapping: 2,
  };
}

function phi3Rope(headDim: number, positions: number): Record<string, unknown> {
  const factors = Array.from({ length: headDim / 4 }, (_, i) => 1 + 0.5 * i);
  return {
    partial_rotary_factor: 0.5,
    rope_scaling: { type: 'longrope', short_factor: factors, long_factor: factors.map((f) => 4 * f) },
    original_max_position_embeddings: positions,
    max_position_embeddings: 2 * positions,
    sliding_window: 2 * positions - 1,
  };
}

/** Writes a tiny random checkpoint into `dir` (created) and returns it with its fp32 weights. */
export function writeTinyModel(dir: string, options: TinyModelOptions): TinyModel {
  const o = {
    tie: false, dtype: 'F32' as const, shards: 1, seed: 1, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2,
    headDim: 16, intermediateSize: 48, std: 0.15, maxPositions: 512, ...options,
  };
  fs.mkdirSync(dir, { recursive: true });
  const tok = tinyTokenizerJson();
  const vocabSize = Math.max(options.vocabSize ?? 0, tok.size + 3); // a few unused rows, as real checkpoints pad the vocabulary
  const imEnd = tok.size - TINY_SPECIAL_TOKENS.length + TINY_SPECIAL_TOKENS.indexOf('<|im_end|>');
  const endOfText = tok.size - TINY_SPECIAL_TOKENS.length;
  const config: Record<string, unknown> = {
    architectures: [ARCH[o.family]],
    model_type: o.family,
    hidden_size: o.hiddenSize,
    intermediate_size: o.intermediateSize,
    num_hidden_layers: o.numLayers,
    num_attention_heads: o.numHeads,
    num_key_value_heads: o.numKvHeads,
    head_dim: o.headDim,
    hidden_act: 'silu',
    max_position_embeddings: o.maxPositions,
    rms_norm_eps: 1e-6,
    rope_theta: o.family === 'llama' ? 10000 : 1000000,
    rope_scaling: null,
    tie_word_embeddings: o.tie,
    vocab_size: vocabSize,
    bos_token_id: endOfText,
    eos_token_id: imEnd,
    torch_dtype: { F32: 'float32', BF16: 'bfloat16', F16: 'float16' }[o.dtype],
    ...(o.family === 'llama' || o.family === 'phi3' || o.family === 'granite' || o.family === 'smollm3' || o.family === 'olmo2' || o.family === 'olmo3' || o.family === 'ministral3' ? { attention_bias: false, mlp_bias: false } : {}),
    ...(o.family === 'ministral3' ? {
      rope_parameters: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 8, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1, llama_4_scaling_beta: 0.1, rope_theta: 1000000 },
    } : {}),
    ...(o.family === 'olmo3' ? { sliding_window: 4, rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 16, beta_fast: 32, beta_slow: 1 } } : {}),
    ...(o.family === 'granite' ? { embedding_multiplier: 6, attention_multiplier: 0.2, residual_multiplier: 0.4, logits_scaling: 3 } : {}),
    ...(o.family === 'qwen2' ? { use_sliding_window: false } : {}),
    ...(o.family === 'glm4' ? { attention_bias: true, partial_rotary_factor: 0.5, rope_theta: 10000 } : {}),
    ...(o.family === 'phi3' ? phi3Rope(o.headDim, o.maxPositions) : {}),
    ...(o.family === 'gemma3' ? gemma3Fields(o.numLayers, o.queryPreAttnScalar ?? 1.5 * o.headDim) : {}),
    ...(o.family === 'gemma2' ? gemma2Fields(o.queryPreAttnScalar ?? 1.5 * o.headDim) : {}),
  };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [imEnd, endOfText] }));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tok.json));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template: TINY_CHAT_TEMPLATE,
    tokenizer_class: 'PreTrainedTokenizerFast',
  }));

  const rand = seededRandom(o.seed);
  const weights = new Map<string, { shape: number[]; data: Float32Array }>();
  const files: Record<string, TensorToWrite>[] = Array.from({ length: o.shards }, () => ({}));
  const shapes = tensorShapes({ ...o, vocabSize });
  shapes.forEach(([name, shape], k) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const isNorm = name.endsWith('norm.weight');
    let data: Float32Array = Float32Array.from({ length: n }, () => (isNorm && o.family !== 'gemma2' && o.family !== 'gemma3' ? 1 : 0) + o.std * gaussian(rand));
    let stored: TensorToWrite = { dtype: 'F32', shape, data };
    if (o.dtype === 'BF16') {
      const bits = float32ToBf16(data);
      stored = { dtype: 'BF16', shape, data: bits };
      data = new Float32Array(Uint32Array.from(bits, (b) => b << 16).buffer);
    } else if (o.dtype === 'F16') {
      const bits = float32ToFp16(data);
      stored = { dtype: 'F16', shape, data: bits };
      data = fp16ToFloat32(bits);
    }
    weights.set(name, { shape, data });
    files[Math.floor((k * o.shards) / shapes.length)]![name] = stored;
  });
  if (o.shards === 1) {
    writeSafetensors(path.join(dir, 'model.safetensors'), files[0]!, { format: 'pt' });
  } else {
    const weightMap: Record<string, string> = {};
    files.forEach((tensors, i) => {
      const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(o.shards).padStart(5, '0')}.safetensors`;
      writeSafetensors(path.join(dir, file), tensors, { format: 'pt' });
      for (const name of Object.keys(tensors)) weightMap[name] = file;
    });
    fs.writeFileSync(path.join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }, null, 2));
  }
  return { dir, config, weights };
}

/**
 * LoRA weights with a small nonzero B (initLora's B is 0), so both factors get gradients from the
 * first step: A uniform in ±1/√in as initLora draws it, B uniform in ±bStd. The step tests and
 * bench:step-placement share it.
 */
export function randomLora(
  specs: readonly { module: string; inFeatures: number; outFeatures: number }[], r: number, seed: number, bStd = 0.3,
): Map<string, Float32Array> {
  const rand = seededRandom(seed);
  const w = new Map<string, Float32Array>();
  for (const s of specs) {
    const bound = 1 / Math.sqrt(s.inFeatures);
    w.set(`${s.module}.lora_A.weight`, Float32Array.from({ length: r * s.inFeatures }, () => (2 * rand() - 1) * bound));
    w.set(`${s.module}.lora_B.weight`, Float32Array.from({ length: s.outFeatures * r }, () => (2 * rand() - 1) * bStd));
  }
  return w;
}
