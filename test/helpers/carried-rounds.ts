// Rounds of random batches on one store of carried cache rows (src-main/model/carried-rows.ts),
// run by test/model/carried-rows.test.ts on the host cache and test/model/device-kv-cache.test.ts
// on the GPU's: each round's prompts are made from the last round's sequences, continuing one
// whole, parting from it after a few tokens, or sharing only its first token; one more continues
// nothing (no row begins with its first token). Seeds, budgets and prompt counts are drawn from
// `seed`. Every round's sequences go through `carrying` with the store and `whole` without it,
// and must agree ({@link expectSame}).
import { expect } from 'vitest';
import type { GeneratedTokens } from '../../src-main/model/batch-decode.js';
import type { CarriedRows } from '../../src-main/model/carried-rows.js';
import type { BatchPrompt, ModelEngine } from '../../src-main/model/inference-engine.js';
import { seededRandom } from '../../src-main/model/sampling.js';

/**
 * A carried row never changes what a prompt means: the same tokens and ends, log-probs within
 * float rounding (`tolerance`: an fp16 cache rounds a key that two batches computed a bit apart
 * to fp16 values an ulp apart, 2⁻¹¹ of it).
 */
export function expectSame(carried: GeneratedTokens[], whole: GeneratedTokens[], tolerance = 1e-4): void {
  expect(carried.map((s) => s.tokens)).toEqual(whole.map((s) => s.tokens));
  expect(carried.map((s) => s.finishReason)).toEqual(whole.map((s) => s.finishReason));
  carried.forEach((s, i) => s.logprobs.forEach((x, k) => expect(Math.abs(x - whole[i]!.logprobs[k]!)).toBeLessThan(tolerance)));
}

export async function carriedRounds(carrying: ModelEngine, whole: ModelEngine, carry: CarriedRows, seed: number, rounds = 4, tolerance = 1e-4): Promise<void> {
  const rand = seededRandom(seed);
  const pick = (n: number) => Math.floor(rand() * n);
  const tokens = (n: number) => Array.from({ length: n }, () => 260 + pick(200));
  const options = { temperature: 1, stopTokenIds: [261, 300, 378] };
  let last: number[][] = [[1, ...tokens(6)], [1, ...tokens(2)], [1, ...tokens(9)]];
  for (let round = 0; round < rounds; round++) {
    const prompts: BatchPrompt[] = last.map((ids) => ({ promptIds: ids, seeds: Array.from({ length: 1 + pick(3) }, () => pick(1000)), maxNewTokens: 2 + pick(14) }));
    const carried = (await carrying.generateBatch(prompts, { ...options, carry })).flat();
    expectSame(carried, (await whole.generateBatch(prompts, options)).flat(), tolerance);
    const ended = prompts.flatMap((p) => p.seeds.map(() => p.promptIds)).map((ids, i) => [...ids, ...carried[i]!.tokens]);
    last = ended.slice(0, 5).map((ids) => {
      const kind = pick(3);
      if (kind === 0) return [...ids, ...tokens(1 + pick(4))];
      if (kind === 1) return [...ids.slice(0, Math.max(2, ids.length - 1 - pick(6))), ...tokens(1 + pick(3))];
      return [1, ...tokens(1 + pick(8))];
    });
    last.push([2, ...tokens(1 + pick(5))]);
  }
}
