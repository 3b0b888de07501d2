// config.json as transformers ≥ 5 writes it: RoPE's base and scaling in one `rope_parameters`
// object instead of rope_theta and rope_scaling (found by test/interop/checkpoints.test.ts: read
// as before, a Qwen3 saved by transformers 5 ran with rope_theta 10000 instead of 1e6).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readModelConfig } from '../../src-main/model/hf-checkpoint.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-rope-params-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function config(extra: Record<string, unknown>): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'm-'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
    architectures: ['LlamaForCausalLM'], vocab_size: 300, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4, ...extra,
  }));
  return dir;
}

describe('rope_parameters (transformers 5)', () => {
  it('reads rope_theta and the scaling from it', () => {
    expect(readModelConfig(config({ rope_parameters: { rope_type: 'default', rope_theta: 1e6 } }))).toMatchObject({ ropeTheta: 1e6, ropeScaling: undefined });
    expect(readModelConfig(config({ rope_parameters: { rope_theta: 5e5 } })).ropeTheta).toBe(5e5);
    const llama3 = { rope_type: 'llama3', rope_theta: 5e5, factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
    expect(readModelConfig(config({ rope_parameters: llama3 }))).toMatchObject({
      ropeTheta: 5e5, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    });
    expect(readModelConfig(config({ rope_parameters: { rope_type: 'linear', rope_theta: 1e4, factor: 2 } })).ropeScaling).toEqual({ type: 'linear', factor: 2 });
  });

  it('still reads rope_theta and rope_scaling where rope_parameters is absent', () => {
    expect(readModelConfig(config({ rope_theta: 1e6, rope_scaling: { type: 'linear', factor: 4 } }))).toMatchObject({ ropeTheta: 1e6, ropeScaling: { type: 'linear', factor: 4 } });
  });

  it('refuses what it cannot apply with one line', () => {
    expect(() => readModelConfig(config({ rope_parameters: { full_attention: { rope_theta: 1e6 }, sliding_attention: { rope_theta: 1e4 } } }))).toThrow(/per-layer-type parameters are not/);
    expect(() => readModelConfig(config({ rope_parameters: { rope_theta: 1e4, partial_rotary_factor: 1.5 } }))).toThrow(/partial_rotary_factor 1.5 must be a number in \(0, 1\]/);
    expect(() => readModelConfig(config({ rope_parameters: { rope_type: 'dynamic', rope_theta: 1e4, factor: 4 } }))).toThrow(/rope_scaling .* is not supported \(supported: linear, llama3, longrope, yarn\)/);
    expect(() => readModelConfig(config({ rope_parameters: { rope_type: 'yarn', rope_theta: 1e4, factor: 4 } }))).toThrow(/yarn needs original_max_position_embeddings and a factor/);
  });
});
