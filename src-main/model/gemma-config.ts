/**
 * Gemma 2 and Gemma 3's text decoders as config.json describes them (`Gemma2ForCausalLM`, model
 * type `gemma2`: Gemma 2 2B, 9B, 27B; `Gemma3ForCausalLM`, model_type `gemma3_text`: Gemma 3 1B
 * and 270M, and the text model of the larger ones). Their sliding layers and RoPE, in both of the
 * forms transformers has written them (4.5x's `rope_theta`, `rope_local_base_freq` and
 * `sliding_window_pattern`; 5.x's `rope_parameters`, per layer type for Gemma 3, and
 * `layer_types`), are read by ./sliding-layers.ts.
 *
 * What the decoder does differently for Gemma (./decoder.ts, ModelConfig.gemma): the embedding
 * times √hidden; RMSNorm weights stored as w for a scale of 1 + w; four norms a layer (around
 * attention and around the MLP); GELU (tanh form) in place of SiLU; attention scaled by
 * 1/√query_pre_attn_scalar; sliding layers that see only the last `sliding_window` positions
 * (Gemma 2: every other layer, one RoPE base for all; Gemma 3: five of six, their own base, never
 * scaled). Gemma 3 norms q and k per head (as Qwen3). Gemma 2 soft-caps attention's scores and the
 * logits, c·tanh(x / c) (GemmaLayout.attentionSoftcap, finalSoftcap; ./attention.ts,
 * ./chunked-head.ts); Gemma 3 may soft-cap its logits (its configs say null).
 *
 * Refused, each with its field named: Gemma 3 with attention soft-capping (llama.cpp's Gemma 3
 * has none, so its exports would differ), bidirectional attention (EmbeddingGemma), another
 * activation.
 *
 * Gemma 3 4B and larger ship as `Gemma3ForConditionalGeneration`: the text model's fields in a
 * `text_config` that leaves most of them to Gemma3TextConfig's defaults ({@link
 * gemma3MultimodalText}), its weights under `language_model.model.` (transformers 4.5x) or
 * `model.language_model.` (5.x), beside a vision tower Hindsight leaves unread
 * (ModelConfig.moduleRoot; ./hf-checkpoint.ts Checkpoint).
 */
import { UserError } from '../../src-shared/types.js';
import type { GemmaLayout, ModelFamily, RopeScaling, SlidingLayers } from './model-config.js';
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

/** What differs between Gemma 2's and Gemma 3's config.json where the file says nothing (their configs' defaults). */
const GEMMA_DEFAULTS = {
  2: { sliding: { pattern: 2, theta: 10_000 }, softcaps: { attn_logit_softcapping: 50, final_logit_softcapping: 30 } },
  3: { sliding: { pattern: 6, theta: 1_000_000, localThetaKey: { key: 'rope_local_base_freq', fallback: 10_000 } }, softcaps: { attn_logit_softcapping: null, final_logit_softcapping: null } },
} as const;

export type GemmaVersion = keyof typeof GEMMA_DEFAULTS;

/** The Gemma version a model family is, if it is one (the one place the families name their version). */
export function gemmaVersionOf(family: ModelFamily): GemmaVersion | undefined {
  return family === 'gemma2' ? 2 : family === 'gemma3' ? 3 : undefined;
}

export function readGemma(raw: Raw, file: string, version: GemmaVersion, numLayers: number, parseScaling: (scaling: unknown) => RopeScaling | undefined): GemmaRead {
  const defaults = GEMMA_DEFAULTS[version];
  // A cap: absent, the version's default; null or 0, none (as transformers reads it).
  const softcap = (key: keyof typeof defaults.softcaps): number | undefined => {
    const v = raw[key] === undefined ? defaults.softcaps[key] : raw[key];
    if (v === null || v === 0) return undefined;
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)) throw new UserError(`${file}: ${key} must be a positive number or null, found ${JSON.stringify(v)}`);
    return v;
  };
  const attentionSoftcap = softcap('attn_logit_softcapping'), finalSoftcap = softcap('final_logit_softcapping');
  if (version === 3 && attentionSoftcap !== undefined) throw new UserError(`${file}: attn_logit_softcapping ${attentionSoftcap} is not supported for Gemma 3 (its configs set it to null, and llama.cpp's Gemma 3 has none)`);
  if (raw.use_bidirectional_attention === true) throw new UserError(`${file}: use_bidirectional_attention is not supported (an embedding model, not a chat model)`);
  const act = raw.hidden_activation ?? raw.hidden_act ?? 'gelu_pytorch_tanh';
  if (act !== 'gelu_pytorch_tanh') throw new UserError(`${file}: hidden_activation '${act}' is not supported (Gemma's is gelu_pytorch_tanh)`);
  const scalar = raw.query_pre_attn_scalar ?? 256;
  if (typeof scalar !== 'number' || !(scalar > 0)) throw new UserError(`${file}: query_pre_attn_scalar must be a positive number, found ${JSON.stringify(scalar)}`);
  const sliding = readSlidingLayers(raw, file, numLayers, defaults.sliding, parseScaling);
  // Gemma 2 scales every layer's RoPE alike, and the sliding layers here never are: none was released scaled.
  if (version === 2 && sliding.ropeScaling) throw new UserError(`${file}: RoPE scaling (${sliding.ropeScaling.type}) is not supported for Gemma 2`);
  return { layout: gemmaLayout(1 / Math.sqrt(scalar), attentionSoftcap, finalSoftcap), ...sliding };
}

