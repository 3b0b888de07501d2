/**
 * Random checkpoints of real models' shapes for the benches, in Hugging Face layout: fp32
 * weights (normal, std 0.02; norms 1) in safetensors shards of about 2 GB with an index, a
 * config.json as the published one has it, and the real tokenizer files of the family (from
 * the dev dependencies, tools/real-tokenizers.ts). Written tensor by tensor, so a 6 GB
 * model never sits in memory; deterministic in the seed. And the random 125M Llama that most
 * benches measure (LLAMA_125M, written by tools/tiny-models.ts), defined here once.
 *
 *   qwen3-0.6b    Qwen3-0.6B: 28 layers, hidden 1024, 16 / 8 heads of 128, MLP 3072,
 *                 151,936 tokens, tied embeddings, q/k norms                  596M parameters
 *   qwen2.5-1.5b  Qwen2.5-1.5B: 28 layers, hidden 1536, 12 / 2 heads of 128, MLP 8960,
 *                 151,936 tokens, tied embeddings, q/k/v biases              1.54B parameters
 */
import fs from 'node:fs';
import path from 'node:path';
import { seededRandom } from '../src-main/model/sampling.js';
import { writeRealTokenizer, type RealTokenizer } from '../tools/real-tokenizers.js';
import type { TinyModelOptions } from '../tools/tiny-models.js';

/** The random Llama of ~125M parameters most benches measure: hidden 768, 12 layers, 12 / 4 heads of 64, MLP 2048, 32,000 tokens. */
export const LLAMA_125M: TinyModelOptions = {
  family: 'llama', hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, headDim: 64, intermediateSize: 2048, vocabSize: 32000, std: 0.02, seed: 7,
};

export type RealShape = 'qwen3-0.6b' | 'qwen2.5-1.5b';

interface ShapeSpec {
  tokenizer: RealTokenizer;
  config: Record<string, unknown>;
}

const QWEN_COMMON = {
  hidden_act: 'silu', rms_norm_eps: 1e-6, rope_theta: 1_000_000, rope_scaling: null, tie_word_embeddings: true, vocab_size: 151_936,
  bos_token_id: 151_643, eos_token_id: 151_645, torch_dtype: 'float32', use_sliding_window: false, attention_dropout: 0, initializer_range: 0.02,
};

export const REAL_SHAPES: Record<RealShape, ShapeSpec> = {
  'qwen3-0.6b': {
    tokenizer: 'qwen3',
    config: {
      architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', ...QWEN_COMMON, hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28,
      num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128, max_position_embeddings: 40_960, attention_bias: false,
    },
  },
  'qwen2.5-1.5b': {
    tokenizer: 'qwen2.5',
    config: {
      architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', ...QWEN_COMMON, hidden_size: 1536, intermediate_size: 8960, num_hidden_layers: 28,
      num_attention_heads: 12, num_key_value_heads: 2, max_position_embeddings: 32_768,
    },
  },
};

/** Every tensor of the shape, in checkpoint order. */
function tensorShapes(c: Record<string, number | unknown>): [string, number[]][] {
  const H = c.hidden_size as number, L = c.num_hidden_layers as number, nH = c.num_attention_heads as number, nKV = c.num_key_value_heads as number;
  const d = (c.head_dim as number | undefined) ?? H / nH, I = c.intermediate_size as number, V = c.vocab_size as number;
  const qwen3 = c.model_type === 'qwen3', bias = c.model_type === 'qwen2';
  const out: [string, number[]][] = [['model.embed_tokens.weight', [V, H]]];
  for (let i = 0; i < L; i++) {
    const p = `model.layers.${i}`;
    out.push([`${p}.input_layernorm.weight`, [H]]);
    for (const [name, rows] of [['q_proj', nH * d], ['k_proj', nKV * d], ['v_proj', nKV * d]] as const) {
      out.push([`${p}.self_attn.${name}.weight`, [rows, H]]);
      if (bias) out.push([`${p}.self_attn.${name}.bias`, [rows]]);
    }
    if (qwen3) out.push([`${p}.self_attn.q_norm.weight`, [d]], [`${p}.self_attn.k_norm.weight`, [d]]);
    out.push([`${p}.self_attn.o_proj.weight`, [H, nH * d]]);
    out.push([`${p}.post_attention_layernorm.weight`, [H]]);
    out.push([`${p}.mlp.gate_proj.weight`, [I, H]], [`${p}.mlp.up_proj.weight`, [I, H]], [`${p}.mlp.down_proj.weight`, [H, I]]);
  }
  out.push(['model.norm.weight', [H]]);
  return out;
}

const SHARD_BYTES = 2 * 1024 ** 3;

/** Normal(0, std) values (norm weights: 1) from a seeded stream, both Box–Muller outputs used. */
function fill(values: Float32Array, rand: () => number, std: number, isNorm: boolean): void {
  if (isNorm) return void values.fill(1);
  for (let i = 0; i < values.length; i += 2) {
    const r = std * Math.sqrt(-2 * Math.log(Math.max(rand(), 1e-12)));
    const a = 2 * Math.PI * rand();
    values[i] = r * Math.cos(a);
    if (i + 1 < values.length) values[i + 1] = r * Math.sin(a);
  }
}

/** Writes the random checkpoint of `shape` into `dir` unless its index is there already; returns `dir`. */
export function ensureRandomModel(dir: string, shape: RealShape, seed = 1, log: (line: string) => void = (l) => console.error(l)): string {
  const index = path.join(dir, 'model.safetensors.index.json');
  if (fs.existsSync(index)) return dir;
  const spec = REAL_SHAPES[shape];
  const t0 = Date.now();
  fs.mkdirSync(dir, { recursive: true });
  writeRealTokenizer(dir, spec.tokenizer);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(spec.config, null, 2));
  const shapes = tensorShapes(spec.config);
  // Shards of whole tensors, about SHARD_BYTES each.
  const shards: [string, number[]][][] = [[]];
  let size = 0;
  for (const t of shapes) {
    const bytes = 4 * t[1].reduce((a, b) => a * b, 1);
    if (size > 0 && size + bytes > SHARD_BYTES) (shards.push([]), (size = 0));
    shards.at(-1)!.push(t);
    size += bytes;
  }
  const rand = seededRandom(seed);
  const weightMap: Record<string, string> = {};
  let params = 0;
  shards.forEach((tensors, k) => {
    const file = `model-${String(k + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`;
    params += writeShard(path.join(dir, file), tensors, rand);
    for (const [name] of tensors) weightMap[name] = file;
  });
  // The index last: its presence marks a finished model.
  fs.writeFileSync(index, JSON.stringify({ metadata: { total_size: params * 4 }, weight_map: weightMap }, null, 2));
  log(`wrote random ${shape} (${(params / 1e6).toFixed(0)}M parameters) to ${dir} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  return dir;
}

/** One safetensors file, written tensor by tensor; returns its parameter count. */
function writeShard(file: string, tensors: [string, number[]][], rand: () => number): number {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const [name, shape] of tensors) {
    const bytes = 4 * shape.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  let params = 0;
  try {
    fs.writeSync(fd, len);
    fs.writeSync(fd, Buffer.from(json, 'utf8'));
    for (const [name, shape] of tensors) {
      const values = new Float32Array(shape.reduce((a, b) => a * b, 1));
      fill(values, rand, 0.02, name.endsWith('norm.weight'));
      fs.writeSync(fd, new Uint8Array(values.buffer));
      params += values.length;
    }
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  return params;
}
