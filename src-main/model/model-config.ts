// The decoder's hyper-parameters, normalised across families: what ./hf-checkpoint.ts reads from
// config.json and ./gguf/model.ts from a GGUF's metadata. Apart from hf-checkpoint.ts (which
// re-exports them) so that the GGUF reader can name them without importing the checkpoint back.

export type ModelFamily = 'llama' | 'qwen2' | 'qwen3' | 'gemma2' | 'gemma3';

/**
 * The architectures run as another family's network under a name of their own: llama.cpp's
 * general.architecture for them, and config.json's model_type unless {@link HF_MODEL_TYPES} says
 * otherwise. Others go by their family's name.
 */
export const OWN_MODEL_TYPES: Readonly<Record<string, string>> = {
  Phi3ForCausalLM: 'phi3', GraniteForCausalLM: 'granite', SmolLM3ForCausalLM: 'smollm3', Olmo2ForCausalLM: 'olmo2', Ministral3ForCausalLM: 'mistral3',
  // llama.cpp runs OLMo 3 as olmo2 with sliding layers.
  Olmo3ForCausalLM: 'olmo2',
  Glm4ForCausalLM: 'glm4',
};

/** config.json's model_type where it is not llama.cpp's architecture name. */
export const HF_MODEL_TYPES: Readonly<Record<string, string>> = { Olmo3ForCausalLM: 'olmo3', Gemma3ForCausalLM: 'gemma3_text', Ministral3ForCausalLM: 'ministral3' };

export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number }
  /**
   * Phi-3's LongRoPE within its original context (the only one Hindsight uses it at,
   * ./hf-checkpoint.ts ropeContextCap): each frequency divided by its short factor, cos and sin
   * multiplied by the attention factor.
   */
  | { type: 'longrope'; shortFactor: number[]; attentionFactor: number }
  /**
   * YaRN (OLMo 3's global layers), as transformers' _compute_yarn_parameters: frequencies mixed
   * between interpolated (÷ factor) and kept by a ramp over the pairs whose wavelengths fall
   * between beta_fast and beta_slow rotations of the original context; cos and sin times the
   * attention factor.
   */
  | { type: 'yarn'; factor: number; originalMaxPositionEmbeddings: number; betaFast: number; betaSlow: number; attentionFactor: number; truncate: boolean };

/** The decoder's hyper-parameters, normalised across families. */
export interface ModelConfig {
  family: ModelFamily;
  architecture: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling?: RopeScaling;
  tieWordEmbeddings: boolean;
  /** Bias on q, k and v projections (Qwen2 always; Llama and Qwen3 with attention_bias). */
  qkvBias: boolean;
  /** Bias on the output projection (Llama and Qwen3 with attention_bias; Qwen2 never). */
  oBias: boolean;
  mlpBias: boolean;
  /** Qwen3, Gemma 3, OLMo 2: RMSNorm of q and k before RoPE, per head (weights [head_dim]) or, with qkNormWhole, over the whole projection. */
  qkNorm: boolean;
  /** OLMo 2: q and k normed across every head at once (weights [heads·head_dim]), before the heads are split. */
  qkNormWhole?: boolean;
  /**
   * OLMo 2: no norm before attention or the MLP; each branch's output is normed
   * (post_attention_layernorm, post_feedforward_layernorm) before its residual add.
   */
  postNorms?: boolean;
  /** RoPE turns only the first this-many of each head's dimensions (Phi-4-mini: 3/4 of them; GLM-4: half); absent: all of them. */
  rotaryDim?: number;
  /**
   * GLM-4: RoPE turns adjacent pairs of dimensions (2i, 2i + 1), GPT-J's layout and ggml's plain
   * RoPE, in place of rotate-half's (i, i + d/2) that Llama's checkpoints use (./rope.ts).
   */
  ropeInterleaved?: boolean;
  /** Per layer: true where the layer's q and k are not turned at all (SmolLM3's NoPE layers, every 4th); absent: every layer turns them. */
  noRopeLayers?: boolean[];
  /**
   * Ministral 3 (Llama 4's attention temperature): each query times 1 + beta·ln(1 + ⌊position /
   * floorScale⌋), after RoPE: 1 within the first floorScale positions (YaRN's original context).
   */
  queryTemperature?: { beta: number; floorScale: number };
  /**
   * Granite: the embedding times `embedding`, attention scores times `attention` (in place of
   * 1/√head_dim), each layer's two residual branches times `residual`, logits divided by `logits`.
   */
  multipliers?: { embedding: number; attention: number; residual: number; logits: number };
  /** Gemma 2 and 3 (./gemma-config.ts says what the decoder does differently for them). */
  gemma?: GemmaLayout;
  /** Gemma, GLM-4: a norm after each branch as well as before it, named as {@link SANDWICH_NORMS} says. */
  sandwichNorms?: keyof typeof SANDWICH_NORMS;
  /** Gemma 2 and 3, OLMo 3: layers with a sliding attention window and RoPE of their own (./sliding-layers.ts). */
  sliding?: SlidingLayers;
  /**
   * Where the decoder's layers sit in the Hugging Face model, when not under `model.`: Gemma 3's
   * multimodal folders, `model.language_model` (transformers 5's name; 4.5x's checkpoints say
   * `language_model.model`). Hindsight names the layers `model.layers.N…` inside, and adapters and
   * merged folders outside, by this root (./hf-checkpoint.ts, ../train/peft.ts, ../train/peft-read.ts).
   */
  moduleRoot?: string;
  bosTokenId?: number;
  eosTokenIds: number[];
  maxPositionEmbeddings: number;
}

