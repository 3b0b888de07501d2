// Gemma 2's and 3's config.json (src-main/model/gemma-config.ts): the two forms transformers has
// written (4.5x: rope_local_base_freq and sliding_window_pattern, or nothing for Gemma 2's every
// other layer; 5.x: rope_parameters, per layer type for Gemma 3, and layer_types) read as the same
// ModelConfig; Gemma 2's caps as given, their defaults where absent, none where null; what Hindsight
// does not run (Gemma 3 with an attention cap, bidirectional attention) refused in one line. Their
// numbers against transformers' own Gemma 2 and 3:
// test/interop/checkpoints.test.ts; its gradients: test/train/step-gradients.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { scoreRow } from '../helpers/score-model.js';
import { readSafetensorsHeader, readTensorBytes, writeSafetensors, type TensorToWrite } from '../../src-main/model/safetensors.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gemma3-config-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

// Gemma 3 4B's text model, as its config.json (transformers 4.50) gives it.
const GEMMA3_4B = {
  architectures: ['Gemma3ForCausalLM'], model_type: 'gemma3_text', vocab_size: 262208, hidden_size: 2560, intermediate_size: 10240,
  num_hidden_layers: 34, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, hidden_activation: 'gelu_pytorch_tanh',
  max_position_embeddings: 131072, rms_norm_eps: 1e-6, query_pre_attn_scalar: 256, sliding_window: 1024, sliding_window_pattern: 6,
  rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: { rope_type: 'linear', factor: 8 }, attn_logit_softcapping: null,
  final_logit_softcapping: null, bos_token_id: 2, eos_token_id: [1, 106], tie_word_embeddings: true,
};

function config(fields: Record<string, unknown>): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'm-'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(fields));
  return dir;
}
/** The message readModelConfig refuses `fields` with, or 'read'. */
function refusalOf(fields: Record<string, unknown>): string {
  try {
    readModelConfig(config(fields));
  } catch (err) {
    return (err as Error).message;
  }
  return 'read';
}
const without = (keys: string[]) => Object.fromEntries(Object.entries(GEMMA3_4B).filter(([k]) => !keys.includes(k)));

