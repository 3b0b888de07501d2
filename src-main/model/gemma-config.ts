/**
 * Gemma 3's text decoder as config.json describes it (`Gemma3ForCausalLM`, model_type
 * `gemma3_text`: Gemma 3 1B and 270M, and the text model of the larger ones), in both of the
 * forms transformers has written it:
 * - 4.5x: `rope_theta` and `rope_scaling` for the global layers, `rope_local_base_freq` for the
 *   sliding ones, `sliding_window_pattern` (every n-th layer global);
 * - 5.x: `rope_parameters` per layer type (`full_attention`, `sliding_attention`) and
 *   `layer_types`, one per layer.
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
import type { GemmaLayout, RopeScaling } from './model-config.js';

export interface GemmaRead {
  layout: GemmaLayout;
  /** The global layers' RoPE. */
  ropeTheta: number;
  ropeScaling?: RopeScaling;
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
  const window = raw.sliding_window;
  if (typeof window !== 'number' || !Number.isInteger(window) || window < 1) throw new UserError(`${file}: sliding_window must be a positive integer, found ${JSON.stringify(window)}`);
  const scalar = raw.query_pre_attn_scalar ?? 256;
  if (typeof scalar !== 'number' || !(scalar > 0)) throw new UserError(`${file}: query_pre_attn_scalar must be a positive number, found ${JSON.stringify(scalar)}`);
  const rope = readRopes(raw, file, parseScaling);
  return {
    layout: { attentionScale: 1 / Math.sqrt(scalar), slidingWindow: window, slidingLayers: slidingLayers(raw, file, numLayers), localRopeTheta: rope.localTheta },
    ropeTheta: rope.theta,
    ...(rope.scaling ? { ropeScaling: rope.scaling } : {}),
  };
}

/** Which layers slide: `layer_types`, else every layer but each `sliding_window_pattern`-th (6 by default), as transformers 4.5x counted them. */
function slidingLayers(raw: Raw, file: string, numLayers: number): boolean[] {
  const types = raw.layer_types;
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'sliding_attention' || t === 'full_attention')) {
      throw new UserError(`${file}: layer_types must be ${numLayers} entries of "sliding_attention" or "full_attention", found ${JSON.stringify(types)?.slice(0, 120)}`);
    }
    return types.map((t) => t === 'sliding_attention');
  }
  const pattern = raw.sliding_window_pattern ?? raw._sliding_window_pattern ?? 6;
  if (typeof pattern !== 'number' || !Number.isInteger(pattern) || pattern < 1) throw new UserError(`${file}: sliding_window_pattern must be a positive integer, found ${JSON.stringify(pattern)}`);
  return Array.from({ length: numLayers }, (_, i) => (i + 1) % pattern !== 0);
}

function readRopes(raw: Raw, file: string, parseScaling: (scaling: unknown) => RopeScaling | undefined): { theta: number; scaling?: RopeScaling; localTheta: number } {
  const params = raw.rope_parameters;
  if (params === undefined || params === null) {
    const theta = raw.rope_theta ?? 1_000_000, localTheta = raw.rope_local_base_freq ?? 10_000;
    if (typeof theta !== 'number' || typeof localTheta !== 'number') throw new UserError(`${file}: rope_theta and rope_local_base_freq must be numbers`);
    return { theta, localTheta, scaling: parseScaling(raw.rope_scaling) };
  }
  const p = params as Record<string, Raw | undefined>;
  const full = p.full_attention, sliding = p.sliding_attention;
  if (typeof full?.rope_theta !== 'number' || typeof sliding?.rope_theta !== 'number') {
    throw new UserError(`${file}: rope_parameters must give rope_theta for full_attention and sliding_attention, found ${JSON.stringify(params).slice(0, 160)}`);
  }
  // Only an object naming its type is a scaling; {rope_theta} alone is none.
  const typed = (r: Raw) => (r.rope_type === undefined && r.type === undefined ? undefined : parseScaling(r));
  const { rope_theta: localTheta, ...localScaling } = sliding;
  if (typed(localScaling) !== undefined) throw new UserError(`${file}: rope_parameters.sliding_attention ${JSON.stringify(sliding)} is not supported (the sliding layers' RoPE is unscaled)`);
  const { rope_theta: theta, ...scaling } = full;
  return { theta: theta as number, localTheta: localTheta as number, scaling: typed(scaling) };
}

/**
 * Gemma 3's layout from a GGUF file's metadata, as llama.cpp reads it (src/models/gemma3.cpp):
 * `attention.sliding_window` (0 or absent: no sliding layers), `attention.sliding_window_pattern`
 * (a count, or one flag per layer; absent: 6), the sliding layers' base `rope.freq_base_swa`
 * (Ollama's converter: `rope.local.freq_base`; absent: 10,000), and attention scaled by 1/√head
 * size but for the 27B shape (62 layers), whose query_pre_attn_scalar is hidden / heads.
 * Final-logit soft-capping is refused. `get` reads `<arch>.<key>`.
 */
export function gemma3FromGguf(get: (key: string) => unknown, file: string, shape: { numLayers: number; hiddenSize: number; numHeads: number; headDim: number }): GemmaLayout {
  const softcap = get('final_logit_softcapping');
  if (typeof softcap === 'number' && softcap > 0) throw new UserError(`${file}: gemma3.final_logit_softcapping ${softcap} is not supported`);
  const window = get('attention.sliding_window');
  const pattern = get('attention.sliding_window_pattern') ?? 6;
  const { numLayers } = shape;
  let slidingLayers: boolean[];
  if (typeof window !== 'number' || window <= 0) slidingLayers = Array.from({ length: numLayers }, () => false);
  else if (Array.isArray(pattern) && pattern.length === numLayers && pattern.every((p) => typeof p === 'boolean')) slidingLayers = pattern as boolean[];
  else if (typeof pattern === 'number' && Number.isInteger(pattern) && pattern >= 0) slidingLayers = Array.from({ length: numLayers }, (_, i) => pattern === 0 || i % pattern < pattern - 1);
  else throw new UserError(`${file}: gemma3.attention.sliding_window_pattern must be a count or ${numLayers} flags, found ${JSON.stringify(pattern)?.slice(0, 80)}`);
  const localBase = get('rope.freq_base_swa') ?? get('rope.local.freq_base') ?? 10_000;
  if (typeof localBase !== 'number' || !(localBase > 0)) throw new UserError(`${file}: gemma3.rope.freq_base_swa must be a positive number, found ${JSON.stringify(localBase)}`);
  const scalar = numLayers === 62 ? shape.hiddenSize / shape.numHeads : shape.headDim;
  return { attentionScale: 1 / Math.sqrt(scalar), slidingWindow: typeof window === 'number' && window > 0 ? window : 1, slidingLayers, localRopeTheta: localBase };
}

/** config.json's Gemma 3 fields for a layout (a merged folder of a GGUF base), in the 4.5x form, with layer_types, as readGemma3 reads them back. */
export function gemma3ConfigJson(g: GemmaLayout): Record<string, unknown> {
  return {
    model_type: 'gemma3_text', hidden_act: undefined, hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: Number((1 / g.attentionScale ** 2).toPrecision(12)), sliding_window: g.slidingWindow,
    layer_types: g.slidingLayers.map((slides) => (slides ? 'sliding_attention' : 'full_attention')), rope_local_base_freq: g.localRopeTheta,
    attn_logit_softcapping: null, final_logit_softcapping: null,
  };
}
