// Checkpoints written by transformers itself (test/interop/py/make_models.py): tiny random Llama,
// Mistral, Phi-3 (fused projections, LongRoPE, Phi-4-mini's partial rotation), Granite (its four
// multipliers), Gemma 2 (soft-capped attention and logits, every other layer sliding), GLM-4 (RoPE over
// adjacent pairs, half of each head; fused gate/up; four norms), Gemma 3 (sliding and global layers, 3 of them; and its multimodal model), SmolLM3 (a layer without RoPE), OLMo 2 (norms after each branch) and 3 (sliding layers, YaRN), Qwen2 and Qwen3 models (hidden 64, 2 layers, GQA), fp32 and bf16, tied and untied heads, a
// Qwen3 with attention_bias (biases on q, k, v and o, which released Qwen3 models leave off), saved
// by save_pretrained with transformers 5's config.json (rope_parameters, dtype). For each one,
// Hindsight's `score` (the CLI, rows batched together) gives transformers' per-token log-probs
// within 1e-4 nats, and greedy generation (LocalModel.generate, temperature 0) gives the tokens
// transformers' generate(do_sample=False) gives. bf16 checkpoints are compared with transformers
// run in fp32 on the same bf16 values (both sides widen them exactly, so the tolerance is the
// same). The tokenizer is tools/tiny-models.ts's byte-level BPE with its ChatML template.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalModel } from '../../src-main/model/local-model.js';
import { runCli } from '../helpers/cli.js';
import { runPython, writeTinyTokenizerFolder } from './helpers.js';
import { maxAbsDiffRows } from '../helpers/numbers.js';
import { interopPython, pythonEnv } from './python.js';