/** A GemmaLayout without the caps that are not set. */
function gemmaLayout(attentionScale: number, attentionSoftcap: number | undefined, finalSoftcap: number | undefined): GemmaLayout {
  return { attentionScale, ...(attentionSoftcap ? { attentionSoftcap } : {}), ...(finalSoftcap ? { finalSoftcap } : {}) };
}

/**
 * Gemma's layout and sliding layers from a GGUF file's metadata, as llama.cpp reads them
 * (src/models/gemma2.cpp, gemma3.cpp). Gemma 2: a window of 4,096 and every other layer sliding
 * where the file says nothing, one RoPE base for all layers (unless `rope.freq_base_swa`), the
 * caps `attn_logit_softcapping` (absent: 50) and `final_logit_softcapping` (absent: 30). Gemma 3:
 * the pattern 6, the sliding layers' base `rope.freq_base_swa` (Ollama's converter:
 * `rope.local.freq_base`; absent: 10,000), a final cap only where the file gives one. Attention
 * is scaled by 1/√head size but for the 27B shapes (Gemma 2's 46 layers, Gemma 3's 62), whose
 * query_pre_attn_scalar is hidden / heads. `get` reads `<arch>.<key>`.
 */
export function gemmaFromGguf(version: GemmaVersion, get: (key: string) => unknown, file: string, shape: { numLayers: number; hiddenSize: number; numHeads: number; headDim: number; ropeTheta: number }): { layout: GemmaLayout; sliding?: SlidingLayers } {
  const cap = (key: string, fallback: number) => {
    const v = get(key) ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new UserError(`${file}: gemma${version}.${key} must be a number ≥ 0, found ${JSON.stringify(v)}`);
    return v > 0 ? v : undefined;
  };
  const finalSoftcap = cap('final_logit_softcapping', version === 2 ? 30 : 0);
  const attentionSoftcap = version === 2 ? cap('attn_logit_softcapping', 50) : undefined;
  const sliding = version === 2
    ? slidingFromGguf((key) => get(key) ?? (key === 'attention.sliding_window' ? 4096 : undefined), file, shape.numLayers, 2, shape.ropeTheta)
    : slidingFromGguf(get, file, shape.numLayers, 6, numberOr(get('rope.local.freq_base'), 10_000));
  const scalar = shape.numLayers === (version === 2 ? 46 : 62) ? shape.hiddenSize / shape.numHeads : shape.headDim;
  return { layout: gemmaLayout(1 / Math.sqrt(scalar), attentionSoftcap, finalSoftcap), ...(sliding ? { sliding } : {}) };
}

const numberOr = (v: unknown, fallback: number): number => (typeof v === 'number' ? v : fallback);

/** config.json's Gemma fields (a merged folder of a GGUF base), in the 4.5x form, as readGemma reads them back. */
export function gemmaConfigJson(version: GemmaVersion, g: GemmaLayout, sliding: SlidingLayers | undefined): Record<string, unknown> {
  // A file without sliding layers: every layer global (sliding_window is required, and never reached).
  const layers = sliding ? { ...slidingConfigJson(sliding), ...(version === 3 ? { rope_local_base_freq: sliding.ropeTheta } : {}) } : { sliding_window: 1, sliding_window_pattern: 1 };
  return {
    hidden_act: undefined, hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: Number((1 / g.attentionScale ** 2).toPrecision(12)),
    ...layers,
    attn_logit_softcapping: g.attentionSoftcap ?? null, final_logit_softcapping: g.finalSoftcap ?? null,
  };
}
