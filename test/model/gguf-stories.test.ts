// The trained stories260K (a Llama with a SentencePiece tokenizer) stored as llama.cpp stores a
// Llama GGUF: `llama` tokenizer with pieces, scores and token types; q/k rows permuted into
// ggml's RoPE order; F16 and F32 weights. Read back, it tokenizes as its tokenizer.json and greedy
// decoding from BOS reproduces llama2.c's 200 reference tokens (the F32 file exactly).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { permuteForLlamaRope } from '../../bench/gguf-writer.js';
import { float32ToFp16 } from '../../src-main/model/half.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { f32, f32Bytes, str, u32, writeGguf, type MetaValue, type TensorToWrite } from './gguf-writer.js';

const DIR = path.resolve('resources/models/stories260K');
const reference = JSON.parse(fs.readFileSync(path.join(DIR, 'reference_greedy.json'), 'utf8')) as { bos_greedy_200_ids: number[]; prompt_ids: number[] };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-stories-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const GGUF_NAMES: [RegExp, string][] = [
  [/^model\.embed_tokens\.weight$/, 'token_embd.weight'], [/^model\.norm\.weight$/, 'output_norm.weight'], [/^lm_head\.weight$/, 'output.weight'],
  [/^model\.layers\.(\d+)\.input_layernorm\.weight$/, 'blk.$1.attn_norm.weight'], [/^model\.layers\.(\d+)\.post_attention_layernorm\.weight$/, 'blk.$1.ffn_norm.weight'],
  [/^model\.layers\.(\d+)\.self_attn\.q_proj\.weight$/, 'blk.$1.attn_q.weight'], [/^model\.layers\.(\d+)\.self_attn\.k_proj\.weight$/, 'blk.$1.attn_k.weight'],
  [/^model\.layers\.(\d+)\.self_attn\.v_proj\.weight$/, 'blk.$1.attn_v.weight'], [/^model\.layers\.(\d+)\.self_attn\.o_proj\.weight$/, 'blk.$1.attn_output.weight'],
  [/^model\.layers\.(\d+)\.mlp\.gate_proj\.weight$/, 'blk.$1.ffn_gate.weight'], [/^model\.layers\.(\d+)\.mlp\.up_proj\.weight$/, 'blk.$1.ffn_up.weight'],
  [/^model\.layers\.(\d+)\.mlp\.down_proj\.weight$/, 'blk.$1.ffn_down.weight'],
];

/** stories260K as a llama GGUF, its matrices in `type` (0 F32, 1 F16), norms F32. */
function writeStoriesGguf(file: string, type: 0 | 1): void {
  const ckpt = Checkpoint.open(DIR);
  const c = ckpt.config;
  const tensors: TensorToWrite[] = ckpt.tensorNames.map((name) => {
    const shape = ckpt.entry(name).shape;
    let data = ckpt.readFloat32(name, shape);
    if (/q_proj/.test(name)) data = permuteForLlamaRope(data, c.numHeads, shape[1]!);
    if (/k_proj/.test(name)) data = permuteForLlamaRope(data, c.numKvHeads, shape[1]!);
    const rule = GGUF_NAMES.find(([re]) => re.test(name))!;
    const matrix = shape.length === 2 && type === 1;
    const bytes = matrix ? new Uint8Array(float32ToFp16(data).buffer) : f32Bytes(data);
    return { name: name.replace(rule[0], rule[1]), dims: [...shape].reverse(), type: matrix ? 1 : 0, bytes };
  });
  const tok = JSON.parse(fs.readFileSync(path.join(DIR, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
  const pieces: string[] = [];
  for (const [piece, id] of Object.entries(tok.model.vocab)) pieces[id] = piece;
  // As llama.cpp's converter writes a SentencePiece vocabulary: unknown 2, control 3, byte 6,
  // normal 1; a BPE piece's score is minus its rank, which is its id order.
  const types = pieces.map((p, i) => (i === 0 ? 2 : i <= 2 ? 3 : /^<0x[0-9A-F]{2}>$/.test(p) ? 6 : 1));
  const meta: Record<string, MetaValue> = {
    'general.architecture': str('llama'),
    'llama.context_length': u32(c.maxPositionEmbeddings), 'llama.embedding_length': u32(c.hiddenSize), 'llama.block_count': u32(c.numLayers),
    'llama.feed_forward_length': u32(c.intermediateSize), 'llama.attention.head_count': u32(c.numHeads), 'llama.attention.head_count_kv': u32(c.numKvHeads),
    'llama.rope.dimension_count': u32(c.headDim), 'llama.attention.layer_norm_rms_epsilon': f32(c.rmsNormEps), 'llama.rope.freq_base': f32(c.ropeTheta),
    'tokenizer.ggml.model': str('llama'),
    'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: pieces },
    'tokenizer.ggml.scores': { type: 'array', elem: 'f32', value: pieces.map((_, i) => (types[i] === 1 ? -i : 0)) },
    'tokenizer.ggml.token_type': { type: 'array', elem: 'i32', value: types },
    'tokenizer.ggml.bos_token_id': u32(1), 'tokenizer.ggml.eos_token_id': u32(2), 'tokenizer.ggml.unknown_token_id': u32(0),
  };
  writeGguf(file, meta, tensors);
}

describe('stories260K as a llama GGUF', () => {
  const f32File = path.join(tmp, 'stories260K-f32.gguf');
  const f16File = path.join(tmp, 'stories260K-f16.gguf');
  writeStoriesGguf(f32File, 0);
  writeStoriesGguf(f16File, 1);

  it('tokenizes with its SentencePiece pieces and scores as its tokenizer.json does', () => {
    const fromGguf = ChatTokenizer.load(f32File);
    const fromFolder = ChatTokenizer.load(DIR);
    expect(fromGguf.encode('Once upon a time', true)).toEqual(reference.prompt_ids);
    for (const text of ['Once upon a time, there was a little girl named Lily.', 'She said: "I\'m 3 years old!"\n\nThe end.', '  two  spaces, émigré 😀 ünïcode', 'tom\'s dog']) {
      expect(fromGguf.encode(text, true), text).toEqual(fromFolder.encode(text, true));
      expect(fromGguf.decode(fromFolder.encode(text))).toBe(fromFolder.decode(fromFolder.encode(text)));
    }
    expect(fromGguf.bosTokenId).toBe(1);
    expect(fromGguf.eosTokenIds).toEqual([2]);
  });

  it('reproduces llama2.c\'s 200 greedy tokens from BOS (F32 weights, q/k rows put back)', async () => {
    const model = await LocalModel.load(f32File);
    try {
      const out = await model.generate([1], { maxNewTokens: 200, stopTokenIds: [] });
      expect([1, ...out.tokens]).toEqual(reference.bos_greedy_200_ids);
    } finally {
      await model.close();
    }
  });

  it('runs on F16 weights, close to F32 (fp16 rounding only)', async () => {
    const [a, b] = [await LocalModel.load(f32File), await LocalModel.load(f16File)];
    try {
      const rows = [{ inputIds: reference.bos_greedy_200_ids.slice(0, 64), responseStart: 1 }];
      const [x, y] = [(await a.score(rows))[0]!, (await b.score(rows))[0]!];
      expect(Math.max(...x.map((v, i) => Math.abs(v - y[i]!)))).toBeLessThan(0.02);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