const TOLERANCE = 1e-4;
const MAX_NEW_TOKENS = 20;
const TEXTS = [
  'The cat sat on the mat.',
  'In the beginning there was the word, and the word was with the other words; then came the sentences.',
  // Long enough for positions past 150 (RoPE far from the start, and Llama 3 scaling's low band).
  // 474 tokens, within the models' 512 positions (score refuses a row past them).
  Array.from({ length: 11 }, (_, i) => `Line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n'),
  'a',
];
const PROMPTS = ['Hello, who are you?', 'Write one sentence about the sea.', 'x'];

interface Model {
  name: string; family: 'llama' | 'mistral' | 'phi3' | 'granite' | 'gemma2' | 'gemma3' | 'glm4' | 'smollm3' | 'olmo2' | 'olmo3' | 'ministral3' | 'qwen2' | 'qwen3'; tie: boolean; dtype: 'F32' | 'BF16';
  head_dim?: number; rope_theta?: number; rope_scaling?: Record<string, unknown>; attention_bias?: boolean; sliding_window?: number | null;
  partial_rotary_factor?: number; original_max_position_embeddings?: number; max_position_embeddings?: number;
  embedding_multiplier?: number; attention_multiplier?: number; residual_multiplier?: number; logits_scaling?: number;
  num_hidden_layers?: number; layer_types?: string[]; query_pre_attn_scalar?: number; rope_parameters?: Record<string, unknown>;
  attn_logit_softcapping?: number; final_logit_softcapping?: number;
  multimodal?: boolean;
}
// LongRoPE's short factors for 8 and 6 rotated pairs (Phi-3's head of 16, and Phi-4-mini's 3/4 of it).
const shortFactors = (n: number) => Array.from({ length: n }, (_, i) => 1 + 0.35 * i);
const longRope = (n: number) => ({ rope_type: 'longrope', short_factor: shortFactors(n), long_factor: shortFactors(n).map((f) => 4 * f) });
const LLAMA3_ROPE = { rope_type: 'llama3', factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 64 };
const MODELS: Model[] = [
  { name: 'llama-fp32-untied', family: 'llama', tie: false, dtype: 'F32', rope_theta: 500000, rope_scaling: LLAMA3_ROPE },
  { name: 'llama-bf16-tied', family: 'llama', tie: true, dtype: 'BF16', head_dim: 24 },
  // Mistral: Llama's network under MistralForCausalLM. Nemo's shape (no window, head_dim ≠ hidden/heads),
  // and v0.1's window, here wider than the 512 positions (a narrower one caps them: test/model/mistral-config.test.ts).
  { name: 'mistral-fp32-untied', family: 'mistral', tie: false, dtype: 'F32', head_dim: 24, rope_theta: 1000000, sliding_window: null },
  { name: 'mistral-bf16-window', family: 'mistral', tie: true, dtype: 'BF16', sliding_window: 4096 },
  // Phi-3: fused qkv_proj and gate_up_proj; Phi-3.5-mini's LongRoPE (original context 1,024 of 4,096,
  // so an attention factor of √(1 + ln 4 / ln 1024); every row within it, where transformers keeps
  // the short factors) and Phi-3-mini-4k's window (2,047); Phi-4-mini's
  // partial rotation (3/4 of each head) with tied embeddings.
  { name: 'phi3-fp32-longrope', family: 'phi3', tie: false, dtype: 'F32', rope_scaling: longRope(8), original_max_position_embeddings: 1024, max_position_embeddings: 4096, sliding_window: 2047 },
  { name: 'phi4-bf16-partial-rotary', family: 'phi3', tie: true, dtype: 'BF16', partial_rotary_factor: 0.75, rope_theta: 250000, rope_scaling: longRope(6), original_max_position_embeddings: 1024, max_position_embeddings: 8192 },
  // Granite: Llama's layers with its four multipliers (Granite 3.x's, the attention one for head_dim 16, logits
  // divided by 2 rather than 8 so that the tiny model's distribution stays far from uniform).
  { name: 'granite-bf16-tied', family: 'granite', tie: true, dtype: 'BF16', embedding_multiplier: 12, attention_multiplier: 0.0625, residual_multiplier: 0.22, logits_scaling: 2 },
  // Gemma 2: Gemma's layers without q/k norms, every other one sliding over 16 positions, one RoPE
  // base; attention's scores and the logits soft-capped at 2 and 5 (Gemma 2's are 50 and 30), where
  // this model's values bend them: its raw logits reach 9.6, and lifting both caps moves
  // transformers' log-probs by up to 11 nats (measured on the same init).
  {
    name: 'gemma2-bf16-softcap', family: 'gemma2', tie: true, dtype: 'BF16', head_dim: 16, sliding_window: 16, num_hidden_layers: 3,
    query_pre_attn_scalar: 24, attn_logit_softcapping: 2, final_logit_softcapping: 5,
  },
  // Gemma 3: sliding layers (a 16-position window, so the long text goes far past it) around a global
  // one with Gemma 3 4B's linear RoPE scaling, two RoPE bases, four norms a layer, GELU, √hidden
  // embedding scale, query_pre_attn_scalar in place of head_dim.
  {
    name: 'gemma3-bf16-sliding', family: 'gemma3', tie: true, dtype: 'BF16', head_dim: 16, sliding_window: 16, num_hidden_layers: 3,
    layer_types: ['sliding_attention', 'full_attention', 'sliding_attention'], query_pre_attn_scalar: 24,
    rope_parameters: { full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1000000 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
  },
  // Gemma 3 as its 4B and larger ship: Gemma3ForConditionalGeneration, the text model beside a vision
  // tower, saved as transformers saves it (language_model.model.*, vision_tower.*).
  {
    name: 'gemma3-multimodal-fp32', family: 'gemma3', multimodal: true, tie: true, dtype: 'F32', head_dim: 16, sliding_window: 16, num_hidden_layers: 3,
    layer_types: ['sliding_attention', 'sliding_attention', 'full_attention'], query_pre_attn_scalar: 16,
    rope_parameters: { full_attention: { rope_type: 'default', rope_theta: 1000000 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
  },
  // GLM-4 (0414): q/k/v biases, half of each head turned by RoPE over adjacent pairs (GPT-J's
  // layout), gate and up stored as one gate_up_proj, norms after attention and the MLP as well as
  // before them; untied, as GLM-4-9B is.
  { name: 'glm4-bf16-interleaved', family: 'glm4', tie: false, dtype: 'BF16', attention_bias: true, partial_rotary_factor: 0.5 },
  // SmolLM3: Llama's layers, the 4th without RoPE (its config as transformers writes it: no_rope_layers).
  { name: 'smollm3-bf16-nope', family: 'smollm3', tie: true, dtype: 'BF16', num_hidden_layers: 4, rope_theta: 5000000 },
  // OLMo 2: norms after attention and the MLP only, q and k normed across the whole projection.
  { name: 'olmo2-bf16-untied', family: 'olmo2', tie: false, dtype: 'BF16', rope_theta: 500000 },
  // OLMo 3: OLMo 2's layers, three sliding over 16 positions around a global one with YaRN (×8 over an
  // original 64 positions, so the long row is far into the interpolated band).
  {
    name: 'olmo3-fp32-yarn-sliding', family: 'olmo3', tie: false, dtype: 'F32', num_hidden_layers: 4, sliding_window: 16,
    rope_parameters: {
      full_attention: { rope_type: 'yarn', factor: 8, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, rope_theta: 500000 },
      sliding_attention: { rope_type: 'default', rope_theta: 500000 },
    },
  },
  // Ministral 3: Llama's layers with YaRN (×16 over an original 64 positions, its mscale ratio 1) and
  // Llama 4's query temperature from position 64 on (the long row goes to 474).
  {
    name: 'ministral3-bf16-yarn', family: 'ministral3', tie: false, dtype: 'BF16', max_position_embeddings: 1024,
    rope_parameters: { rope_type: 'yarn', factor: 16, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1, llama_4_scaling_beta: 0.1, rope_theta: 1000000 },
  },
  { name: 'qwen2-fp32-tied', family: 'qwen2', tie: true, dtype: 'F32', rope_theta: 1000000 },
  { name: 'qwen2-bf16-untied', family: 'qwen2', tie: false, dtype: 'BF16' },
  { name: 'qwen3-fp32-untied', family: 'qwen3', tie: false, dtype: 'F32', head_dim: 32, rope_theta: 1000000 },
  { name: 'qwen3-bf16-tied', family: 'qwen3', tie: true, dtype: 'BF16' },
  { name: 'qwen3-fp32-attention-bias', family: 'qwen3', tie: true, dtype: 'F32', attention_bias: true },
];

interface Reference {
  dir: string;
  config: Record<string, unknown>;
  rows: { ids: number[]; start: number; logprobs: number[] }[];
  generations: { prompt: string; prompt_ids: number[]; tokens: number[]; margins: number[] }[];
}

describe.skipIf(!interopPython)('checkpoints written by transformers', () => {
  let tmp: string;
  const refs = new Map<string, Reference>();
  const worst: Record<string, number> = {};
  const greedy = { tokens: 0, ties: 0 };

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-interop-ckpt-'));
    const models = MODELS.map(({ name, ...m }) => ({ dir: writeTinyTokenizerFolder(path.join(tmp, name)), ...m }));
    const spec = { models, texts: TEXTS, prompts: PROMPTS, max_new_tokens: MAX_NEW_TOKENS };
    const out = await runPython(interopPython!, [path.resolve('test/interop/py/make_models.py')], JSON.stringify(spec), pythonEnv());
    (JSON.parse(out) as Reference[]).forEach((r, i) => refs.set(MODELS[i]!.name, r));
  }, 600_000);
  afterAll(() => {
    console.log(`transformers checkpoints vs Hindsight, largest log-prob difference (nats): ${JSON.stringify(worst)}; greedy: ${greedy.tokens} tokens equal, ${greedy.ties} paths parted at a tie`);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('writes transformers 5 configs (rope_parameters, dtype), bf16 and tied heads as asked', () => {
    for (const m of MODELS) {
      const saved = refs.get(m.name)!.config;
      const c = (saved.text_config ?? saved) as Record<string, unknown>; // a multimodal model's text model
      expect(c.rope_parameters, m.name).toMatchObject(m.rope_parameters ?? { rope_theta: m.rope_theta ?? 10000 });
      expect(c.rope_theta, m.name).toBeUndefined();
      expect(c.dtype, m.name).toBe(m.dtype === 'BF16' ? 'bfloat16' : 'float32');
      expect(c.tie_word_embeddings, m.name).toBe(m.tie);
      if (m.attention_bias) expect(c.attention_bias, m.name).toBe(true);
      if (m.family === 'mistral') expect([c.architectures, c.sliding_window], m.name).toEqual([['MistralForCausalLM'], m.sliding_window]);
      if (m.family === 'phi3') expect(c.architectures, m.name).toEqual(['Phi3ForCausalLM']);
      if (m.family === 'gemma3') expect([saved.architectures, c.layer_types, c.sliding_window], m.name).toEqual([[m.multimodal ? 'Gemma3ForConditionalGeneration' : 'Gemma3ForCausalLM'], m.layer_types, m.sliding_window]);
      if (m.family === 'gemma2') expect([saved.architectures, c.layer_types, c.attn_logit_softcapping], m.name).toEqual([['Gemma2ForCausalLM'], ['sliding_attention', 'full_attention', 'sliding_attention'], 2]);
      if (m.family === 'glm4') expect([saved.architectures, (c.rope_parameters as Record<string, unknown>).partial_rotary_factor], m.name).toEqual([['Glm4ForCausalLM'], 0.5]);
      if (m.family === 'smollm3') expect([saved.architectures, c.no_rope_layers], m.name).toEqual([['SmolLM3ForCausalLM'], [1, 1, 1, 0]]);
      if (m.family === 'ministral3') expect([saved.architectures, (c.rope_parameters as Record<string, unknown>).llama_4_scaling_beta], m.name).toEqual([['Ministral3ForCausalLM'], 0.1]);
      if (m.family === 'olmo2') expect(saved.architectures, m.name).toEqual(['Olmo2ForCausalLM']);
      if (m.family === 'olmo3') expect([saved.architectures, c.layer_types], m.name).toEqual([['Olmo3ForCausalLM'], ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention']]);
      if (m.family === 'granite') expect([c.architectures, c.residual_multiplier], m.name).toEqual([['GraniteForCausalLM'], m.residual_multiplier]);
      if (m.rope_scaling?.rope_type === 'longrope') expect(c.rope_parameters, m.name).toMatchObject({ rope_type: 'longrope', short_factor: m.rope_scaling.short_factor });
    }
  });

  for (const m of MODELS) {
    it(`${m.name}: score equals transformers' log-probs within ${TOLERANCE}`, async () => {
      const ref = refs.get(m.name)!;
      const input = path.join(tmp, `${m.name}-rows.jsonl`);
      const out = path.join(tmp, `${m.name}-scored.jsonl`);
      fs.writeFileSync(input, ref.rows.map((r) => JSON.stringify({ input_ids: r.ids, response_start: r.start })).join('\n') + '\n');
      const r = await runCli('score', '--model', ref.dir, '--input', input, '--out', out, '--threads', '1');
      expect(r.code, r.stderr).toBe(0);
      const got = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l).logprobs as number[]);
      const diff = maxAbsDiffRows(got, ref.rows.map((row) => row.logprobs));
      worst[m.name] = diff;
      expect(diff).toBeLessThan(TOLERANCE);
      // The comparison can fail: the model is far from uniform, and the rows differ from each other.
      const spread = Math.max(...ref.rows[2]!.logprobs) - Math.min(...ref.rows[2]!.logprobs);
      expect(spread).toBeGreaterThan(1);
    });

    it(`${m.name}: greedy generate gives transformers' tokens`, async () => {
      const ref = refs.get(m.name)!;
      const model = await LocalModel.load(ref.dir, { threads: 1 });
      try {
        for (const g of ref.generations) {
          const ids = model.promptIds([{ role: 'user', content: g.prompt }], { chatTemplate: true });
          expect(ids, g.prompt).toEqual(g.prompt_ids);
          const got = (await model.generate(ids, { maxNewTokens: MAX_NEW_TOKENS, temperature: 0 })).tokens;
          const split = got.findIndex((t, i) => t !== g.tokens[i]);
          // Only a tie within rounding may send the two greedy paths apart; otherwise every token matches.
          if (split >= 0) {
            expect(g.margins[split], `${g.prompt}: token ${split}: ${got} vs ${g.tokens}`).toBeLessThan(TOLERANCE);
            greedy.ties++;
          } else expect(got, g.prompt).toEqual(g.tokens);
          greedy.tokens += split >= 0 ? split : got.length;
        }
      } finally {
        await model.close();
      }
    });
  }
});
