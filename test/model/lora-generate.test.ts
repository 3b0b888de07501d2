// Generation with live LoRA weights (docs/design.md §Rollouts): the engine's graphs take A/B
// as inputs, so one built session serves every set of weights. With an adapter it generates
// what the merged model generates (greedy: the same tokens; log-probs within 1e-4), with
// B = 0 (and before any setLora) what the base model generates, and new weights take effect
// on the next call without a new session. LocalModel passes the weights to its worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { rolloutPrepack } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { ModelEngine, type GenerateOptions } from '../../src-main/model/inference-engine.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { loraBKey, loraSpecs, type LoraShape } from '../../src-main/model/lora-inputs.js';
import { writeMergedModel } from '../../src-main/train/merge.js';
import { writeTinyModel, type TinyModel } from '../../tools/tiny-models.js';
import { randomAdapter } from '../../tools/random-adapter.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-loragen-'));
const LORA: LoraShape = { r: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] };
const GREEDY: GenerateOptions = { temperature: 0, maxNewTokens: 16, stopTokenIds: [] };
let tiny: TinyModel;
let base: ModelEngine;
let live: ModelEngine;
let merged: ModelEngine;
let weights: Map<string, Float32Array>;
let prompts: number[][];

beforeAll(() => {
  tiny = writeTinyModel(path.join(root, 'm'), { family: 'qwen3', seed: 5 });
  base = ModelEngine.open(tiny.dir, { threads: 1 });
  live = ModelEngine.open(tiny.dir, { threads: 1, lora: LORA });
  weights = randomAdapter(base.config, LORA, 7);
  const specs = loraSpecs(base.config, LORA.targets);
  writeMergedModel(Checkpoint.open(tiny.dir), path.join(root, 'merged'), { ...LORA, targets: [...LORA.targets] }, specs, weights);
  merged = ModelEngine.open(path.join(root, 'merged'), { threads: 1 });
  const t = base.tokenizer;
  prompts = [
    t.encodeChat([{ role: 'user', content: 'where is the cat sitting today?' }], { addGenerationPrompt: true }),
    t.encodeChat([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'and the dog?' }], { addGenerationPrompt: true }),
  ];
});
afterAll(async () => {
  for (const e of [base, live, merged]) await e?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function greedy(engine: ModelEngine) {
  return (await engine.generateBatch(prompts.map((promptIds) => ({ promptIds, seeds: [1] })), GREEDY)).map((p) => p[0]!);
}

function expectSame(got: { tokens: number[]; logprobs: number[] }[], want: { tokens: number[]; logprobs: number[] }[], tolerance: number) {
  got.forEach((g, i) => {
    expect(g.tokens).toEqual(want[i]!.tokens);
    g.logprobs.forEach((lp, j) => expect(Math.abs(lp - want[i]!.logprobs[j]!)).toBeLessThan(tolerance));
  });
}

describe('generation with LoRA tensors as graph inputs', () => {
  it('before any setLora, and with B = 0, generates what the base model generates', async () => {
    const want = await greedy(base);
    expectSame(await greedy(live), want, 1e-5);
    const zeroB = new Map(weights);
    for (const s of live.loraSpecs) zeroB.set(loraBKey(s), new Float32Array(s.outFeatures * LORA.r));
    live.setLora(zeroB);
    expectSame(await greedy(live), want, 1e-5);
  });

  it('with an adapter, generates what the merged model generates (same tokens, log-probs within 1e-4), on the same session', async () => {
    live.setLora(weights);
    const got = await greedy(live);
    const want = await greedy(merged);
    expectSame(got, want, 1e-4);
    // The adapter really changes the output: the check above could not pass by accident.
    const plain = await greedy(base);
    expect(got.some((g, i) => g.tokens.join() !== plain[i]!.tokens.join() || Math.abs(g.logprobs[0]! - plain[i]!.logprobs[0]!) > 1e-3)).toBe(true);
    // Scoring goes through the same inputs: the merged model's log-probs of the same tokens.
    const row = { inputIds: [...prompts[0]!, ...got[0]!.tokens], responseStart: prompts[0]!.length };
    const [liveLp] = await live.score([row]);
    const [mergedLp] = await merged.score([row]);
    liveLp!.forEach((lp, j) => expect(Math.abs(lp - mergedLp![j]!)).toBeLessThan(1e-4));
    // Back to the base with null, on the very same session (no rebuild).
    const sessions = (live as unknown as { sessions: Map<string, Promise<unknown>> }).sessions;
    const before = sessions.get('generate');
    live.setLora(null);
    expectSame(await greedy(live), plain, 1e-5);
    expect(sessions.get('generate')).toBe(before);
  });

  it('refuses weights that do not fit the shape with one-line errors', () => {
    const missing = new Map(weights);
    missing.delete(loraBKey(live.loraSpecs[0]!));
    expect(() => live.setLora(missing)).toThrow(/missing tensor .*lora_B/);
    const wrong = new Map(weights).set(loraBKey(live.loraSpecs[0]!), new Float32Array(3));
    expect(() => live.setLora(wrong)).toThrow(/has 3 values, expected/);
    const extra = new Map(weights).set('base_model.model.lm_head.lora_A.weight', new Float32Array(4));
    expect(() => live.setLora(extra)).toThrow(/unexpected tensor/);
    expect(() => base.setLora(null)).toThrow(/without the lora option/);
  });

  it('a quantised engine takes live LoRA weights too (QLoRA rollouts): int8 generates what the fp32 engine with the adapter does', async () => {
    const quantized = ModelEngine.open(tiny.dir, { threads: 1, lora: LORA, quantize: 'int8' });
    try {
      quantized.setLora(weights);
      live.setLora(weights);
      const got = await greedy(quantized), want = await greedy(live);
      // int8's drift on a tiny random model moves log-probs by hundredths, not the adapter's effect.
      expect(got[0]!.tokens.slice(0, 4)).toEqual(want[0]!.tokens.slice(0, 4));
      const baseTokens = (await greedy(base))[0]!.tokens;
      expect(got[0]!.tokens).not.toEqual(baseTokens);
    } finally {
      await quantized.close();
    }
  });

  it('an fp32 engine without prepacking (an on-policy run\'s rollouts, rolloutPrepack) generates with the adapter what the merged model does', async () => {
    expect(rolloutPrepack('none')).toBe(false);
    const unpacked = ModelEngine.open(tiny.dir, { threads: 1, lora: LORA, prepack: rolloutPrepack('none') });
    try {
      unpacked.setLora(weights);
      expectSame(await greedy(unpacked), await greedy(merged), 1e-4);
    } finally {
      await unpacked.close();
    }
  });

  it('LocalModel.setLora sends the weights to the worker', async () => {
    const model = await LocalModel.load(tiny.dir, { threads: 1, lora: LORA });
    try {
      await model.setLora(weights);
      const out = await model.generate(prompts[0]!, { ...GREEDY, seed: 1 });
      expect(out.tokens).toEqual((await greedy(merged))[0]!.tokens);
    } finally {
      await model.close();
    }
  });
});
