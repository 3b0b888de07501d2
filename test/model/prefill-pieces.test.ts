// A prompt's prefill in pieces (docs/design.md §Batched generation, "Long prompts"): the
// generate graph gets at most `prefillPiece` tokens per row per step, and the padding and the
// positions carry on across the steps. A scripted runner stands in for the graph here to
// record what it is fed; test/model/decoder.test.ts checks the tokens against a prefill in one
// step, and test/model/kv-cache.test.ts the cache's growth within the room reserved for the
// prompt and its reply.
import { describe, expect, it } from 'vitest';
import { generateSequences, type DecodeSettings } from '../../src-main/model/batch-decode.js';
import type { ModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { ort } from '../../src-main/model/ort-session.js';

const config = { numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 3, vocabSize: 5 } as ModelConfig;

/** Per step: the tokens fed, their mask and positions, and how many past slots the graph saw. */
interface Step { ids: number[][]; mask: number[][]; positions: number[][]; pastSlots: number }

/** A runner that records each step and gives token 1 the highest log-prob; keys = the token id. */
function scriptedRun(steps: Step[]) {
  return async (feeds: Record<string, ort.Tensor>) => {
    const [R, T] = feeds.input_ids!.dims as [number, number];
    const rows = (t: ort.Tensor) => Array.from({ length: R }, (_, r) => Array.from(t.data as BigInt64Array, Number).slice(r * (t.dims[1]!), (r + 1) * t.dims[1]!));
    const pastSlots = feeds.past_key_0!.dims[2]!;
    steps.push({ ids: rows(feeds.input_ids!), mask: rows(feeds.attention_mask!).map((row) => row.slice(pastSlots)), positions: rows(feeds.position_ids!), pastSlots });
    const out: Record<string, ort.Tensor> = { last_logprobs: new ort.Tensor('float32', Float32Array.from({ length: R * 5 }, (_, i) => (i % 5 === 1 ? -0.1 : -5)), [R, 5]) };
    const ids = Array.from(feeds.input_ids!.data as BigInt64Array, Number);
    for (let i = 0; i < config.numLayers; i++) {
      const data = new Float32Array(R * 2 * T * 3).map((_, k) => ids[Math.floor(k / (2 * T * 3)) * T + (Math.floor(k / 3) % T)]!);
      out[`new_key_${i}`] = new ort.Tensor('float32', data, [R, 2, T, 3]);
      out[`new_value_${i}`] = new ort.Tensor('float32', data.slice(), [R, 2, T, 3]);
    }
    return out;
  };
}

const settings: DecodeSettings = { temperature: 0, topP: 1, stopIds: new Set(), stopStrings: [], useKvCache: true, decode: () => '', decodeText: false, prefillPiece: 3 };

describe('prefill in pieces', () => {
  it('feeds at most a piece per row per step, with the padding and positions of one prefill', async () => {
    const steps: Step[] = [];
    const prompts = [[10, 11, 12, 13, 14, 15, 16], [20, 21, 22, 23]];
    const requests = [{ prompt: 0, seed: 1, maxNew: 2 }, { prompt: 1, seed: 2, maxNew: 2 }];
    const outs = await generateSequences(config, scriptedRun(steps), prompts, requests, settings);
    expect(outs.map((o) => o.tokens)).toEqual([[1, 1], [1, 1]]);
    // 7 padded tokens in steps of 3, 3 and 1, then one decode step.
    expect(steps.map((s) => s.ids[0]!.length)).toEqual([3, 3, 1, 1]);
    expect(steps.slice(0, 3).flatMap((s) => s.ids[0])).toEqual(prompts[0]);
    expect(steps.slice(0, 3).flatMap((s) => s.ids[1])).toEqual([0, 0, 0, 20, 21, 22, 23]);
    expect(steps.slice(0, 3).flatMap((s) => s.mask[1])).toEqual([0, 0, 0, 1, 1, 1, 1]);
    expect(steps.slice(0, 3).flatMap((s) => s.positions[0])).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(steps.slice(0, 3).flatMap((s) => s.positions[1])).toEqual([0, 0, 0, 0, 1, 2, 3]);
    expect(steps[3]!.positions).toEqual([[7], [4]]);
  });

  it('a prompt within one piece prefills in one step', async () => {
    const steps: Step[] = [];
    await generateSequences(config, scriptedRun(steps), [[1, 2, 3]], [{ prompt: 0, seed: 1, maxNew: 1 }], settings);
    expect(steps.map((s) => s.ids[0]!.length)).toEqual([3]);
  });
});
