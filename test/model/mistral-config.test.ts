// Mistral's config.json: MistralForCausalLM is read as Llama's network, and Mistral 7B v0.1's
// sliding attention window, which the decoder does not build, caps the positions it is used at
// (docs/design.md §The context window). Its numbers against transformers' own Mistral:
// test/interop/checkpoints.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { replyBudget } from '../../src-main/model/context-limit.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-mistral-config-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function config(architecture: string, extra: Record<string, unknown>): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'm-'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
    architectures: [architecture], vocab_size: 300, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4,
    max_position_embeddings: 32768, ...extra,
  }));
  return dir;
}

describe('Mistral configs', () => {
  it('read as Llama layers (no biases, no q/k norms), the architecture kept', () => {
    const c = readModelConfig(config('MistralForCausalLM', { sliding_window: null, head_dim: 24, num_key_value_heads: 2 }));
    expect(c).toMatchObject({ family: 'llama', architecture: 'MistralForCausalLM', headDim: 24, numKvHeads: 2, qkvBias: false, oBias: false, qkNorm: false, maxPositionEmbeddings: 32768 });
  });

  it("v0.1's sliding window caps the positions, so no prompt and reply go past it", () => {
    const c = readModelConfig(config('MistralForCausalLM', { sliding_window: 4096 }));
    expect(c.maxPositionEmbeddings).toBe(4096);
    expect(replyBudget(4000, 256, c.maxPositionEmbeddings)).toBe(96);
    expect(() => replyBudget(4096, 256, c.maxPositionEmbeddings)).toThrow(/the model has 4096 positions \(its context length\)/);
    // A window wider than the positions changes nothing.
    expect(readModelConfig(config('MistralForCausalLM', { sliding_window: 65536 })).maxPositionEmbeddings).toBe(32768);
  });

  it("another family's sliding_window (Qwen2 without use_sliding_window) is not a window", () => {
    expect(readModelConfig(config('Qwen2ForCausalLM', { sliding_window: 4096, use_sliding_window: false })).maxPositionEmbeddings).toBe(32768);
  });

  it('Mixtral (experts) stays refused in one line', () => {
    expect(() => readModelConfig(config('MixtralForCausalLM', {}))).toThrow(/unsupported architecture \["MixtralForCausalLM"\] \(a mixture of experts, which is not built\); supported: LlamaForCausalLM, MistralForCausalLM/);
  });
});
