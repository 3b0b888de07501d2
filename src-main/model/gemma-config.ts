/**
 * Gemma 3's text decoder as config.json describes it (`Gemma3ForCausalLM`, model_type
 * `gemma3_text`: Gemma 3 1B and 270M, and the text model of the larger ones). Its sliding layers
 * and their RoPE, in both of the forms transformers has written them (4.5x's
 * `rope_local_base_freq` and `sliding_window_pattern`; 5.x's `rope_parameters` per layer type and
 * `layer_types`), are read by ./sliding-layers.ts.
 *
 * What the decoder does differently for Gemma (./decoder.ts, ModelConfig.gemma): the embedding
 * times √hidden; RMSNorm weights stored as w for a scale of 1 + w; four norms a layer (around
 * attention and around the MLP); GELU (tanh form) in place of SiLU; attention scaled by
 * 1/√query_pre_attn_scalar; q and k normed per head (as Qwen3); and sliding layers that see only
 * the last `sliding_window` positions, with their own RoPE base and no scaling.
 *
 * Refused, each with its field named: soft-capping of attention scores or logits (Gemma 2's;
 * Gemma 3 sets both to null), bidirectional attention (EmbeddingGemma), another activation.
 *
 * Gemma 3 4B and larger ship as `Gemma3ForConditionalGeneration`: the text model's fields in a
 * `text_config` that leaves most of them to Gemma3TextConfig's defaults ({@link
 * gemma3MultimodalText}), its weights under `language_model.model.` (transformers 4.5x) or
 * `model.language_model.` (5.x), beside a vision tower Hindsight leaves unread
 * (ModelConfig.moduleRoot; ./hf-checkpoint.ts Checkpoint).
 */
import { UserError } from '../../src-shared/types.js';
import type { GemmaLayout, RopeScaling, SlidingLayers } from './model-config.js';
import { readSlidingLayers, slidingConfigJson, slidingFromGguf, type SlidingRead } from './sliding-layers.js';

export interface GemmaRead extends SlidingRead {
  layout: GemmaLayout;
}

type Raw = Record<string, unknown>;

/** Gemma3TextConfig's defaults (transformers 5.24, the same as 4.50's), for what a multimodal folder's text_config leaves out. */
const GEMMA3_TEXT_DEFAULTS: Raw = {
  vocab_size: 262_208, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4,
  head_dim: 256, query_pre_attn_scalar: 256, sliding_window: 4096, rms_norm_eps: 1e-6, max_position_embeddings: 131_072,
  tie_word_embeddings: true, hidden_activation: 'gelu_pytorch_tanh', bos_token_id: 2, eos_token_id: 1,
};

/** A Gemma3ForConditionalGeneration config.json's text model, as a Gemma3ForCausalLM's config.json would give it (the folder's own ids first). */
export function gemma3MultimodalText(raw: Raw, file: string): Raw {
  const text = raw.text_config;
  if (!text || typeof text !== 'object' || Array.isArray(text)) throw new UserError(`${file}: Gemma3ForConditionalGeneration needs a text_config object, found ${JSON.stringify(text)?.slice(0, 80)}`);
  const own = (key: string) => (raw[key] !== undefined ? { [key]: raw[key] } : {});
  return { ...GEMMA3_TEXT_DEFAULTS, ...(text as Raw), architectures: raw.architectures, ...own('eos_token_id'), ...own('bos_token_id') };
}

export function readGemma3(raw: Raw, file: string, numLayers: number, parseScaling: (scaling: unknown) => RopeScaling | undefined): GemmaRead {
  for (const key of ['attn_logit_softcapping', 'final_logit_softcapping'] as const) {
    if (raw[key] !== null && raw[key] !== undefined) throw new UserError(`${file}: ${key} ${JSON.stringify(raw[key])} is not supported (Gemma 3 sets it to null; Gemma 2's soft-capping is not built)`);
  }
  if (raw.use_bidirectional_attention === true) throw new UserError(`${file}: use_bidirectional_attention is not supported (an embedding model, not a chat model)`);
  const act = raw.hidden_activation ?? raw.hidden_act ?? 'gelu_pytorch_tanh';
  if (act !== 'gelu_pytorch_tanh') throw new UserError(`${file}: hidden_activation '${act}' is not supported (Gemma 3's is gelu_pytorch_tanh)`);
  const scalar = raw.query_pre_attn_scalar ?? 256;
  if (typeof scalar !== 'number' || !(scalar > 0)) throw new UserError(`${file}: query_pre_attn_scalar must be a positive number, found ${JSON.stringify(scalar)}`);
  const sliding = readSlidingLayers(raw, file, numLayers, { pattern: 6, theta: 1_000_000, localThetaKey: { key: 'rope_local_base_freq', fallback: 10_000 } }, parseScaling);
  return { layout: { attentionScale: 1 / Math.sqrt(scalar) }, ...sliding };
}

/**
 * Gemma 3's layout and sliding layers from a GGUF file's metadata, as llama.cpp reads them
 * (src/models/gemma3.cpp): the pattern 6 where the file has none, the sliding layers' base
 * `rope.freq_base_swa` (Ollama's converter: `rope.local.freq_base`; absent: 10,000), attention
 * scaled by 1/√head size but for the 27B shape (62 layers), whose query_pre_attn_scalar is
 * hidden / heads. Final-logit soft-capping is refused. `get` reads `<arch>.<key>`.
 */
export function gemma3FromGguf(get: (key: string) => unknown, file: string, shape: { numLayers: number; hiddenSize: number; numHeads: number; headDim: number }): { layout: GemmaLayout; sliding?: SlidingLayers } {
  const softcap = get('final_logit_softcapping');
  if (typeof softcap === 'number' && softcap > 0) throw new UserError(`${file}: gemma3.final_logit_softcapping ${softcap} is not supported`);
  const ollamaLocal = get('rope.local.freq_base');
  const sliding = slidingFromGguf(get, file, shape.numLayers, 6, typeof ollamaLocal === 'number' ? ollamaLocal : 10_000);
  const scalar = shape.numLayers === 62 ? shape.hiddenSize / shape.numHeads : shape.headDim;
  return { layout: { attentionScale: 1 / Math.sqrt(scalar) }, ...(sliding ? { sliding } : {}) };
}

/** config.json's Gemma 3 fields (a merged folder of a GGUF base), in the 4.5x form, as readGemma3 reads them back. */
export function gemma3ConfigJson(g: GemmaLayout, sliding: SlidingLayers | undefined): Record<string, unknown> {
  return {
    hidden_act: undefined, hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: Number((1 / g.attentionScale ** 2).toPrecision(12)),
    // A file without sliding layers: every layer global (sliding_window is required, and never reached).
    ...(sliding ? { ...slidingConfigJson(sliding), rope_local_base_freq: sliding.ropeTheta } : { sliding_window: 1, sliding_window_pattern: 1 }),
    attn_logit_softcapping: null, final_logit_softcapping: null,
  };
}
