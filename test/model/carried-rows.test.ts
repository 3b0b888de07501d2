// Later batches continuing earlier sequences' cache rows (src-main/model/carried-rows.ts;
// docs/design.md §Rollouts, "Later turns continue the cache"): a batch whose prompts are the
// sequences of an earlier batch with more tokens after them (a reply's end and a tool's turn)
// gives, with the rows carried, what it gives prefilled whole: the same tokens and log-probs
// within float rounding, token by token and in chunks (CUDA's loop, here on the CPU), with
// prompts of several lengths, several sequences a prompt, rows that ended early, a prompt that
// continues nothing, and one carried row going to two prompts' only one.
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ModelEngine, type BatchPrompt } from '../../src-main/model/inference-engine.js';
import type { GeneratedTokens } from '../../src-main/model/batch-decode.js';
import { CarriedRows } from '../../src-main/model/carried-rows.js';
import { KvCache } from '../../src-main/model/kv-cache.js';
import { seededRandom } from '../../src-main/model/sampling.js';

const STORIES = path.resolve('resources/models/stories260K');

afterEach(() => vi.restoreAllMocks());

function expectSame(carried: GeneratedTokens[], whole: GeneratedTokens[]): void {
  expect(carried.map((s) => s.tokens)).toEqual(whole.map((s) => s.tokens));
  expect(carried.map((s) => s.finishReason)).toEqual(whole.map((s) => s.finishReason));
  carried.forEach((s, i) => s.logprobs.forEach((x, k) => expect(Math.abs(x - whole[i]!.logprobs[k]!)).toBeLessThan(1e-4)));
}

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
    expect(store.size).toBe(0);
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
});
