// Later batches continuing earlier sequences' cache rows (src-main/model/carried-rows.ts;
// docs/design.md §Rollouts, "Later turns continue the cache"): a batch whose prompts are the
// sequences of an earlier batch with more tokens after them (a reply's end and a tool's turn)
// gives, with the rows carried, what it gives prefilled whole: the same tokens and log-probs
// within float rounding, token by token and in chunks (CUDA's loop, here on the CPU), with
// prompts of several lengths, several sequences a prompt, rows that ended early, a prompt that
// continues nothing, the rows joined in the last batch's memory or copied; which row goes to
// which prompt (each row once, whole continuations first, else a shared beginning); and a chat's
// next turn (generate with reusePrefix), continued whole or as far as it shares the last reply's
// tokens, and not at all once the adapter's weights changed or the time it is held has passed;
// and rounds of random batches on one store (an fp16 one too).
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ModelEngine, type BatchPrompt } from '../../src-main/model/inference-engine.js';
import { CarriedRows, REUSE_KEEP_MS, type TakenRow } from '../../src-main/model/carried-rows.js';
import { KvCache } from '../../src-main/model/kv-cache.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import type { LoraShape } from '../../src-main/model/lora-inputs.js';
import { randomAdapter } from '../../tools/random-adapter.js';
import { carriedRounds, expectSame } from '../helpers/carried-rounds.js';

const STORIES = path.resolve('resources/models/stories260K');

afterEach(() => vi.restoreAllMocks());

