// The decode cache's bookkeeping (docs/design.md §Batched generation): new keys land in the
// next slots, capacity grows in blocks without losing what the rows hold (in place within the
// slots reserved for it), rows can be picked
// (and repeated), and the mask and positions fed to the graph follow the filled slots.
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { KvCache, SLOT_BLOCK } from '../../src-main/model/kv-cache.js';
import { ort } from '../../src-main/model/ort-session.js';

const config = { numLayers: 2, numKvHeads: 2, headDim: 3 } as ModelConfig;

type Entry = (layer: number, row: number, head: number, token: number) => number;

/**
 * Fake graph outputs for `rows` rows of T tokens: by default value = 1000·layer + 100·row +
 * 10·head + tag + token (+0.5 for values); `entry` gives another.
 */
function outputs(rows: number, T: number, tag: number, entry: Entry = (i, r, h, t) => 1000 * i + 100 * r + 10 * h + tag + t): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  for (let i = 0; i < config.numLayers; i++) {
    for (const [kind, extra] of [['key', 0], ['value', 0.5]] as const) {
      const data = new Float32Array(rows * 2 * T * 3);
      for (let r = 0; r < rows; r++) for (let h = 0; h < 2; h++) for (let t = 0; t < T; t++) {
        data.fill(entry(i, r, h, t) + extra, ((r * 2 + h) * T + t) * 3, ((r * 2 + h) * T + t + 1) * 3);
      }
      out[`new_${kind}_${i}`] = new ort.Tensor('float32', data, [rows, 2, T, 3]);
    }
  }
  return out;
}

/** Slot s of row r, head h, layer i, as fed to the graph (first element of the head vector). */
function fedKey(feeds: Record<string, ort.Tensor>, i: number, r: number, h: number, s: number): number {
  const t = feeds[`past_key_${i}`]!;
  const slots = t.dims[2]!;
  return (t.data as Float32Array)[((r * 2 + h) * slots + s) * 3]!;
}

