/**
 * The files a Hugging Face folder carries beside its weights, written for a GGUF model: what
 * its metadata stands for as config.json, tokenizer.json, tokenizer_config.json (with the chat
 * template) and generation_config.json. A merged model (base + adapter, src-main/train/merge.ts)
 * of a GGUF base is then an ordinary checkpoint folder (a Phi-3 one with model_type phi3, so that
 * transformers builds Phi3ForCausalLM for its fused tensors; a Gemma 3 one with gemma3_text and its layers' layout).
 */
import fs from 'node:fs';
import path from 'node:path';
import { HF_MODEL_TYPES, OWN_MODEL_TYPES, type ModelConfig } from '../model-config.js';
import type { GgufModel } from './model.js';
import { ggufTokenizer } from './tokenizer-json.js';
import { gemmaConfigJson, gemmaVersionOf } from '../gemma-config.js';
import { slidingConfigJson } from '../sliding-layers.js';

/** config.json's fields for `c`, as readModelConfig reads them back. */
export function configJson(c: ModelConfig): Record<string, unknown> {
  const s = c.ropeScaling;
  return {
    architectures: [c.architecture],
    // transformers picks the model class by model_type: Phi-3's fused tensors and Granite's multipliers need their own.
    model_type: HF_MODEL_TYPES[c.architecture] ?? OWN_MODEL_TYPES[c.architecture] ?? c.family,
    // No padding token: a config class's default may name one past this vocabulary (Phi3Config's
    // 32000, Glm4Config's 151329), which transformers refuses.
    pad_token_id: null,
    ...(c.multipliers ? {
      embedding_multiplier: c.multipliers.embedding, attention_multiplier: c.multipliers.attention,
      residual_multiplier: c.multipliers.residual, logits_scaling: c.multipliers.logits,
    } : {}),
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling: ropeScalingJson(c),
    ...(c.rotaryDim !== undefined ? { partial_rotary_factor: c.rotaryDim / c.headDim } : {}),
    ...(c.noRopeLayers ? { no_rope_layers: c.noRopeLayers.map((skips) => (skips ? 0 : 1)) } : {}),
    // LongRoPE is used within its original context only (hf-checkpoint.ts contextCap): that context is the model's.
    ...(s?.type === 'longrope' ? { original_max_position_embeddings: c.maxPositionEmbeddings } : {}),
    tie_word_embeddings: c.tieWordEmbeddings,
    ...(c.family !== 'qwen2' ? { attention_bias: c.qkvBias } : {}),
    mlp_bias: c.mlpBias,
    ...(c.bosTokenId !== undefined ? { bos_token_id: c.bosTokenId } : {}),
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    max_position_embeddings: c.maxPositionEmbeddings,
    torch_dtype: 'float32',
    ...(c.gemma ? gemmaConfigJson(gemmaVersionOf(c.family) ?? 3, c.gemma, c.sliding) : c.sliding ? slidingConfigJson(c.sliding) : {}),
  };
}

function ropeScalingJson(c: ModelConfig): Record<string, unknown> | null {
  const s = c.ropeScaling;
  if (!s) return null;
  if (s.type === 'linear') return { rope_type: 'linear', factor: s.factor };
  if (s.type === 'yarn') {
    return { rope_type: 'yarn', factor: s.factor, original_max_position_embeddings: s.originalMaxPositionEmbeddings, beta_fast: s.betaFast, beta_slow: s.betaSlow, attention_factor: s.attentionFactor, truncate: s.truncate };
  }
  if (s.type === 'longrope') return { rope_type: 'longrope', short_factor: s.shortFactor, long_factor: s.shortFactor, attention_factor: s.attentionFactor };
  return { rope_type: 'llama3', factor: s.factor, low_freq_factor: s.lowFreqFactor, high_freq_factor: s.highFreqFactor, original_max_position_embeddings: s.originalMaxPositionEmbeddings };
}

/**
 * config.json's fields that transformers 5 types as float alone: its strict config classes refuse
 * `"attn_logit_softcapping": 50` (Gemma 2's) where the file said 50.0, and JavaScript's numbers
 * keep no difference between the two, so a config.json read and written again, or made from a
 * GGUF's metadata, would no longer load.
 */
const FLOAT_FIELDS: ReadonlySet<string> = new Set(['attn_logit_softcapping', 'final_logit_softcapping', 'rms_norm_eps', 'initializer_range']);

/** A config.json's text, the {@link FLOAT_FIELDS} written as floats (50.0) wherever they hold a whole number. */
export function configJsonText(config: unknown): string {
  const marker = 'hindsight-float:';
  const text = JSON.stringify(config, (key, value) => (FLOAT_FIELDS.has(key) && Number.isSafeInteger(value) ? `${marker}${value}` : value), 2);
  return text.replace(new RegExp(`"${marker}(-?\\d+)"`, 'g'), '$1.0') + '\n';
}

/** Writes config.json and the tokenizer files of `model` into `dir`. */
export function writeGgufCompanionFiles(model: GgufModel, dir: string): void {
  const tok = ggufTokenizer(model.gguf);
  const write = (name: string, value: unknown) => fs.writeFileSync(path.join(dir, name), JSON.stringify(value, null, 1));
  fs.writeFileSync(path.join(dir, 'config.json'), configJsonText(configJson(model.config)));
  write('tokenizer.json', tok.json);
  write('tokenizer_config.json', tok.config);
  write('generation_config.json', { eos_token_id: tok.eosTokenIds, ...(model.config.bosTokenId !== undefined ? { bos_token_id: model.config.bosTokenId } : {}) });
}