describe('Gemma 3 configs', () => {
  it("4B's config: every sixth layer global with linear RoPE ×8, the rest sliding over 1,024 positions at base 10,000", () => {
    const c = readModelConfig(config(GEMMA3_4B));
    expect(c).toMatchObject({ family: 'gemma3', architecture: 'Gemma3ForCausalLM', qkNorm: true, headDim: 256, ropeTheta: 1000000, tieWordEmbeddings: true, eosTokenIds: [1, 106] });
    expect(c.ropeScaling).toEqual({ type: 'linear', factor: 8 });
    expect(c.gemma).toEqual({ attentionScale: 1 / 16 });
    expect(c.sliding).toMatchObject({ window: 1024, ropeTheta: 10000 });
    expect(c.sliding!.layers.flatMap((s, i) => (s ? [] : [i]))).toEqual([5, 11, 17, 23, 29]);
  });

  it('transformers 5 form: layer_types and rope_parameters per layer type read as the 4.5x form', () => {
    const layerTypes = Array.from({ length: 34 }, (_, i) => ((i + 1) % 6 ? 'sliding_attention' : 'full_attention'));
    const v5 = {
      ...without(['rope_theta', 'rope_local_base_freq', 'rope_scaling', 'sliding_window_pattern']), layer_types: layerTypes,
      rope_parameters: { full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1000000 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
    };
    expect(readModelConfig(config(v5))).toEqual(readModelConfig(config(GEMMA3_4B)));
    // 1B: no scaling, a 512 window.
    const oneB = readModelConfig(config({ ...v5, sliding_window: 512, rope_parameters: { full_attention: { rope_type: 'default', rope_theta: 1000000 }, sliding_attention: { rope_theta: 10000 } } }));
    expect([oneB.ropeScaling, oneB.sliding!.window]).toEqual([undefined, 512]);
  });

  it("refuses what Gemma 3 is not, naming the field", () => {
    const refusal = (fields: Record<string, unknown>) => refusalOf({ ...GEMMA3_4B, ...fields });
    expect(refusal({ attn_logit_softcapping: 50 })).toMatch(/attn_logit_softcapping 50 is not supported for Gemma 3/);
    expect(refusal({ final_logit_softcapping: 'high' })).toMatch(/final_logit_softcapping must be a positive number or null, found "high"/);
    expect(refusal({ use_bidirectional_attention: true })).toMatch(/use_bidirectional_attention/);
    expect(refusal({ hidden_activation: 'gelu' })).toMatch(/hidden_activation 'gelu' is not supported/);
    expect(refusal({ layer_types: ['sliding_attention'] })).toMatch(/layer_types must be 34 entries/);
    expect(refusal({ sliding_window: null })).toMatch(/sliding_window must be a positive integer/);
    expect(refusal({ rope_theta: undefined, rope_parameters: { full_attention: { rope_theta: 1e6 }, sliding_attention: { rope_type: 'linear', factor: 2, rope_theta: 1e4 } } })).toMatch(/sliding_attention .* is not supported/);
  });

  it('Gemma 3n and Gemma 4 are refused with why, and what runs instead', () => {
    expect(refusalOf({ ...GEMMA3_4B, architectures: ['Gemma3nForConditionalGeneration'] })).toMatch(/unsupported architecture \["Gemma3nForConditionalGeneration"\] \(Gemma 3n's per-layer embeddings and AltUp streams are not built; Gemma 2 and 3 run\); supported: /);
    expect(refusalOf({ ...GEMMA3_4B, architectures: ['Gemma4ForCausalLM'] })).toMatch(/\(Gemma 4's per-layer head sizes and shared keys and values are not built; Gemma 2 and 3 run\)/);
  });

  it('a final cap, where a config sets one, is read (llama.cpp has it too)', () => {
    expect(readModelConfig(config({ ...GEMMA3_4B, final_logit_softcapping: 30 })).gemma).toEqual({ attentionScale: 1 / 16, finalSoftcap: 30 });
  });
});

// Gemma 2 9B's config.json as released (transformers 4.42).
const GEMMA2_9B = {
  architectures: ['Gemma2ForCausalLM'], model_type: 'gemma2', attention_bias: false, attn_logit_softcapping: 50.0, bos_token_id: 2, cache_implementation: 'hybrid',
  eos_token_id: [1, 107], final_logit_softcapping: 30.0, head_dim: 256, hidden_act: 'gelu_pytorch_tanh', hidden_activation: 'gelu_pytorch_tanh', hidden_size: 3584,
  intermediate_size: 14336, max_position_embeddings: 8192, num_attention_heads: 16, num_hidden_layers: 42, num_key_value_heads: 8, pad_token_id: 0,
  query_pre_attn_scalar: 256, rms_norm_eps: 1e-6, rope_theta: 10000.0, sliding_window: 4096, sliding_window_size: 4096, vocab_size: 256000,
};

describe('Gemma 2 configs', () => {
  it("9B's config: every other layer sliding over 4,096 positions from the first, one RoPE base, caps 50 and 30, no q/k norms", () => {
    const c = readModelConfig(config(GEMMA2_9B));
    expect(c).toMatchObject({ family: 'gemma2', architecture: 'Gemma2ForCausalLM', qkNorm: false, headDim: 256, ropeTheta: 10000, ropeScaling: undefined, eosTokenIds: [1, 107], maxPositionEmbeddings: 8192 });
    expect(c.gemma).toEqual({ attentionScale: 1 / 16, attentionSoftcap: 50, finalSoftcap: 30 });
    expect(c.sliding).toEqual({ window: 4096, ropeTheta: 10000, layers: Array.from({ length: 42 }, (_, i) => i % 2 === 0) });
  });

  it('transformers 5 form (one rope_parameters object, layer_types) reads as the released form; absent caps take the defaults, null ones none', () => {
    const { rope_theta: _, ...rest } = GEMMA2_9B;
    const layerTypes = Array.from({ length: 42 }, (_, i) => (i % 2 ? 'full_attention' : 'sliding_attention'));
    const v5 = { ...rest, layer_types: layerTypes, rope_parameters: { rope_type: 'default', rope_theta: 10000.0 } };
    expect(readModelConfig(config(v5))).toEqual(readModelConfig(config(GEMMA2_9B)));
    const { attn_logit_softcapping: __, final_logit_softcapping: ___, ...uncapped } = GEMMA2_9B;
    expect(readModelConfig(config(uncapped)).gemma).toEqual({ attentionScale: 1 / 16, attentionSoftcap: 50, finalSoftcap: 30 });
    expect(readModelConfig(config({ ...GEMMA2_9B, attn_logit_softcapping: null, final_logit_softcapping: null })).gemma).toEqual({ attentionScale: 1 / 16 });
    // 27B: query_pre_attn_scalar hidden / heads (144), not the head size.
    expect(readModelConfig(config({ ...GEMMA2_9B, hidden_size: 4608, num_attention_heads: 32, num_key_value_heads: 16, head_dim: 128, query_pre_attn_scalar: 144 })).gemma!.attentionScale).toBeCloseTo(1 / 12, 12);
  });

  it('refuses a scaled RoPE and a cap that is not a positive number, naming the field', () => {
    const refusal = (fields: Record<string, unknown>) => refusalOf({ ...GEMMA2_9B, ...fields });
    expect(refusal({ rope_scaling: { rope_type: 'linear', factor: 2 } })).toMatch(/RoPE scaling \(linear\) is not supported for Gemma 2/);
    expect(refusal({ attn_logit_softcapping: -1 })).toMatch(/attn_logit_softcapping must be a positive number or null, found -1/);
    expect(refusal({ hidden_activation: 'silu', hidden_act: 'silu' })).toMatch(/hidden_activation 'silu' is not supported/);
  });
});

describe("Gemma 3's multimodal folders (Gemma3ForConditionalGeneration: 4B and up)", () => {
  it("4B's config.json: a sparse text_config, the rest Gemma3TextConfig's defaults, reads as its text model's", () => {
    const multimodal = {
      architectures: ['Gemma3ForConditionalGeneration'], model_type: 'gemma3', eos_token_id: [1, 106], mm_tokens_per_image: 256, image_token_index: 262144,
      text_config: { hidden_size: 2560, intermediate_size: 10240, model_type: 'gemma3_text', num_hidden_layers: 34, rope_scaling: { factor: 8.0, rope_type: 'linear' }, sliding_window: 1024 },
      vision_config: { hidden_size: 1152, model_type: 'siglip_vision_model', num_hidden_layers: 27 },
    };
    expect(readModelConfig(config(multimodal))).toEqual({ ...readModelConfig(config(GEMMA3_4B)), architecture: 'Gemma3ForConditionalGeneration', moduleRoot: 'model.language_model' });
  });

  it("transformers 5's layout (model.language_model.*, beside a vision tower) scores as the text model's folder", async () => {
    const text = writeTinyModel(path.join(tmp, 'text'), { family: 'gemma3', numLayers: 3, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 4, tie: true });
    const dir = path.join(tmp, 'multimodal');
    fs.mkdirSync(dir);
    for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json']) fs.copyFileSync(path.join(text.dir, f), path.join(dir, f));
    const { architectures: _, ...textConfig } = text.config;
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ architectures: ['Gemma3ForConditionalGeneration'], model_type: 'gemma3', text_config: textConfig, eos_token_id: text.config.eos_token_id }));
    const source = path.join(text.dir, 'model.safetensors');
    const tensors: Record<string, TensorToWrite> = { 'model.vision_tower.embeddings.patch_embedding.weight': { dtype: 'F32', shape: [2, 3], data: new Float32Array(6) } };
    for (const e of readSafetensorsHeader(source).tensors) {
      tensors[e.name.replace(/^model\./, 'model.language_model.')] = { dtype: 'F32', shape: e.shape, data: new Float32Array(readTensorBytes(e).slice().buffer) };
    }
    writeSafetensors(path.join(dir, 'model.safetensors'), tensors, { format: 'pt' });
    const rows = [{ inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60], responseStart: 1 }];
    expect(await scoreRow(dir, rows[0]!)).toEqual(await scoreRow(text.dir, rows[0]!));
    const ckpt = Checkpoint.open(dir);
    expect([ckpt.has('model.layers.0.self_attn.q_proj.weight'), ckpt.decoderName('model.language_model.norm.weight')]).toEqual([true, 'model.norm.weight']);
    expect(ckpt.tensorNames).toContain('model.vision_tower.embeddings.patch_embedding.weight'); // kept, for a merged folder
  });
});
