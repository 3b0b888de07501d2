// The decode cache in fp16 (src-main/model/kv-cache.ts cachePrecision, docs/design.md §Memory for
// inference): where an fp32 cache would cut a model's chats short of its positions on the CPU,
// the memory check holds it in fp16, half the bytes, so a chat twice as long fits
// (src-shared/inference-memory.ts fittingChat). Here: the estimate and the choice, and what the
// rounding costs the log-probs of the demo model, a trained one (stories260K), through the host
// cache's paths: a prefill and one token a step past several blocks of slots, and a batch of
// prompts of several lengths (padding, a row that ends early). Carried rows: carried-rows.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { estimateInferenceMemory, fittingChat } from '../../src-shared/inference-memory.js';
import type { ModelShape } from '../../src-shared/train-memory.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { UserError } from '../../src-shared/types.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const GiB = 2 ** 30;
const QWEN3_8B: ModelShape = { hiddenSize: 4096, intermediateSize: 12288, numLayers: 36, numHeads: 32, numKvHeads: 8, headDim: 128, vocabSize: 151936, tieWordEmbeddings: false, maxPositionEmbeddings: 40960 };
const STORIES = path.resolve('resources/models/stories260K');
const maxAbsDiff = (a: readonly number[], b: readonly number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i]!)));

describe('the chat an fp16 cache holds', () => {
  it('costs half the bytes, and is chosen on the CPU only where fp32 would hold fewer tokens than the positions', () => {
    const load = { quantize: 'int4' as const, contextTokens: 8192 };
    const full = estimateInferenceMemory(QWEN3_8B, load), half = estimateInferenceMemory(QWEN3_8B, { ...load, cachePrecision: 'fp16' });
    expect(half.cache).toBe(full.cache / 2);
    // One layer's keys and values read as fp32 beside it.
    expect(half.activations - full.activations).toBe(full.cache / QWEN3_8B.numLayers);
    // Qwen3-8B in int4 on a 16 GB laptop (10 GB available): some 14,000 tokens in fp32, about twice that in fp16.
    const laptop = { host: 10 * GiB, gpu: null };
    const fp32 = fittingChat(QWEN3_8B, { quantize: 'int4' }, laptop, false);
    const fp16 = fittingChat(QWEN3_8B, { quantize: 'int4' }, laptop, true);
    expect(fp32).toEqual({ tokens: expect.any(Number), cachePrecision: 'fp32' });
    expect(fp16.cachePrecision).toBe('fp16');
    expect(fp16.tokens / fp32.tokens).toBeGreaterThan(1.8);
    expect(fp16.tokens).toBeLessThan(2 * fp32.tokens + 1024);
    // With room for every position in fp32, fp32 stays (the fp16 cache is slower to read at long chats).
    expect(fittingChat(QWEN3_8B, { quantize: 'int4' }, { host: 48 * GiB, gpu: null }, true)).toEqual({ tokens: 40960, cachePrecision: 'fp32' });
  });
});

describe("the demo model's log-probs through an fp16 cache", () => {
  const fp32 = ModelEngine.open(STORIES, { threads: 1, graphCache: false });
  const fp16 = ModelEngine.open(STORIES, { threads: 1, graphCache: false, cachePrecision: 'fp16', prefillPiece: 16 });
  afterAll(() => Promise.all([fp32.close(), fp16.close()]));
  /** A story the model itself tells (sampled): text as it reads it, where rounding weighs what it would in use. */
  const story = async (length: number, seed: number) => [1, ...(await fp32.generate([1], { temperature: 1, seed, maxNewTokens: length - 1, stopTokenIds: [] })).tokens];
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  /** Each log-prob's distance from fp32's: at most `max`, on average under a tenth of it, and not all 0. */
  const expectNear = (rounded: number[], exact: number[], max: number) => {
    const drift = rounded.map((x, i) => Math.abs(x - exact[i]!));
    expect(Math.max(...drift)).toBeLessThan(max);
    expect(mean(drift)).toBeLessThan(max / 10);
    expect(Math.max(...drift)).toBeGreaterThan(0);
  };

  // Measured: at most 0.0099 nats, 0.00084 on average, over this story's 230 tokens (SmolLM2-135M's
  // GGUF, over a 250-token reply: 0.0051 and 0.0006; docs/design.md §Memory for inference).
  it('a prefill and one token a step, past several blocks of slots: within 0.02 nats of the fp32 score', async () => {
    const row = { inputIds: await story(250, 3), responseStart: 20 };
    const [exact] = await fp32.score([row]);
    expectNear(await fp16.scoreIncremental(row), exact!, 0.02);
  });

  it('a batch of prompts of several lengths, sampled: each sequence scores as fp32 scores it, within 0.02 nats', async () => {
    const text = await story(120, 5);
    const prompts = [{ promptIds: text.slice(0, 90), seeds: [1, 2] }, { promptIds: text.slice(0, 7), seeds: [3] }, { promptIds: text.slice(0, 40), seeds: [4], maxNewTokens: 5 }];
    const sequences = (await fp16.generateBatch(prompts, { temperature: 1, maxNewTokens: 40, stopTokenIds: [] })).flat();
    const promptOf = prompts.flatMap((p) => p.seeds.map(() => p.promptIds));
    expect(sequences.map((s) => s.tokens.length)).toEqual([40, 40, 40, 5]);
    const scored = await fp32.score(sequences.map((s, i) => ({ inputIds: [...promptOf[i]!, ...s.tokens], responseStart: promptOf[i]!.length })));
    expectNear(sequences.flatMap((s) => s.logprobs), scored.flat(), 0.02);
  });

  it('is the CPU\'s host cache only: refused beside the decode chunk graph', () => {
    expect(() => ModelEngine.open(STORIES, { cachePrecision: 'fp16', decodeInGraph: true })).toThrow(UserError);
  });
});

// Every family's generate graph reads the fp16 cache where its attention does: Gemma's and OLMo 3's
// sliding layers, SmolLM3's layers without RoPE, Granite's multipliers, Phi-3's and GLM-4's fused
// projections (tiny random models of four layers; trained ones drift as the demo model above).
describe('every family through an fp16 cache', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'half-cache-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const family of ['gemma2', 'gemma3', 'phi3', 'glm4', 'olmo3', 'granite', 'ministral3', 'smollm3', 'qwen2'] as const) {
    it(`${family}: a prefill and one token a step within 5e-3 of the fp32 score`, async () => {
      const model = writeTinyModel(path.join(dir, family), { family, numLayers: 4 }).dir;
      const fp32 = ModelEngine.open(model, { threads: 1, graphCache: false });
      const fp16 = ModelEngine.open(model, { threads: 1, graphCache: false, cachePrecision: 'fp16' });
      try {
        const row = { inputIds: Array.from({ length: 120 }, (_, i) => 5 + ((i * 13) % 50)), responseStart: 30 };
        const [exact] = await fp32.score([row]);
        const rounded = await fp16.scoreIncremental(row);
        expect(rounded.every(Number.isFinite)).toBe(true);
        expect(maxAbsDiff(rounded, exact!)).toBeLessThan(5e-3);
      } finally {
        await Promise.all([fp32.close(), fp16.close()]);
      }
    });
  }
});
