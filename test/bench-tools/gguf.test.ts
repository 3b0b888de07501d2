/**
 * The benches' GGUF writer (bench/gguf-writer.ts, bench/gguf-quant.ts): the block encoders on
 * numbers worked out by hand from ggml's reference quantisers, and the file layout read back
 * by a small reader written here (header, metadata, tensor infos, alignment, tensor bytes).
 * llama.cpp itself is not needed; bench/llama-cpp.ts loads these files in the benches.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decode, encode, type GgmlType } from '../../bench/gguf-quant.js';
import { floatToHalf, halfToFloat } from '../../src-main/model/half.js';
import { GGUF_ALIGNMENT, GgufValue, permuteForLlamaRope, writeGguf } from '../../bench/gguf-writer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gguf-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('f16 (src-main/model/half.ts, which the benches write with)', () => {
  it('rounds float32 to the nearest half, ties to even, with subnormals and overflow', () => {
    expect(floatToHalf(1)).toBe(0x3c00);
    expect(floatToHalf(-2)).toBe(0xc000);
    expect(floatToHalf(0.1)).toBe(0x2e66);
    expect(floatToHalf(65504)).toBe(0x7bff);
    expect(floatToHalf(70000)).toBe(0x7c00);
    expect(floatToHalf(2 ** -24)).toBe(0x0001); // the smallest subnormal
    expect(floatToHalf(1e-8)).toBe(0); // under half of it
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00); // halfway: to the even neighbour
    expect(floatToHalf(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(floatToHalf(2 - 2 ** -12)).toBe(0x4000); // the carry rounds into the exponent
    expect(halfToFloat(0x3555)).toBeCloseTo(1 / 3, 3);
    expect(halfToFloat(0x0001)).toBe(2 ** -24);
  });
});

describe('q8_0', () => {
  it('encodes a block as an f16 scale max|x|/127 and codes rounded half away from zero', () => {
    const x = new Float32Array(32);
    x.set([-127, -3.5, 2.5, -2.5, 0.49, 1.5, 126.6, 0]);
    const bytes = encode('q8_0', x);
    expect(bytes.length).toBe(34);
    expect(new DataView(bytes.buffer).getUint16(0, true)).toBe(0x3c00); // d = 127 / 127 = 1
    expect([...new Int8Array(bytes.buffer, 2, 8)]).toEqual([-127, -4, 3, -3, 0, 2, 127, 0]);
    expect([...decode('q8_0', bytes).subarray(0, 3)]).toEqual([-127, -4, 3]);
  });

  it('keeps each value within half a step of its block scale', () => {
    const x = Float32Array.from({ length: 96 }, (_, i) => Math.sin(i * 0.7) * (i < 32 ? 1 : i < 64 ? 0.01 : 30));
    const y = decode('q8_0', encode('q8_0', x));
    for (let b = 0; b < 3; b++) {
      const block = x.subarray(b * 32, b * 32 + 32);
      const step = Math.max(...block.map(Math.abs)) / 127;
      for (let j = 0; j < 32; j++) expect(Math.abs(y[b * 32 + j]! - block[j]!)).toBeLessThanOrEqual(step * 0.51);
    }
  });
});

describe('q4_0', () => {
  it('scales by the largest-magnitude value over −8 and packs code j low, code j+16 high', () => {
    const x = new Float32Array(32);
    x.set([-8, 7, 7.6, 0, -0.5, 0.49, 0.5, -3.2]); // codes 0, 15, 15 (clamped), 8, 8, 8, 9, 5
    x.set([1, -1], 16); // codes 9, 7, in the high nibbles of bytes 0 and 1
    const bytes = encode('q4_0', x);
    expect(bytes.length).toBe(18);
    expect(new DataView(bytes.buffer).getUint16(0, true)).toBe(0x3c00); // d = −8 / −8 = 1
    expect([...bytes.subarray(2, 10)]).toEqual([0x90, 0x7f, 0x8f, 0x88, 0x88, 0x88, 0x89, 0x85]);
    expect([...decode('q4_0', bytes).subarray(0, 8)]).toEqual([-8, 7, 7, 0, 0, 0, 1, -3]);
    expect(decode('q4_0', bytes)[16]).toBe(1);
  });

  it('takes the sign of the largest value: a positive maximum gives a negative scale', () => {
    const x = new Float32Array(32);
    x.set([8, -7, 0]);
    const bytes = encode('q4_0', x);
    expect(new DataView(bytes.buffer).getUint16(0, true)).toBe(0xbc00); // d = 8 / −8 = −1
    expect(bytes[2]! & 0xf).toBe(0); // 8 · (−1) + 8.5 → 0
    expect([...decode('q4_0', bytes).subarray(0, 3)].map((v) => v + 0)).toEqual([8, -7, 0]); // + 0: −0 reads as 0
  });
});

it('permutes Llama q/k rows from split halves into interleaved pairs', () => {
  // 2 heads of head_dim 4, 1 column: head rows [a0 a1 b0 b1] become [a0 b0 a1 b1].
  const w = Float32Array.from([0, 1, 2, 3, 10, 11, 12, 13]);
  expect([...permuteForLlamaRope(w, 2, 1)]).toEqual([0, 2, 1, 3, 10, 12, 11, 13]);
});

// ---- a reader for the layout ----------------------------------------------------------------

interface ReadTensor {
  name: string;
  dims: number[];
  type: number;
  offset: number;
}

function readGguf(file: string): { version: number; meta: Map<string, unknown>; tensors: ReadTensor[]; dataStart: number; buf: Buffer } {
  const buf = fs.readFileSync(file);
  let at = 0;
  const u32 = () => ((at += 4), buf.readUInt32LE(at - 4));
  const u64 = () => ((at += 8), Number(buf.readBigUInt64LE(at - 8)));
  const str = () => {
    const n = u64();
    at += n;
    return buf.toString('utf8', at - n, at);
  };
  const value = (type: number): unknown => {
    switch (type) {
      case GgufValue.u32: return u32();
      case GgufValue.i32: return ((at += 4), buf.readInt32LE(at - 4));
      case GgufValue.f32: return ((at += 4), buf.readFloatLE(at - 4));
      case GgufValue.bool: return buf[at++] === 1;
      case GgufValue.string: return str();
      case GgufValue.array: {
        const elem = u32();
        return Array.from({ length: u64() }, () => value(elem));
      }
      default: throw new Error(`unexpected metadata type ${type}`);
    }
  };
  expect(buf.toString('latin1', 0, 4)).toBe('GGUF');
  at = 4;
  const version = u32();
  const nTensors = u64(), nMeta = u64();
  const meta = new Map<string, unknown>();
  for (let i = 0; i < nMeta; i++) {
    const key = str();
    meta.set(key, value(u32()));
  }
  const tensors: ReadTensor[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const dims = Array.from({ length: u32() }, u64);
    tensors.push({ name, dims, type: u32(), offset: u64() });
  }
  const dataStart = Math.ceil(at / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  return { version, meta, tensors, dataStart, buf };
}

const TYPE_NAME: Record<number, GgmlType> = { 0: 'f32', 1: 'f16', 2: 'q4_0', 8: 'q8_0' };
/** Bytes of `count` values of GGML type id `type`: 32-value blocks of 34 (q8_0) or 18 (q4_0) bytes. */
const encodedSize = (type: number, count: number) => (TYPE_NAME[type] === 'f32' ? count * 4 : (count / 32) * (type === 8 ? 34 : 18));