describe('KvCache', () => {
  it('starts with one block of masked slots, so the graph never sees an empty past', () => {
    const cache = KvCache.empty(config, 2);
    const feeds = cache.feeds([[5, 6], [7, 8]], [[0, 1], [1, 1]]);
    expect(feeds.past_key_0!.dims).toEqual([2, 2, SLOT_BLOCK, 3]);
    expect(feeds.attention_mask!.dims).toEqual([2, SLOT_BLOCK + 2]);
    const mask = Array.from(feeds.attention_mask!.data as BigInt64Array, Number);
    expect(mask.slice(0, SLOT_BLOCK).every((m) => m === 0)).toBe(true);
    expect(mask.slice(SLOT_BLOCK, SLOT_BLOCK + 2)).toEqual([0, 1]);
    expect(Array.from(feeds.position_ids!.data as BigInt64Array, Number)).toEqual([0, 0, 0, 1]);
  });

  it('writes each step into the next slots and keeps them when it grows past a block', () => {
    const cache = KvCache.empty(config, 2);
    const prefill = SLOT_BLOCK - 1;
    cache.append(outputs(2, prefill, 0), [new Array(prefill).fill(1), [0, ...new Array(prefill - 1).fill(1)]]);
    cache.append(outputs(2, 1, 500), [[1], [1]]);
    cache.append(outputs(2, 1, 600), [[1], [1]]); // slot SLOT_BLOCK: a second block
    expect(cache.realTokens()).toEqual([SLOT_BLOCK + 1, SLOT_BLOCK]);
    const feeds = cache.feeds([[1], [2]], [[1], [1]]);
    expect(feeds.past_key_1!.dims).toEqual([2, 2, 2 * SLOT_BLOCK, 3]);
    expect(fedKey(feeds, 1, 1, 1, 4)).toBe(1000 + 100 + 10 + 4);
    expect(fedKey(feeds, 1, 1, 1, prefill)).toBe(1000 + 100 + 10 + 500);
    expect(fedKey(feeds, 0, 0, 0, SLOT_BLOCK)).toBe(600);
    expect((feeds.past_value_0!.data as Float32Array)[SLOT_BLOCK * 3]).toBe(600.5);
    const mask = Array.from(feeds.attention_mask!.data as BigInt64Array, Number);
    const row1 = mask.slice(2 * SLOT_BLOCK + 1);
    expect(row1.slice(0, SLOT_BLOCK + 1)).toEqual([0, ...new Array(SLOT_BLOCK).fill(1)]);
    expect(row1.slice(SLOT_BLOCK + 1, 2 * SLOT_BLOCK).every((m) => m === 0)).toBe(true);
    expect(row1.at(-1)).toBe(1);
    expect(Array.from(feeds.position_ids!.data as BigInt64Array, Number)).toEqual([SLOT_BLOCK + 1, SLOT_BLOCK]);
  });

  it('grows in place within the slots reserved for it, keeping every row and head and zeroing the new slots', () => {
    const prompt = 2 * SLOT_BLOCK + 5;
    const cache = KvCache.empty(config, 2, prompt + 10);
    // Each slot's keys hold a number no other row, head or slot has: 1000·row + 0.25·head + slot.
    for (let start = 0; start < prompt; start += 7) {
      const T = Math.min(7, prompt - start);
      cache.append(outputs(2, T, start, (_, r, h, t) => 1000 * r + 0.25 * h + start + t), [new Array(T).fill(1), new Array(T).fill(1)]);
    }
    const feeds = cache.feeds([[0], [0]], [[1], [1]]);
    const slots = 3 * SLOT_BLOCK;
    expect(feeds.past_key_1!.dims).toEqual([2, 2, slots, 3]);
    for (let r = 0; r < 2; r++) for (let h = 0; h < 2; h++) {
      const head = Array.from({ length: slots }, (_, s) => fedKey(feeds, 1, r, h, s));
      expect(head.slice(0, prompt)).toEqual(Array.from({ length: prompt }, (_, s) => 1000 * r + 0.25 * h + s));
      expect(head.slice(prompt).every((v) => v === 0)).toBe(true);
    }
    // The fed view lies in the memory allocated for the reservation: no copy was made to grow.
    expect((feeds.past_key_1!.data as Float32Array).buffer.byteLength).toBe(2 * 2 * 3 * slots * 4);
  });

  it('select picks rows in order, repeating one for a prompt with several sequences', () => {
    const cache = KvCache.empty(config, 2);
    cache.append(outputs(2, 3, 0), [[1, 1, 1], [0, 1, 1]]);
    const picked = cache.select([1, 1, 0]);
    expect(picked.rows).toBe(3);
    expect(picked.realTokens()).toEqual([2, 2, 3]);
    picked.append(outputs(3, 1, 50), [[1], [1], [1]]);
    const feeds = picked.feeds([[1], [1], [1]], [[1], [1], [1]]);
    expect(fedKey(feeds, 0, 0, 1, 2)).toBe(100 + 10 + 2);
    expect(fedKey(feeds, 0, 1, 1, 2)).toBe(100 + 10 + 2);
    expect(fedKey(feeds, 0, 2, 0, 1)).toBe(1);
    expect(fedKey(feeds, 0, 1, 0, 3)).toBe(100 + 50);
    expect(cache.realTokens()).toEqual([3, 2]); // the original is untouched
  });

  it('dropping finished rows moves the rest down in the same memory, and they grow on from there', () => {
    const cache = KvCache.empty(config, 4, 2 * SLOT_BLOCK);
    cache.append(outputs(4, 3, 0), [[1, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1]]);
    const buffer = (cache.feeds([[1], [1], [1], [1]], [[1], [1], [1], [1]]).past_key_0!.data as Float32Array).buffer;
    const kept = cache.select([1, 2]);
    expect(kept.rows).toBe(2);
    expect(kept.realTokens()).toEqual([3, 2]);
    // Past the first block, within the slots reserved: still the same memory.
    kept.append(outputs(2, SLOT_BLOCK, 50), [new Array(SLOT_BLOCK).fill(1), new Array(SLOT_BLOCK).fill(1)]);
    const feeds = kept.feeds([[1], [1]], [[1], [1]]);
    expect((feeds.past_key_0!.data as Float32Array).buffer).toBe(buffer);
    expect(feeds.past_key_0!.dims).toEqual([2, 2, 2 * SLOT_BLOCK, 3]);
    for (const [to, from] of [[0, 1], [1, 2]]) {
      for (let h = 0; h < 2; h++) {
        expect(fedKey(feeds, 1, to!, h, 2)).toBe(1000 + 100 * from! + 10 * h + 2);
        expect(fedKey(feeds, 1, to!, h, 3)).toBe(1000 + 100 * to! + 10 * h + 50);
        expect(fedKey(feeds, 1, to!, h, 3 + SLOT_BLOCK)).toBe(0);
      }
    }
  });

  describe('joining carried rows (./carried-rows.ts)', () => {
    /** A batch of 4 rows, 3 slots written (row 2 left-padded), with room for 2 blocks; and a 1-row cache of 2 slots (keys 700 + token). */
    const batch = () => {
      const cache = KvCache.empty(config, 4, 2 * SLOT_BLOCK);
      cache.append(outputs(4, 3, 0), [[1, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1]]);
      const single = KvCache.empty(config, 1);
      single.append(outputs(1, 2, 700), [[1, 1]]);
      return { cache, single };
    };
    const mask = (feeds: Record<string, ort.Tensor>, r: number, slots: number) => Array.from(feeds.attention_mask!.data as BigInt64Array, Number).slice(r * (slots + 1), r * (slots + 1) + slots);

    it("keeps the last batch's rows in its memory, in their order, then writes the others after them", () => {
      const { cache, single } = batch();
      const buffer = (cache.feeds([[1], [1], [1], [1]], [[1], [1], [1], [1]]).past_key_0!.data as Float32Array).buffer;
      // Parts: batch row 3, the single row, nothing (a new prompt), batch row 1.
      const { cache: joined, order } = KvCache.joined(config, [{ cache, row: 3 }, { cache: single, row: 0 }, undefined, { cache, row: 1 }], 8);
      expect(order).toEqual([3, 0, 1, 2]);
      expect(joined.rows).toBe(4);
      expect(joined.realTokens()).toEqual([3, 3, 2, 0]);
      const feeds = joined.feeds([[1], [1], [1], [1]], [[1], [1], [1], [1]]);
      expect((feeds.past_key_0!.data as Float32Array).buffer).toBe(buffer);
      for (let h = 0; h < 2; h++) {
        for (let s = 0; s < 3; s++) {
          expect(fedKey(feeds, 1, 0, h, s)).toBe(1000 + 100 * 1 + 10 * h + s);
          expect(fedKey(feeds, 1, 1, h, s)).toBe(1000 + 100 * 3 + 10 * h + s);
          // The single row's two slots, then a masked one; the new prompt's row empty (cleared of what batch row 3 held).
          expect(fedKey(feeds, 1, 2, h, s)).toBe(s < 2 ? 1000 + 10 * h + 700 + s : 0);
          expect(fedKey(feeds, 1, 3, h, s)).toBe(0);
        }
      }
      expect(mask(feeds, 2, SLOT_BLOCK).slice(0, 3)).toEqual([1, 1, 0]);
      expect(mask(feeds, 3, SLOT_BLOCK).slice(0, 3)).toEqual([0, 0, 0]);
    });

    it('cuts a part to its first tokens: the slots past them masked and zero, in place or copied', () => {
      for (const room of [true, false]) {
        const { cache, single } = batch();
        // Batch row 2 is [pad, t1, t2]: its first real token ends at slot 2. Without room: a fifth part.
        const parts = [{ cache, row: 2, tokens: 1 }, { cache: single, row: 0, tokens: 1 }, ...(room ? [] : [undefined, undefined, undefined])];
        const { cache: joined, order } = KvCache.joined(config, parts, 8);
        expect(order.slice(0, 2)).toEqual([0, 1]);
        expect(joined.realTokens().slice(0, 2)).toEqual([1, 1]);
        const tokens = Array.from({ length: joined.rows }, () => [1]);
        const feeds = joined.feeds(tokens, tokens);
        const slots = feeds.past_key_0!.dims[2]!;
        expect(mask(feeds, 0, slots).slice(0, 3)).toEqual([0, 1, 0]);
        expect(mask(feeds, 1, slots).slice(0, 3)).toEqual([1, 0, 0]);
        for (let h = 0; h < 2; h++) {
          expect(fedKey(feeds, 1, 0, h, 1)).toBe(1000 + 200 + 10 * h + 1);
          expect(fedKey(feeds, 1, 0, h, 2)).toBe(0);
          expect(fedKey(feeds, 1, 1, h, 0)).toBe(1000 + 10 * h + 700);
          expect(fedKey(feeds, 1, 1, h, 1)).toBe(0);
        }
      }
    });

    it('copies every part into new memory, in the order given, when the batch has no room for them all', () => {
      const { cache, single } = batch();
      const parts = [{ cache, row: 2 }, { cache: single, row: 0 }, { cache, row: 0 }, undefined, { cache, row: 1 }];
      const { cache: joined, order } = KvCache.joined(config, parts, 8);
      expect(order).toEqual([0, 1, 2, 3, 4]);
      expect(joined.realTokens()).toEqual([2, 2, 3, 0, 3]);
      const feeds = joined.feeds([[1], [1], [1], [1], [1]], [[1], [1], [1], [1], [1]]);
      expect(fedKey(feeds, 0, 0, 1, 2)).toBe(200 + 10 + 2);
      expect(fedKey(feeds, 0, 1, 1, 1)).toBe(10 + 700 + 1);
      expect(fedKey(feeds, 0, 4, 0, 2)).toBe(100 + 2);
      expect(mask(feeds, 0, SLOT_BLOCK).slice(0, 3)).toEqual([0, 1, 1]);
      // The batch itself is untouched.
      expect(fedKey(cache.feeds([[1], [1], [1], [1]], [[1], [1], [1], [1]]), 0, 0, 1, 2)).toBe(10 + 2);
    });
  });
});
