// Generated tiny Llama / Qwen2 / Qwen3 / Gemma 2 and 3 / OLMo 2 / GLM-4 checkpoints (tied and untied, fp32/bf16/fp16, sharded):
// the ONNX decoder must agree with an independent float64 JS forward, with its own KV-cache
// decode, across batching and padding, and be deterministic.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalModel } from '../../src-main/model/local-model.js';
import { checkpointWeights, decoderGraph } from '../../src-main/model/decoder.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import type { ScoreRow } from '../../src-main/model/inference-engine.js';
import { inferenceFusions, type Device } from '../../src-main/model/ort-session.js';
import { writeTinyModel, type TinyModel, type TinyModelOptions } from '../../tools/tiny-models.js';
import { logSoftmaxAt, referenceLogits } from './reference-forward.js';
import { bothCaches, expectSameRuns } from '../helpers/cache-steps.js';
import { maxAbsDiff } from '../helpers/numbers.js';

const VARIANTS: (TinyModelOptions & { label: string })[] = [
  { label: 'qwen3 tied bf16', family: 'qwen3', tie: true, dtype: 'BF16' },
  { label: 'qwen3 untied fp32', family: 'qwen3', seed: 2 },
  { label: 'qwen2 untied bf16', family: 'qwen2', dtype: 'BF16', seed: 3 },
  { label: 'qwen2 tied fp16', family: 'qwen2', tie: true, dtype: 'F16', seed: 4 },
  { label: 'llama untied fp32 (MHA, head_dim = hidden/heads)', family: 'llama', numKvHeads: 4, headDim: 8, seed: 5 },
  { label: 'llama tied bf16 in 3 shards', family: 'llama', tie: true, dtype: 'BF16', shards: 3, seed: 6 },
  // Gemma 3: 3 layers, the first two sliding over 4 positions (rows here are longer), the last global.
  { label: 'gemma3 tied bf16, sliding window', family: 'gemma3', tie: true, dtype: 'BF16', numLayers: 3, seed: 7 },
  // Gemma 2: 3 layers, the first and last sliding over 4 positions, attention and logits soft-capped.
  { label: 'gemma2 tied bf16, soft-capped', family: 'gemma2', tie: true, dtype: 'BF16', numLayers: 3, seed: 9 },
  // GLM-4: RoPE over adjacent pairs on half of each head, gate/up fused, four norms, q/k/v biases.
  { label: 'glm4 untied bf16', family: 'glm4', dtype: 'BF16', seed: 10 },
  // OLMo 2: norms after each branch only, q and k normed whole.
  { label: 'olmo2 untied fp32', family: 'olmo2', seed: 8 },
];

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-decoder-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe.each(VARIANTS)('$label', (variant) => {
  let tiny: TinyModel;
  let model: LocalModel;
  let rows: ScoreRow[];
  beforeAll(async () => {
    tiny = writeTinyModel(path.join(root, variant.label.replace(/\W+/g, '-')), variant);
    model = await LocalModel.load(tiny.dir);
    const t = model.tokenizer;
    rows = [
      t.encodeResponse([{ role: 'user', content: 'where is the cat?' }], 'in the garden, sitting on the wall'),
      t.encodeResponse([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], 'hello'),
      { inputIds: t.encode('a short one'), responseStart: 2 },
    ];
  });
  afterAll(() => model?.close());

  it('the response span starts after the generation prompt and ends with the end-of-turn token', () => {
    const [row] = rows;
    const t = model.tokenizer;
    expect(t.decode(row!.inputIds.slice(row!.responseStart), false)).toBe('in the garden, sitting on the wall<|im_end|>\n');
    expect(t.decode(row!.inputIds.slice(0, row!.responseStart), false)).toBe('<|im_start|>user\nwhere is the cat?<|im_end|>\n<|im_start|>assistant\n');
  });

  it('score matches an independent float64 forward', async () => {
    const scored = await model.score(rows);
    rows.forEach((row, k) => {
      const logits = referenceLogits(tiny, row.inputIds);
      const expected = row.inputIds.slice(row.responseStart).map((tok, i) => logSoftmaxAt(logits[row.responseStart + i - 1]!, tok));
      expect(maxAbsDiff(scored[k]!, expected)).toBeLessThan(1e-4);
    });
  });

  it('score matches incremental KV-cache decoding (prefill + one token per step, and token by token)', async () => {
    const scored = await model.score(rows);
    for (const [k, row] of rows.entries()) {
      expect(maxAbsDiff(scored[k]!, await model.scoreIncremental(row))).toBeLessThan(1e-4);
      expect(maxAbsDiff(scored[k]!, await model.scoreIncremental(row, 1))).toBeLessThan(1e-4);
    }
  });

  it('batching and left/right padding do not change the results; results are deterministic', async () => {
    const single = await model.score(rows, { batchSize: 1 });
    const right = await model.score(rows, { batchSize: 3, padding: 'right' });
    const left = await model.score(rows, { batchSize: 3, padding: 'left' });
    rows.forEach((_, k) => {
      expect(maxAbsDiff(right[k]!, single[k]!)).toBeLessThan(1e-5);
      expect(maxAbsDiff(left[k]!, single[k]!)).toBeLessThan(1e-5);
    });
    expect(await model.score(rows, { batchSize: 3, padding: 'left' })).toEqual(left);
  });

  it('rows past the chunking length score with attention in query chunks as in one piece', async () => {
    const cache = path.join(root, `${variant.label.replace(/\W+/g, '-')}-cache`);
    const chunked = await LocalModel.load(tiny.dir, { attentionChunking: { rows: 4, above: 8 }, graphCache: cache });
    try {
      const [inOnePiece, inChunks] = [await model.score(rows), await chunked.score(rows)];
      inChunks.forEach((row, k) => expect(maxAbsDiff(row, inOnePiece[k]!)).toBeLessThan(1e-5));
      // The batch, padded to its longest row, took the graph with a power of two of chunks of up to 4 rows.
      const chunks = Math.ceil(rows[0]!.inputIds.length / 4);
      const expected = `score_chunks${2 ** Math.ceil(Math.log2(chunks))}-`;
      expect(chunks).toBeGreaterThan(4);
      expect(fs.readdirSync(cache, { recursive: true, encoding: 'utf8' }).some((f) => path.basename(f).startsWith(expected))).toBe(true);
    } finally {
      await chunked.close();
    }
  });

  it('prompts prefilled a few tokens per step generate what a prefill in one step generates', async () => {
    const stepwise = await LocalModel.load(tiny.dir, { prefillPiece: 3 });
    try {
      // Two prompts of different lengths, left-padded together: the first steps are padding
      // only for the shorter one, and neither prompt's length is a multiple of 3.
      const prompts = [rows[0]!.inputIds.slice(0, rows[0]!.responseStart), rows[1]!.inputIds.slice(0, rows[1]!.responseStart)];
      expect(prompts.map((p) => p.length % 3)).not.toContain(0);
      expect(Math.abs(prompts[0]!.length - prompts[1]!.length)).toBeGreaterThan(3);
      const request = { temperature: 1, maxNewTokens: 6, stopTokenIds: [] };
      const batch = prompts.map((prompt, i) => ({ prompt, seeds: [10 + i, 20 + i] }));
      const [inOneStep, inSteps] = [await model.generateBatch(batch, request), await stepwise.generateBatch(batch, request)];
      inSteps.flat().forEach((out, j) => {
        expect(out.tokens).toEqual(inOneStep.flat()[j]!.tokens);
        expect(maxAbsDiff(out.logprobs, inOneStep.flat()[j]!.logprobs)).toBeLessThan(1e-4);
      });
    } finally {
      await stepwise.close();
    }
  });

  it('with WebGPU\'s fusions (no FusedMatMul; each RMSNorm, with its residual add, and each RoPE one op) it scores and generates what the CPU\'s graphs do', async () => {
    const cache = path.join(root, `${variant.label.replace(/\W+/g, '-')}-unfused-cache`);
    const unfused = await LocalModel.load(tiny.dir, { fusions: inferenceFusions('webgpu'), prefillPiece: 3, graphCache: cache });
    try {
      const [fused, plain] = [await model.score(rows, { batchSize: 2 }), await unfused.score(rows, { batchSize: 2 })];
      plain.forEach((row, i) => expect(maxAbsDiff(row, fused[i]!)).toBeLessThan(1e-5));
      const prompt = rows[0]!.inputIds.slice(0, rows[0]!.responseStart);
      const request = { maxNewTokens: 6, stopTokenIds: [] };
      const [a, b] = [await model.generate(prompt, request), await unfused.generate(prompt, request)];
      expect(b.tokens).toEqual(a.tokens);
      expect(maxAbsDiff(b.logprobs, a.logprobs)).toBeLessThan(1e-4);
      // Two prompts of different lengths, left-padded together and sampled: each token's RoPE
      // row follows its padding-aware position as the standard form's does.
      const batch = [rows[0]!, rows[1]!].map((row, i) => ({ prompt: row.inputIds.slice(0, row.responseStart), seeds: [30 + i] }));
      const sampled = { temperature: 1, maxNewTokens: 6, stopTokenIds: [] };
      const [standard, withFusions] = [await model.generateBatch(batch, sampled), await unfused.generateBatch(batch, sampled)];
      withFusions.flat().forEach((out, j) => {
        expect(out.tokens).toEqual(standard.flat()[j]!.tokens);
        expect(maxAbsDiff(out.logprobs, standard.flat()[j]!.logprobs)).toBeLessThan(1e-4);
      });
      // The graphs it ran (kept in its cache) hold no FusedMatMul: an op type is a string in the file.
      const graphs = fs.readdirSync(cache, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.onnx'));
      expect(graphs.map((f) => path.basename(f).split('-')[0]).sort()).toEqual(['generate', 'score']);
      expect(inferenceFusions('webgpu')).toEqual({ fusedScores: false, fusedNorms: true, fusedRope: true, fusedLora: true });
      expect(['cpu', 'cuda'].map((d) => inferenceFusions(d as Device))).toEqual([1, 2].map(() => ({ fusedScores: true, fusedNorms: false, fusedRope: false, fusedLora: false })));
      for (const f of graphs) {
        const file = fs.readFileSync(path.join(cache, f));
        expect(file.includes('FusedMatMul')).toBe(false);
        expect(file.includes('SimplifiedLayerNormalization')).toBe(true);
        expect(file.includes('ReduceMean')).toBe(false); // no norm left in standard ops
        // residual adds fused into the norms after them (OLMo 2 has no norm after an add but the last)
        expect(file.includes('SkipSimplifiedLayerNormalization')).toBe(variant.family !== 'olmo2');
        expect(file.includes('RotaryEmbedding')).toBe(true); // GLM-4's partial rotation too (rotary_embedding_dim)
      }
    } finally {
      await unfused.close();
    }
  });

  it('the generate graph that writes its cache (the GPU-resident cache\'s form) scores what the one the host cache appends to does, and leaves the same slots', async () => {
    const { host, written } = await bothCaches(tiny.dir, 'cpu', async (t) => t.data as Float32Array);
    expectSameRuns(written, host);
    expect(host.slots.get('key_0')!.some((x) => x !== 0)).toBe(true);
  });

  it('a row with nothing to score gives an empty list, alone and beside others', async () => {
    const empty = { inputIds: rows[0]!.inputIds, responseStart: rows[0]!.inputIds.length };
    expect(await model.score([empty])).toEqual([[]]);
    const [alone] = await model.score([rows[1]!]);
    const mixed = await model.score([empty, rows[1]!], { batchSize: 2 });
    expect(mixed[0]).toEqual([]);
    expect(maxAbsDiff(mixed[1]!, alone!)).toBeLessThan(1e-5);
  });

  it('seeded sampling is reproducible and reports the model\'s own log-probs', async () => {
    const prompt = rows[0]!.inputIds.slice(0, rows[0]!.responseStart);
    const opts = { maxNewTokens: 12, temperature: 1, topP: 0.9, seed: 42, stopTokenIds: [] };
    const a = await model.generate(prompt, opts);
    const b = await model.generate(prompt, opts);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.tokens).toHaveLength(12);
    // The reported log-probs are the model's own: scoring the sampled tokens gives them back.
    const [lp] = await model.score([{ inputIds: [...prompt, ...a.tokens], responseStart: prompt.length }]);
    expect(maxAbsDiff(lp!, a.logprobs)).toBeLessThan(1e-4);
  });
});

describe('the score graph', () => {
  it('sends only the scored positions through the LM head: no value is [B, T, vocab]', () => {
    const tiny = writeTinyModel(path.join(root, 'score-graph'), { family: 'qwen3', tie: true });
    const { graph } = decoderGraph(checkpointWeights(Checkpoint.open(tiny.dir)), { output: 'target_logprobs' });
    const vocab = tiny.config.vocab_size as number;
    const vocabWide = [...graph.values.values()].filter((v) => v.shape?.at(-1) === vocab).map((v) => v.shape);
    expect(vocabWide.length).toBeGreaterThan(0);
    for (const shape of vocabWide) expect(shape).toEqual(['N', vocab]);
  });
});
