// Bad checkpoints and unavailable devices get clear errors that name the file and tensor.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalModel } from '../../src-main/model/local-model.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { CUDA_PROVIDER_LIBS, ortBinaryDir } from '../../src-main/model/ort-session.js';
import { readSafetensorsHeader, writeSafetensors } from '../../src-main/model/safetensors.js';
import { UserError } from '../../src-shared/types.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-errors-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = (opts: Parameters<typeof writeTinyModel>[1] = { family: 'qwen3' }) => writeTinyModel(path.join(root, `m${n++}`), opts).dir;

async function loadError(dir: string, options = {}): Promise<Error> {
  try {
    const m = await LocalModel.load(dir, { prepare: ['score'], ...options });
    await m.close();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected LocalModel.load to fail');
}

describe('checkpoint errors', () => {
  it('missing folder, config.json or tokenizer.json', async () => {
    expect((await loadError(path.join(root, 'nope'))).message).toMatch(/nope/);
    const noConfig = fresh();
    fs.rmSync(path.join(noConfig, 'config.json'));
    const e1 = await loadError(noConfig);
    expect(e1).toBeInstanceOf(UserError);
    expect(e1.message).toContain(`missing file ${path.join(noConfig, 'config.json')}`);
    const noTok = fresh();
    fs.rmSync(path.join(noTok, 'tokenizer.json'));
    expect((await loadError(noTok)).message).toContain(`missing file ${path.join(noTok, 'tokenizer.json')}`);
  });

  it('missing weights and missing shard', async () => {
    const noWeights = fresh();
    fs.rmSync(path.join(noWeights, 'model.safetensors'));
    expect((await loadError(noWeights)).message).toMatch(/missing weights/);
    const sharded = fresh({ family: 'llama', shards: 2 });
    fs.rmSync(path.join(sharded, 'model-00002-of-00002.safetensors'));
    expect((await loadError(sharded)).message).toMatch(/model\.safetensors\.index\.json: lists shard model-00002-of-00002\.safetensors, which is missing/);
  });

  it('unknown architecture', async () => {
    const dir = fresh();
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg, architectures: ['MambaForCausalLM'], model_type: 'mamba' }));
    const e = await loadError(dir);
    expect(e).toBeInstanceOf(UserError);
    expect(e.message).toContain(path.join(dir, 'config.json'));
    expect(e.message).toMatch(/unsupported architecture \["MambaForCausalLM"\]; supported: LlamaForCausalLM, MistralForCausalLM, Phi3ForCausalLM, GraniteForCausalLM, SmolLM3ForCausalLM, Ministral3ForCausalLM, Olmo2ForCausalLM, Olmo3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Glm4ForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM/);
  });

  it('a tensor whose shape does not match config.json, and a tensor that is missing', async () => {
    const dir = fresh({ family: 'qwen2' });
    const file = path.join(dir, 'model.safetensors');
    const { tensors } = readSafetensorsHeader(file);
    const bytes = fs.readFileSync(file);
    const out: Parameters<typeof writeSafetensors>[1] = {};
    for (const t of tensors) {
      const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + t.begin, bytes.byteOffset + t.end));
      if (t.name === 'model.layers.1.mlp.up_proj.weight') out[t.name] = { dtype: 'F32', shape: [t.shape[1]!, t.shape[0]!], data };
      else out[t.name] = { dtype: 'F32', shape: t.shape, data };
    }
    writeSafetensors(file, out);
    const e = await loadError(dir);
    expect(e).toBeInstanceOf(UserError);
    expect(e.message).toBe(`${file}: tensor 'model.layers.1.mlp.up_proj.weight' has shape [32,48], expected [48,32] from config.json`);
    out['model.layers.1.mlp.up_proj.weight'] = { dtype: 'F32', shape: [48, 32], data: new Float32Array(48 * 32) };
    delete out['model.layers.0.self_attn.k_proj.bias'];
    writeSafetensors(file, out);
    expect((await loadError(dir)).message).toBe(`${file}: missing tensor 'model.layers.0.self_attn.k_proj.bias', which config.json requires`);
  });

  it('a file that is not safetensors', async () => {
    const dir = fresh();
    fs.writeFileSync(path.join(dir, 'model.safetensors'), 'hello, not a tensor file');
    expect((await loadError(dir)).message).toMatch(/model\.safetensors: not a safetensors file/);
  });

  it('bad token ids and spans are user errors naming the row', async () => {
    const m = await LocalModel.load(fresh());
    try {
      await expect(m.score([{ inputIds: [1, 2, 99999], responseStart: 1 }])).rejects.toThrow(/row 1: token id 99999 is outside the vocabulary/);
      await expect(m.score([{ inputIds: [1, 2], responseStart: 0 }])).rejects.toThrow(/row 1: response_start 0 must be between 1 and the length 2/);
      await expect(m.generate([], {})).rejects.toThrow(/prompt is empty/);
    } finally {
      await m.close();
    }
  });
});

describe('device choice', () => {
  const cudaInstalled = CUDA_PROVIDER_LIBS.every((f) => fs.existsSync(path.join(ortBinaryDir(), f)));
  it.skipIf(cudaInstalled)('--device cuda without the CUDA provider is an error that says how to install it, never a CPU fallback', async () => {
    const dir = fresh();
    expect(() => ModelEngine.open(dir, { device: 'cuda' })).toThrow(UserError);
    const e = await loadError(dir, { device: 'cuda' });
    expect(e).toBeInstanceOf(UserError);
    expect(e.message).toMatch(/CUDA provider is not installed .*libonnxruntime_providers_cuda\.so.*npm run setup:gpu/);
  });
});