/** What Gemma's layers need beyond the fields every family has (./gemma-config.ts). */
export interface GemmaLayout {
  /** 1/√query_pre_attn_scalar: attention's scale in place of 1/√head_dim. */
  attentionScale: number;
  /** Gemma 2: attention's scaled scores s become c·tanh(s / c) before the mask (attn_logit_softcapping, 50). */
  attentionSoftcap?: number;
  /** Gemma 2: the logits z become c·tanh(z / c) before the softmax (final_logit_softcapping, 30). */
  finalSoftcap?: number;
}

/** Layers that see only the last `window` positions (Gemma 2 and 3, OLMo 3; ./sliding-layers.ts). */
export interface SlidingLayers {
  /** A sliding layer's query sees the keys fewer than this many positions back (itself included). */
  window: number;
  /** Per layer: true where it slides, false where it sees the whole context. */
  layers: boolean[];
  /** RoPE's base on the sliding layers, which are never scaled (ropeTheta, ropeScaling: the others'). */
  ropeTheta: number;
}

/**
 * The positions a model is used at (docs/design.md §The context window), one rule for config.json
 * (./hf-checkpoint.ts) and GGUF metadata (./gguf/model.ts): its own, capped at a sliding window
 * the decoder does not build (within it every query sees the whole window: Mistral 7B v0.1,
 * Phi-3-mini-4k) and at LongRoPE's original context (past it Phi-3 switches to other frequencies
 * for the whole sequence, which transformers and llama.cpp decide differently: by the sequence's
 * length, by the context asked for). A cap of 0 or absent is none.
 */
export function usedPositions(positions: number, caps: { window?: number; longRopeOriginal?: number }): number {
  return Math.min(positions, ...[caps.window, caps.longRopeOriginal].filter((c): c is number => c !== undefined && c > 0));
}

/**
 * The norms of a layer whose branches are normed on both sides (ModelConfig.sandwichNorms), by
 * their Hugging Face names (the input norm is `input_layernorm` in both): after attention, before
 * the MLP, after the MLP. llama.cpp calls them post_attention_norm, ffn_norm and post_ffw_norm for
 * both families.
 */
export const SANDWICH_NORMS = {
  gemma: { afterAttention: 'post_attention_layernorm', beforeMlp: 'pre_feedforward_layernorm', afterMlp: 'post_feedforward_layernorm' },
  glm4: { afterAttention: 'post_self_attn_layernorm', beforeMlp: 'post_attention_layernorm', afterMlp: 'post_mlp_layernorm' },
} as const;