describe('carried cache rows', () => {
  it('takes, for each prompt, the longest row it continues, each row once, and drops the rest', () => {
    const store = new CarriedRows();
    const cache = KvCache.empty({ numLayers: 1, numKvHeads: 1, headDim: 2 } as never, 1);
    store.keep([1, 2], cache, 0);
    store.keep([1, 2, 3], cache, 0);
    store.keep([1, 2, 3], cache, 0);
    store.keep([9], cache, 0);
    const taken = store.takeFor([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3], [1, 2, 3, 6], [7]]);
    // The longest two go to the first two prompts; [1, 2, 3] itself has nothing left to feed after [1, 2, 3].
    expect(taken.map((r) => r?.ids)).toEqual([[1, 2, 3], [1, 2, 3], [1, 2], undefined, undefined]);
    expect(taken.map((r) => r?.tokens)).toEqual([3, 3, 2, undefined, undefined]);
    expect(store.size).toBe(0);
  });

  it('drops what it keeps once the time given to expireAfter has passed, unless given more time first', () => {
    vi.useFakeTimers();
    try {
      const store = new CarriedRows();
      const cache = KvCache.empty({ numLayers: 1, numKvHeads: 1, headDim: 2 } as never, 1);
      store.keep([1, 2], cache, 0);
      store.expireAfter(1000);
      vi.advanceTimersByTime(900);
      store.expireAfter(1000);
      vi.advanceTimersByTime(900);
      expect(store.size).toBe(1);
      vi.advanceTimersByTime(100);
      expect(store.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('lets a row serve a prompt it shares only a beginning with, once the rows continued whole are given out', () => {
    const store = new CarriedRows();
    const cache = KvCache.empty({ numLayers: 1, numKvHeads: 1, headDim: 2 } as never, 1);
    store.keep([1, 2, 3, 4], cache, 0);
    store.keep([1, 2, 8], cache, 0);
    store.keep([5, 6], cache, 0);
    // The second prompt continues [1, 2, 8] whole, so the first gets [1, 2, 3, 4] cut to its first three; a prompt may not take all of itself.
    const taken = store.takeFor([[1, 2, 3, 9], [1, 2, 8, 8], [5, 6]]);
    expect(taken.map((r) => r && [r.ids, r.tokens])).toEqual([[[1, 2, 3, 4], 3], [[1, 2, 8], 3], [[5, 6], 1]]);
  });

  // With a prompt that continues nothing, the first batch's cache has no room for all five rows,
  // so they are copied; without it, its rows stay in its memory (KvCache.joined).
  for (const decodeInGraph of [false, true]) {
    for (const fresh of [true, false]) {
      it(`a later batch continuing them gives what prefilling whole gives (${decodeInGraph ? 'in chunks' : 'token by token'}, ${fresh ? 'rows copied' : 'rows in place'})`, async () => {
        const engine = ModelEngine.open(STORIES, { threads: 1, graphCache: false, prefillPiece: 3, decodeInGraph });
        try {
          const joined = vi.spyOn(KvCache, 'joined');
          const inPlace = vi.spyOn(KvCache.prototype as unknown as { extendedInPlace: () => KvCache }, 'extendedInPlace');
          const carry = new CarriedRows();
          // Stop ids end some sequences early; budgets end the rest at different lengths.
          const options = { temperature: 1, stopTokenIds: [261, 300, 378] };
          const first: BatchPrompt[] = [
            { promptIds: [1, 403, 407, 261, 378, 300, 301, 302, 303], seeds: [1, 2, 3], maxNewTokens: 21 },
            { promptIds: [1, 500], seeds: [8], maxNewTokens: 11 },
          ];
          const out = (await engine.generateBatch(first, { ...options, carry })).flat();
          expect(carry.size).toBe(4);
          expect(new Set(out.map((s) => s.finishReason))).toEqual(new Set(['eos', 'length']));
          // Each sequence's prompt and tokens, then "a tool's turn" of 1 to 4 tokens; and a prompt that continues nothing.
          const rand = seededRandom(5);
          const sequencePrompts = [0, 0, 0, 1].map((p, i) => [...first[p]!.promptIds, ...out[i]!.tokens, ...Array.from({ length: 1 + (i % 4) }, () => 260 + Math.floor(rand() * 200))]);
          const next: BatchPrompt[] = [
            ...sequencePrompts.map((promptIds, i) => ({ promptIds, seeds: [100 + i], maxNewTokens: 17 })),
            ...(fresh ? [{ promptIds: [1, 404, 405, 406], seeds: [200, 201], maxNewTokens: 9 }] : []),
          ];
          const whole = (await engine.generateBatch(next, options)).flat();
          expect(joined).not.toHaveBeenCalled();
          const carried = (await engine.generateBatch(next, { ...options, carry })).flat();
          expect(joined).toHaveBeenCalledTimes(1);
          // Four prompts continue a row (the fifth starts empty).
          expect(joined.mock.calls[0]![1].map(Boolean)).toEqual([true, true, true, true, ...(fresh ? [false] : [])]);
          expect(inPlace).toHaveBeenCalledTimes(fresh ? 0 : 1);
          expectSame(carried, whole);
          // This batch's rows replaced the first's.
          expect(carry.size).toBe(fresh ? 6 : 4);
        } finally {
          await engine.close();
        }
      });
    }
  }

  it("a chat's next turn (generate with reusePrefix) continues the last reply's cache as far as it begins the same way", async () => {
    const lora: LoraShape = { r: 2, alpha: 4, targets: ['q', 'v'] };
    const reusing = ModelEngine.open(STORIES, { threads: 1, graphCache: false, prefillPiece: 3, lora });
    const fresh = ModelEngine.open(STORIES, { threads: 1, graphCache: false, prefillPiece: 3, lora });
    try {
      const joined = vi.spyOn(KvCache, 'joined');
      const expiring = vi.spyOn(CarriedRows.prototype, 'expireAfter');
      const options = { temperature: 0.9, maxNewTokens: 12, stopTokenIds: [] };
      const prompt = [1, 403, 407, 261, 378, 300, 301];
      const first = await reusing.generate(prompt, { ...options, seed: 1, reusePrefix: true });
      // Held for the next message for a while only.
      expect(expiring).toHaveBeenLastCalledWith(REUSE_KEEP_MS);
      // The next turn: the conversation so far and more; then one that parts from the reply after three tokens.
      const turns = [[...prompt, ...first.tokens, 290, 291, 292], [...prompt, ...first.tokens.slice(0, 3), 500, 501]];
      for (const [t, next] of turns.entries()) {
        const continued = await reusing.generate(next, { ...options, seed: 2 + t, reusePrefix: true });
        expectSame([continued], [await fresh.generate(next, { ...options, seed: 2 + t })]);
        // The first reuses every token the reply's row holds; the second, what it shares with the first's row.
        expect(joined.mock.calls.at(-1)![1][0]!).toMatchObject({ tokens: t === 0 ? prompt.length + first.tokens.length - 1 : prompt.length + 3 });
      }
      // New adapter weights: what the cache holds is the old policy's, so nothing is continued.
      const weights = randomAdapter(reusing.config, lora, 3);
      reusing.setLora(weights);
      fresh.setLora(weights);
      const calls = joined.mock.calls.length;
      const again = turns[1]!;
      expectSame([await reusing.generate(again, { ...options, seed: 7, reusePrefix: true })], [await fresh.generate(again, { ...options, seed: 7 })]);
      expect(joined.mock.calls.length).toBe(calls);
    } finally {
      await Promise.all([reusing.close(), fresh.close()]);
    }
  });

  // test/helpers/carried-rounds.ts's rounds of random batches on one store, three draws. Every
  // round gives what a whole prefill gives, and the draws between them continue rows whole and
  // cut, joined in the last batch's memory (joining by copy is the tests' above).
  for (const decodeInGraph of [false, true]) {
    it(`rounds of random batches on one store give a whole prefill's tokens (${decodeInGraph ? 'in chunks' : 'token by token'})`, async () => {
      const carrying = ModelEngine.open(STORIES, { threads: 1, graphCache: false, prefillPiece: 4, decodeInGraph });
      const whole = ModelEngine.open(STORIES, { threads: 1, graphCache: false, prefillPiece: 4, decodeInGraph });
      const joined = vi.spyOn(KvCache, 'joined');
      const inPlace = vi.spyOn(KvCache.prototype as unknown as { extendedInPlace: () => KvCache }, 'extendedInPlace');
      try {
        for (const draw of [17, 31, 45]) await carriedRounds(carrying, whole, new CarriedRows(), draw);
        const parts = joined.mock.calls.flatMap((call) => call[1].filter((p) => p !== undefined) as unknown as TakenRow[]);
        expect(inPlace.mock.calls.length).toBeGreaterThan(0);
        expect(parts.some((p) => p.tokens < p.ids.length)).toBe(true);
        expect(parts.some((p) => p.tokens === p.ids.length)).toBe(true);
      } finally {
        await Promise.all([carrying.close(), whole.close()]);
      }
    });
  }

  // An fp16 cache (kv-cache.ts cachePrecision): a carried row holds the rounded keys and values
  // a whole prefill reads too when it feeds one token a step, so the two agree, within what
  // rounding a key computed a bit apart to fp16 gives.
  it("rounds of random batches on one fp16 cache give a whole prefill's tokens", async () => {
    const options = { threads: 1, graphCache: false as const, prefillPiece: 1, cachePrecision: 'fp16' as const };
    const carrying = ModelEngine.open(STORIES, options);
    const whole = ModelEngine.open(STORIES, options);
    const joined = vi.spyOn(KvCache, 'joined');
    try {
      await carriedRounds(carrying, whole, new CarriedRows(), 17, 4, 2e-3);
      expect(joined.mock.calls.length).toBeGreaterThan(0);
      expect(joined.mock.results.every((r) => (r.value as { cache: KvCache }).cache.precision === 'fp16')).toBe(true);
    } finally {
      await Promise.all([carrying.close(), whole.close()]);
    }
  });
});
