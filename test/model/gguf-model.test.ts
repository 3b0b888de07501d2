// A GGUF file as a checkpoint (src-main/model/gguf/model.ts through Checkpoint.open): tiny
// Llama (untied), Qwen2 (biases, tied) and Qwen3 (q/k norms) folders written as GGUF by the
// benches' writer (which permutes Llama's q/k rows as llama.cpp's converter does) read back as
// the same config and, tensor for tensor, the same fp32 weights; refusals are one line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { huggingFaceName, unpermuteRows } from '../../src-main/model/gguf/model.js';
import { writeGgufCompanionFiles } from '../../src-main/model/gguf/folder-files.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { isModelPath } from '../../src-main/model/model-path.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { f32, f32Bytes, modelRefusal, str, u32, writeGguf } from './gguf-writer.js';
import { writeTinyModel, type TinyFamily } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-model-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const cases: { family: TinyFamily; tie: boolean }[] = [
  { family: 'llama', tie: false },
  { family: 'qwen2', tie: true },
  { family: 'qwen3', tie: false },
];

describe.each(cases)('$family (tied: $tie) as GGUF', ({ family, tie }) => {
  const dir = path.join(tmp, `${family}-${tie}`);
  const tiny = writeTinyModel(dir, { family, tie, numKvHeads: 2, numHeads: 4 });
  const file = path.join(tmp, `${family}-${tie}.gguf`);
  writeGgufFromFolder(dir, file, { type: 'f32' });

  it('reads the config config.json gives', () => {
    const fromFolder = readModelConfig(dir);
    const ckpt = Checkpoint.open(file);
    expect(ckpt.gguf).toBeDefined();
    const { maxPositionEmbeddings: _a, eosTokenIds: _b, bosTokenId: _c, ...want } = fromFolder;
    const { maxPositionEmbeddings: _d, eosTokenIds: _e, bosTokenId: _f, ...got } = ckpt.config;
    expect({ ...got, rmsNormEps: Math.fround(got.rmsNormEps) }).toEqual({ ...want, rmsNormEps: Math.fround(want.rmsNormEps) });
    expect(ckpt.config.tieWordEmbeddings).toBe(tie);
  });

  it('reads every tensor as the folder holds it (Llama\'s q/k rows put back)', () => {
    const ckpt = Checkpoint.open(file);
    expect(ckpt.tensorNames.sort()).toEqual([...tiny.weights.keys()].sort());
    for (const [name, w] of tiny.weights) {
      expect(ckpt.entry(name).shape, name).toEqual(w.shape);
      const got = ckpt.readFloat32(name, w.shape);
      expect(got.every((v, i) => Object.is(v, w.data[i])), name).toBe(true);
    }
  });

  it('scores as the folder does (the same weights through the same graph)', async () => {
    const rows = [{ inputIds: [5, 9, 2, 7, 11, 3], responseStart: 2 }];
    const [a, b] = [await LocalModel.load(dir), await LocalModel.load(file)];
    try {
      const [want, got] = [(await a.score(rows))[0]!, (await b.score(rows))[0]!];
      expect(got.length).toBe(4);
      got.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 5));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('writes the folder files a merged model of it needs (config.json, tokenizer)', () => {
    const ckpt = Checkpoint.open(file);
    const out = path.join(tmp, `${family}-${tie}-companions`);
    fs.mkdirSync(out);
    writeGgufCompanionFiles(ckpt.gguf!, out);
    expect(readModelConfig(out)).toEqual(ckpt.config);
    const text = 'Hello <|im_start|>world 123';
    expect(ChatTokenizer.load(out).encode(text)).toEqual(ChatTokenizer.load(file).encode(text));
    expect(isModelPath(file) && isModelPath(out) && !isModelPath(path.join(tmp, 'none.gguf'))).toBe(true);
  });

  it('names the weights by the file (the graph cache\'s key), not by a config.json', () => {
    const id = JSON.parse(Checkpoint.open(file).identity('int8')) as Record<string, unknown>;
    expect(id.dir).toBe(path.resolve(file));
    expect(id.variant).toBe('int8');
    expect((id.files as string[])[0]).toMatch(new RegExp(`^${path.basename(file)}:\\d+:`));
  });
});

describe('GGUF names and rows', () => {
  it('maps llama.cpp tensor names onto Hugging Face\'s', () => {
    expect(huggingFaceName('token_embd.weight')).toBe('model.embed_tokens.weight');
    expect(huggingFaceName('output.weight')).toBe('lm_head.weight');
    expect(huggingFaceName('output_norm.weight')).toBe('model.norm.weight');
    expect(huggingFaceName('blk.12.attn_q.bias')).toBe('model.layers.12.self_attn.q_proj.bias');
    expect(huggingFaceName('blk.0.attn_k_norm.weight')).toBe('model.layers.0.self_attn.k_norm.weight');
    expect(huggingFaceName('blk.3.ffn_down.weight')).toBe('model.layers.3.mlp.down_proj.weight');
    expect(huggingFaceName('blk.3.ffn_gate_exps.weight')).toBeUndefined();
  });

  it('undoes the converter\'s permutation: row h·hd + 2i + t comes from h·hd + t·hd/2 + i', () => {
    // Two heads of four rows, one column: HF rows [0 1 2 3 | 4 5 6 7] are stored as [0 2 1 3 | 4 6 5 7].
    expect([...unpermuteRows(Float32Array.from([0, 2, 1, 3, 4, 6, 5, 7]), 2, 1)]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('GGUF models Hindsight cannot run', () => {
  const base = {
    'general.architecture': str('llama'), 'llama.embedding_length': u32(8), 'llama.block_count': u32(1), 'llama.feed_forward_length': u32(16),
    'llama.attention.head_count': u32(2), 'llama.attention.layer_norm_rms_epsilon': f32(1e-5), 'llama.context_length': u32(64),
  };
  const embd = { name: 'token_embd.weight', dims: [8, 4], type: 0, bytes: f32Bytes(new Array(32).fill(0)) };
  const open = (name: string, meta: Record<string, ReturnType<typeof str>>, tensors = [embd]) => modelRefusal(path.join(tmp, name), meta, tensors);

  it('names an unsupported architecture', () => {
    expect(open('gemma.gguf', { ...base, 'general.architecture': str('gemma3n') })).toMatch(/gemma\.gguf: architecture 'gemma3n' is not supported \(supported: llama, qwen2, qwen3, phi3, granite, olmo2, mistral3, smollm3, gemma2, gemma3, glm4\)/);
  });

  it('names per-layer head counts, partial RoPE, other rope scaling and unknown tensors', () => {
    expect(open('perlayer.gguf', { ...base, 'llama.attention.head_count_kv': { type: 'array', elem: 'u32', value: [2, 1] } as never })).toMatch(/llama\.attention\.head_count_kv differs between layers/);
    expect(open('partial.gguf', { ...base, 'llama.rope.dimension_count': u32(2) })).toMatch(/partial RoPE/);
    expect(open('dynamic.gguf', { ...base, 'llama.rope.scaling.type': str('dynamic') })).toMatch(/rope\.scaling\.type 'dynamic' is not supported \(supported: linear, yarn,/);
    expect(open('yarn.gguf', { ...base, 'llama.rope.scaling.type': str('yarn') })).toMatch(/rope\.scaling\.type yarn needs a positive llama\.rope\.scaling\.factor/);
    expect(open('moe.gguf', base, [embd, { name: 'blk.0.ffn_gate_exps.weight', dims: [8], type: 0, bytes: f32Bytes(new Array(8).fill(0)) }])).toMatch(/tensor 'blk\.0\.ffn_gate_exps\.weight' \(F32\) is not part of a llama model/);
    expect(open('nometa.gguf', { 'general.architecture': str('llama') })).toMatch(/llama\.embedding_length must be a number, found nothing/);
  });

  it('names a weight of an unsupported type when it is read', () => {
    const p = path.join(tmp, 'iq.gguf');
    writeGguf(p, base, [{ name: 'token_embd.weight', dims: [256, 4], type: 16, bytes: new Uint8Array(66 * 4) }]);
    const ckpt = Checkpoint.open(p);
    expect(() => ckpt.readFloat32('model.embed_tokens.weight', [4, 256])).toThrow(/iq\.gguf: tensor 'token_embd\.weight': tensor type IQ2_XXS is not supported/);
  });
});
