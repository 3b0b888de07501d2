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
import { gemma3ConfigJson } from '../gemma-config.js';
import { slidingConfigJson } from '../sliding-layers.js';

/** config.json's fields for `c`, as readModelConfig reads them back. */
export function configJson(c: ModelConfig): Record<string, unknown> {
  const s = c.ropeScaling;
  return {
    architectures: [c.architecture],
    // transformers picks the model class by model_type: Phi-3's fused tensors and Granite's multipliers need their own.
    model_type: HF_MODEL_TYPES[c.architecture] ?? OWN_MODEL_TYPES[c.architecture] ?? c.family,
    // Phi3Config's default pad_token_id is Phi-3's 32000, past a smaller vocabulary.
    ...(c.architecture === 'Phi3ForCausalLM' ? { pad_token_id: null } : {}),
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
    ...(c.gemma ? gemma3ConfigJson(c.gemma, c.sliding) : c.sliding ? slidingConfigJson(c.sliding) : {}),
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

/** Writes config.json and the tokenizer files of `model` into `dir`. */
export function writeGgufCompanionFiles(model: GgufModel, dir: string): void {
  const tok = ggufTokenizer(model.gguf);
  const write = (name: string, value: unknown) => fs.writeFileSync(path.join(dir, name), JSON.stringify(value, null, 1));
  write('config.json', configJson(model.config));
  write('tokenizer.json', tok.json);
  write('tokenizer_config.json', tok.config);
  write('generation_config.json', { eos_token_id: tok.eosTokenIds, ...(model.config.bosTokenId !== undefined ? { bos_token_id: model.config.bosTokenId } : {}) });
}
