// Phi-3's config.json (docs/design.md §The context window, §Training runs "Fused projections"):
// Phi3ForCausalLM is Llama's network with fused projections; LongRoPE is read as its short
// factors and attention factor, and caps the positions at its original context; Phi-3-mini-4k's
// window caps them too; Phi-4-mini turns part of each head. Its numbers against transformers'
// own Phi-3: test/interop/checkpoints.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpoint, readModelConfig, ropeInverseFrequencies } from '../../src-main/model/hf-checkpoint.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { fusedProjectionsOf } from '../../src-main/model/fused-projections.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-phi3-config-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const factors = (n: number) => Array.from({ length: n }, (_, i) => 1 + i / 10);
function config(extra: Record<string, unknown>): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'm-'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
    architectures: ['Phi3ForCausalLM'], vocab_size: 300, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4,
    num_key_value_heads: 4, max_position_embeddings: 131072, original_max_position_embeddings: 4096, rope_theta: 10000, sliding_window: 262144, ...extra,
  }));
  return dir;
}

describe('Phi-3 configs', () => {
  it("Phi-3.5-mini: LongRoPE's short factors and attention factor, within its original 4,096 positions", () => {
    const c = readModelConfig(config({ rope_scaling: { type: 'longrope', short_factor: factors(8), long_factor: factors(8) } }));
    expect(c).toMatchObject({ family: 'llama', architecture: 'Phi3ForCausalLM', maxPositionEmbeddings: 4096, qkvBias: false });
    expect(fusedProjectionsOf(c).map((f) => f.module)).toEqual(['self_attn.qkv_proj', 'mlp.gate_up_proj']);
    expect(c.ropeScaling).toEqual({ type: 'longrope', shortFactor: factors(8), attentionFactor: Math.sqrt(1 + Math.log(32) / Math.log(4096)) });
    expect(c.rotaryDim).toBeUndefined();
    const inv = ropeInverseFrequencies(c);
    inv.forEach((f, i) => expect(f).toBeCloseTo(1 / (factors(8)[i]! * 10000 ** ((2 * i) / 16)), 12));
    // Its first configs call the type "su"; a factor or attention_factor given is taken as given.
    expect(readModelConfig(config({ rope_scaling: { type: 'su', short_factor: factors(8), long_factor: factors(8), attention_factor: 1.5 } })).ropeScaling).toMatchObject({ attentionFactor: 1.5 });
  });

  it("Phi-3-mini-4k: its 2,047-token window caps the positions; no LongRoPE", () => {
    const c = readModelConfig(config({ max_position_embeddings: 4096, sliding_window: 2047 }));
    expect([c.maxPositionEmbeddings, c.ropeScaling]).toEqual([2047, undefined]);
  });

  it('Phi-4-mini: a partial rotation (3/4 of each head), its factors one per rotated pair', () => {
    const c = readModelConfig(config({ partial_rotary_factor: 0.75, rope_scaling: { type: 'longrope', short_factor: factors(6), long_factor: factors(6) } }));
    expect([c.rotaryDim, c.headDim, ropeInverseFrequencies(c).length]).toEqual([12, 16, 6]);
    expect(() => readModelConfig(config({ partial_rotary_factor: 0.75, rope_scaling: { type: 'longrope', short_factor: factors(8), long_factor: factors(8) } })))
      .toThrow(/rope_scaling.short_factor must be 6 positive numbers \(one per rotated pair\)/);
  });

  it('the checkpoint reads the fused tensors as the separate projections, each a cut of its bytes', () => {
    const model = writeTinyModel(path.join(tmp, 'tiny'), { family: 'phi3', numLayers: 1, dtype: 'BF16' });
    const ckpt = Checkpoint.open(model.dir);
    const c = ckpt.config;
    const qkv = model.weights.get('model.layers.0.self_attn.qkv_proj.weight')!.data;
    const gateUp = model.weights.get('model.layers.0.mlp.gate_up_proj.weight')!.data;
    const H = c.hiddenSize, q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim, I = c.intermediateSize;
    expect(ckpt.has('model.layers.0.self_attn.qkv_proj.weight')).toBe(false);
    expect(ckpt.readFloat32('model.layers.0.self_attn.q_proj.weight', [q, H])).toEqual(qkv.subarray(0, q * H));
    expect(ckpt.readFloat32('model.layers.0.self_attn.v_proj.weight', [kv, H])).toEqual(qkv.subarray((q + kv) * H));
    expect(ckpt.readFloat32('model.layers.0.mlp.up_proj.weight', [I, H])).toEqual(gateUp.subarray(I * H));
    // A fused tensor whose rows are not its parts' is one line naming it.
    const bad = JSON.parse(fs.readFileSync(path.join(model.dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(model.dir, 'config.json'), JSON.stringify({ ...bad, num_key_value_heads: 4 }));
    expect(() => Checkpoint.open(model.dir)).toThrow(/tensor 'model.layers.0.self_attn.qkv_proj.weight' has \d+ rows, expected \d+ \(q, k, v from the model's sizes\)/);
  });
});