describe('writeGguf', () => {
  const llama = writeTinyModel(path.join(tmp, 'llama'), { family: 'llama', seed: 3, hiddenSize: 64, intermediateSize: 96, headDim: 16 });
  const qwen3 = writeTinyModel(path.join(tmp, 'qwen3'), { family: 'qwen3', tie: true, seed: 4, hiddenSize: 64, intermediateSize: 96, headDim: 32 });

  it.each(['f32', 'q8_0', 'q4_0'] as const)('writes a Llama checkpoint as %s: header, metadata, aligned tensors that decode to its weights', (type) => {
    const file = path.join(tmp, `llama-${type}.gguf`);
    const written = writeGguf(llama.dir, file, { type });
    const g = readGguf(file);
    expect(g.version).toBe(3);
    expect(fs.statSync(file).size).toBe(written.bytes);
    expect(g.meta.get('general.architecture')).toBe('llama');
    expect(g.meta.get('general.alignment')).toBe(32);
    expect(g.meta.get('general.file_type')).toBe({ f32: 0, q8_0: 7, q4_0: 2 }[type]);
    expect(g.meta.get('llama.block_count')).toBe(2);
    expect(g.meta.get('llama.attention.head_count')).toBe(4);
    expect(g.meta.get('llama.attention.head_count_kv')).toBe(2);
    expect(g.meta.get('llama.attention.key_length')).toBe(16);
    expect(g.meta.get('llama.attention.layer_norm_rms_epsilon')).toBeCloseTo(1e-6, 12);
    expect(g.meta.get('tokenizer.ggml.model')).toBe('gpt2');
    expect(g.meta.get('tokenizer.ggml.pre')).toBe('gpt-2');
    const vocab = llama.config.vocab_size as number;
    const tokens = g.meta.get('tokenizer.ggml.tokens') as string[];
    const types = g.meta.get('tokenizer.ggml.token_type') as number[];
    expect(tokens.length).toBe(vocab);
    expect(tokens[vocab - 1]).toBe(`[PAD${vocab - 1}]`);
    expect(types[vocab - 1]).toBe(5);
    expect(types[tokens.indexOf('<|im_end|>')]).toBe(3);
    expect(types[tokens.indexOf('<think>')]).toBe(4);
    expect((g.meta.get('tokenizer.ggml.merges') as string[])[0]).toBe('Ġ t');
    expect(g.meta.get('tokenizer.ggml.eos_token_id')).toBe(tokens.indexOf('<|im_end|>'));

    expect(g.dataStart % GGUF_ALIGNMENT).toBe(0);
    const byName = new Map(g.tensors.map((t) => [t.name, t]));
    expect(g.tensors.length).toBe(llama.weights.size);
    expect(byName.get('output.weight')!.dims).toEqual([64, vocab]); // untied: the head is written, dims innermost first
    expect(byName.get('blk.1.ffn_down.weight')!.dims).toEqual([96, 64]);
    for (const t of g.tensors) {
      expect(t.offset % GGUF_ALIGNMENT).toBe(0);
      const hf = hfNameOf(t.name);
      const w = llama.weights.get(hf)!;
      expect([...t.dims].reverse()).toEqual(w.shape);
      const projection = /attn_[qkvo]|attn_output|ffn_(gate|up|down)/.test(t.name);
      const head = /token_embd|output\.weight/.test(t.name);
      expect(TYPE_NAME[t.type]).toBe(projection ? type : head && type !== 'f32' ? 'q8_0' : 'f32');
      const count = w.data.length;
      const size = encodedSize(t.type, count);
      const values = decode(TYPE_NAME[t.type]!, g.buf.subarray(g.dataStart + t.offset, g.dataStart + t.offset + size));
      let expected = w.data;
      if (/attn_q\.weight/.test(t.name)) expected = permuteForLlamaRope(w.data, 4, 64);
      if (/attn_k\.weight/.test(t.name)) expected = permuteForLlamaRope(w.data, 2, 64);
      const tolerance = ({ f32: 0, f16: 0.001, q8_0: 0.005, q4_0: 0.1 } as Record<GgmlType, number>)[TYPE_NAME[t.type]!];
      let worst = 0;
      for (let i = 0; i < count; i++) worst = Math.max(worst, Math.abs(values[i]! - expected[i]!));
      expect(worst, t.name).toBeLessThanOrEqual(tolerance);
    }
    const last = g.tensors.at(-1)!;
    expect(written.bytes).toBe(g.dataStart + Math.ceil((last.offset + encodedSize(last.type, llama.weights.get(hfNameOf(last.name))!.data.length)) / 32) * 32);
  });

  it('writes Qwen3 tied: q/k norms, no output tensor, no RoPE permutation; the embedding q8_0 unless asked otherwise', () => {
    const file = path.join(tmp, 'qwen3-q8.gguf');
    writeGguf(qwen3.dir, file, { type: 'q8_0' });
    const g = readGguf(file);
    const names = g.tensors.map((t) => t.name);
    expect(g.meta.get('general.architecture')).toBe('qwen3');
    expect(g.meta.get('qwen3.attention.key_length')).toBe(32);
    expect(names).toContain('blk.0.attn_q_norm.weight');
    expect(names).toContain('blk.1.attn_k_norm.weight');
    expect(names).not.toContain('output.weight');
    const q = g.tensors.find((t) => t.name === 'blk.0.attn_q.weight')!;
    const values = decode('q8_0', g.buf.subarray(g.dataStart + q.offset, g.dataStart + q.offset + 34 * 2));
    const w = qwen3.weights.get('model.layers.0.self_attn.q_proj.weight')!.data;
    for (let i = 0; i < 64; i++) expect(Math.abs(values[i]! - w[i]!)).toBeLessThan(0.01); // rows as stored
    expect(g.tensors.find((t) => t.name === 'token_embd.weight')!.type).toBe(8);

    writeGguf(qwen3.dir, file, { type: 'q4_0', embeddings: 'q4_0' });
    expect(readGguf(file).tensors.find((t) => t.name === 'token_embd.weight')!.type).toBe(2);
    writeGguf(qwen3.dir, file, { type: 'q4_0', embeddings: 'f32' });
    expect(readGguf(file).tensors.find((t) => t.name === 'token_embd.weight')!.type).toBe(0);
  });

  it('names the real Qwen pre-tokenizer and pads the token list to the model vocabulary', async () => {
    const { writeRealTinyModel } = await import('../../tools/real-tokenizers.js');
    const real = writeRealTinyModel(path.join(tmp, 'qwen-real'), 'qwen3', { family: 'qwen3', hiddenSize: 32, headDim: 16, intermediateSize: 64 });
    const file = path.join(tmp, 'qwen-real.gguf');
    writeGguf(real.dir, file, { type: 'f32' });
    const g = readGguf(file);
    expect(g.meta.get('tokenizer.ggml.pre')).toBe('qwen2');
    expect((g.meta.get('tokenizer.ggml.tokens') as string[]).length).toBe(151_936);
    expect(g.meta.get('tokenizer.ggml.padding_token_id')).toBe(151_643);
  });
});

/** The HF name of a GGUF tensor name (the writer's mapping, inverted for the check). */
function hfNameOf(name: string): string {
  const fixed: Record<string, string> = { 'token_embd.weight': 'model.embed_tokens.weight', 'output_norm.weight': 'model.norm.weight', 'output.weight': 'lm_head.weight' };
  if (fixed[name]) return fixed[name]!;
  const m = /^blk\.(\d+)\.(\w+)\.(weight|bias)$/.exec(name)!;
  const part: Record<string, string> = {
    attn_norm: 'input_layernorm', ffn_norm: 'post_attention_layernorm', attn_q: 'self_attn.q_proj', attn_k: 'self_attn.k_proj', attn_v: 'self_attn.v_proj',
    attn_output: 'self_attn.o_proj', ffn_gate: 'mlp.gate_proj', ffn_up: 'mlp.up_proj', ffn_down: 'mlp.down_proj', attn_q_norm: 'self_attn.q_norm', attn_k_norm: 'self_attn.k_norm',
  };
  return `model.layers.${m[1]}.${part[m[2]!]}.${m[3]}`;
}
