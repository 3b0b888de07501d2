// Batched generation (docs/design.md §Batched generation): several prompts of different
// lengths, n sequences each, in one batch, give token for token what n single runs with the
// same seeds give, greedy and sampled, with and without the KV cache, through the engine
// and through LocalModel's worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine, type GenerateOptions } from '../../src-main/model/inference-engine.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { sequenceSeeds } from '../../src-main/model/sampling.js';
import { PREFILL_PIECE, prefillPieceAt, prefillPieceFor } from '../../src-main/model/batch-decode.js';
import { writeTinyModel, type TinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-batchgen-'));
let tiny: TinyModel;
let engine: ModelEngine;
let prompts: number[][];
beforeAll(() => {
  tiny = writeTinyModel(path.join(root, 'm'), { family: 'qwen3', seed: 21 });
  engine = ModelEngine.open(tiny.dir, { threads: 1 });
  const t = engine.tokenizer;
  prompts = [
    t.encodeChat([{ role: 'user', content: 'where is the cat sitting today?' }], { addGenerationPrompt: true }),
    t.encode('hi'),
    t.encodeChat([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'and the dog?' }], { addGenerationPrompt: true }),
  ];
});
afterAll(async () => {
  await engine?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const SEEDS = [[11, 12, 13], [5], [7, 8]];

const CASES: { label: string; options: GenerateOptions }[] = [
  { label: 'greedy', options: { temperature: 0, maxNewTokens: 12, stopTokenIds: [] } },
  { label: 'sampled, t = 1.2', options: { temperature: 1.2, maxNewTokens: 12, stopTokenIds: [] } },
  { label: 'sampled, top-p 0.9, stopping on EOS and a stop string', options: { temperature: 1, topP: 0.9, maxNewTokens: 16, stopStrings: ['e'] } },
  { label: 'sampled, without the KV cache', options: { temperature: 0.8, maxNewTokens: 8, useKvCache: false, stopTokenIds: [] } },
];

describe('batched generation equals single runs with the same seeds', () => {
  for (const { label, options } of CASES) {
    it(label, async () => {
      const batch = await engine.generateBatch(prompts.map((promptIds, i) => ({ promptIds, seeds: SEEDS[i]! })), options);
      for (let p = 0; p < prompts.length; p++) {
        expect(batch[p]).toHaveLength(SEEDS[p]!.length);
        for (let j = 0; j < SEEDS[p]!.length; j++) {
          const single = await engine.generate(prompts[p]!, { ...options, seed: SEEDS[p]![j]! });
          const got = batch[p]![j]!;
          expect(got.tokens).toEqual(single.tokens);
          expect(got.finishReason).toBe(single.finishReason);
          expect(got.text).toBe(single.text);
          got.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(single.logprobs[i]!, 4));
        }
      }
      if (options.temperature) {
        // Different seeds of one prompt do differ (the streams are independent).
        const first = batch[0]!.map((s) => s.tokens.join(','));
        expect(new Set(first).size).toBeGreaterThan(1);
      }
    });
  }

  it('one prompt with n sequences shares one prefill (n runs, one prompt row)', async () => {
    const runs: number[] = [];
    const original = (engine as unknown as { session: (w: string) => Promise<{ run: (f: Record<string, { dims: readonly number[] }>) => unknown }> }).session.bind(engine);
    const session = await original('generate');
    const run = session.run.bind(session);
    session.run = (feeds) => {
      runs.push(feeds.input_ids!.dims[0]! * 1000 + feeds.input_ids!.dims[1]!);
      return run(feeds);
    };
    try {
      await engine.generateBatch([{ promptIds: prompts[0]!, seeds: [1, 2, 3] }], { temperature: 1, maxNewTokens: 3, stopTokenIds: [] });
    } finally {
      session.run = run;
    }
    // Prefill: 1 row of the prompt's length; then 3 rows of one token per step.
    expect(runs).toEqual([1000 + prompts[0]!.length, 3001, 3001]);
  });

  it('many rows of a long prompt prefill in pieces of fewer tokens a row (PREFILL_STEP_TOKENS a step), giving what single runs give', async () => {
    // 12 prompts of 300 tokens: 3,600 prompt tokens, so a step takes 170 of each row, where a
    // single run's one row takes 300 in one step.
    expect(prefillPieceFor(12, PREFILL_PIECE)).toBe(170);
    expect(prefillPieceFor(1, PREFILL_PIECE)).toBe(PREFILL_PIECE);
    // And fewer as the keys grow at a real model's heads (Qwen3-8B's 32): one copy of a step's
    // attention scores stays within 256 MiB, so a long chat's next message does not hold scores
    // the size of its cache beside it.
    expect([4096, 8192, 16384, 40960].map((keys) => prefillPieceAt(1, PREFILL_PIECE, 32, keys))).toEqual([512, 256, 128, 51]);
    expect(prefillPieceAt(12, PREFILL_PIECE, 4, 300)).toBe(170);
    const long = Array.from({ length: 12 }, (_, p) => Array.from({ length: 300 }, (_, i) => 3 + ((i * (p + 2)) % 200)));
    const options = { temperature: 0, maxNewTokens: 4, stopTokenIds: [] };
    const batch = await engine.generateBatch(long.map((promptIds) => ({ promptIds, seeds: [1] })), options);
    for (let p = 0; p < long.length; p += 5) {
      const single = await engine.generate(long[p]!, options);
      expect(batch[p]![0]!.tokens).toEqual(single.tokens);
      batch[p]![0]!.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(single.logprobs[i]!, 4));
    }
  });

  it('sequenceSeeds: seed, seed + 1, … (so --n N --seed S equals N runs with seeds S … S + N − 1)', () => {
    expect(sequenceSeeds(41, 3)).toEqual([41, 42, 43]);
    expect(sequenceSeeds(2 ** 32 - 1, 2)).toEqual([2 ** 32 - 1, 0]);
    expect(sequenceSeeds(undefined, 4)).toHaveLength(4);
  });
});

describe('LocalModel.generateBatch (in the worker)', () => {
  let model: LocalModel;
  beforeAll(async () => {
    model = await LocalModel.load(tiny.dir, { threads: 1 });
  });
  afterAll(() => model?.close());

  it('gives what generate gives per seed, parsed the same way, each prompt with its own budget', async () => {
    const request = { temperature: 0.9, maxNewTokens: 10, stopTokenIds: [] };
    const out = await model.generateBatch([
      { prompt: [{ role: 'user', content: 'where is the cat?' }], seeds: [3, 4] },
      { prompt: 'plain text', seeds: [9] },
    ], request);
    expect(out.map((p) => p.length)).toEqual([2, 1]);
    const single = await model.generate([{ role: 'user', content: 'where is the cat?' }], { ...request, seed: 4 });
    expect(out[0]![1]!.tokens).toEqual(single.tokens);
    expect(out[0]![1]!.content).toBe(single.content);
    expect(out[0]![1]!.promptTokens).toBe(single.promptTokens);
    const plain = await model.generate('plain text', { ...request, seed: 9 });
    expect(out[1]![0]!.tokens).toEqual(plain.tokens);
    expect(out[1]![0]!.executionProvider).toBe('cpu');
  });
});
