// The decode cache in GPU memory (docs/design.md §Devices, src-main/model/device-kv-cache.ts):
// on WebGPU the keys and values stay on the GPU between steps, written in by the generate graph.
// Its slots hold what the host cache's hold through steps that cross a block, and rows picked and
// repeated; and generation through it gives the host cache's tokens and log-probs: batches whose
// sequences finish at different steps, prompts in pieces, sampling, incremental scoring and
// the check without a cache; and later batches continuing carried rows (./carried-rows.ts) on
// the GPU, which give a whole prefill's tokens and free every row they copied. Runs where a
// WebGPU adapter answers: on the build machines, Mesa's lavapipe (software Vulkan, which .ci/run installs); elsewhere it says so and checks
// only that the option is refused off WebGPU.
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ModelEngine, type BatchPrompt } from '../../src-main/model/inference-engine.js';
import { createSession, ort } from '../../src-main/model/ort-session.js';
import { webGpuAnswers } from '../helpers/webgpu.js';
import { bothCaches, expectSameRuns } from '../helpers/cache-steps.js';
import { carriedRounds, expectSame } from '../helpers/carried-rounds.js';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { CarriedRows, type TakenRow } from '../../src-main/model/carried-rows.js';
import { DeviceKvCache } from '../../src-main/model/device-kv-cache.js';
import { UserError } from '../../src-shared/types.js';
import type { LoraShape } from '../../src-main/model/lora-inputs.js';
import { randomAdapter } from '../../tools/random-adapter.js';

const STORIES = path.resolve('resources/models/stories260K');

/** A WebGPU graph that copies a tensor back to host memory, to read a GPU-resident cache. */
async function hostReader(): Promise<(t: ort.Tensor) => Promise<Float32Array>> {
  const b = new GraphBuilder('read_back');
  b.output(b.identityAs(b.identity(b.input('x', 'float32', ['A', 'B', 'C', 'D'])), 'y'));
  const { session } = await createSession(b.graph, { device: 'webgpu' });
  return async (t) => (await session.run({ x: t })).y!.data as Float32Array;
}

afterEach(() => vi.restoreAllMocks());

const hasWebGpu = await webGpuAnswers('device-kv-cache', 'only the refusal off WebGPU is checked');

describe('the decode cache on the GPU', () => {
  it('is refused where the device cannot hold tensors, in one line', () => {
    expect(() => ModelEngine.open(STORIES, { device: 'cpu', decodeCacheOnDevice: true })).toThrow(UserError);
    expect(() => ModelEngine.open(STORIES, { device: 'cpu', decodeCacheOnDevice: true })).toThrow(/^the decode cache cannot stay on cpu: onnxruntime-node keeps GPU-resident tensors for WebGPU only$/);
  });

  describe.runIf(hasWebGpu)('on WebGPU', () => {
    let read: (t: ort.Tensor) => Promise<Float32Array>;
    beforeAll(async () => {
      read = await hostReader();
    });

    it('holds what the host cache holds and scores what it scores: a padded row, across a block, rows picked and repeated, two tokens a step', async () => {
      const { host, written } = await bothCaches(STORIES, 'webgpu', read);
      expectSameRuns(written, host);
    });

    it('generates what the host cache generates: batches, pieces, sampling, rows leaving, incremental scores', async () => {
      const prompts: BatchPrompt[] = [
        { promptIds: [1, 403, 407, 261, 378], seeds: [1, 2, 3] },
        { promptIds: [1, 9, 10], seeds: [5], maxNewTokens: 7 },
      ];
      const row = { inputIds: [1, 403, 407, 261, 378, 9, 10, 11, 12], responseStart: 4 };
      const results = [];
      for (const decodeCacheOnDevice of [true, false]) {
        const engine = ModelEngine.open(STORIES, { device: 'webgpu', prefillPiece: 2, graphCache: false, decodeCacheOnDevice });
        try {
          results.push({
            sampled: await engine.generateBatch(prompts, { maxNewTokens: 40, temperature: 0.8, stopTokenIds: [] }),
            // 3 + 60 tokens: the cache grows past its first block.
            greedy: await engine.generate([1, 403, 407], { maxNewTokens: 60, stopTokenIds: [] }),
            whole: await engine.generate([1, 403, 407], { maxNewTokens: 6, stopTokenIds: [], useKvCache: false }),
            incremental: await engine.scoreIncremental(row, 2),
          });
        } finally {
          await engine.close();
        }
      }
      const [gpu, host] = results as [typeof results[0], typeof results[0]];
      const close = (a: number[], b: number[]) => {
        expect(a).toHaveLength(b.length);
        a.forEach((x, i) => expect(Math.abs(x - b[i]!)).toBeLessThan(1e-4));
      };
      expect(gpu.sampled.map((p) => p.map((s) => s.tokens))).toEqual(host.sampled.map((p) => p.map((s) => s.tokens)));
      expect(gpu.sampled[1]![0]!.tokens).toHaveLength(7);
      gpu.sampled.flat().forEach((s, i) => close(s.logprobs, host.sampled.flat()[i]!.logprobs));
      expect(gpu.greedy.tokens).toEqual(host.greedy.tokens);
      expect(gpu.greedy.tokens).toHaveLength(60);
      close(gpu.greedy.logprobs, host.greedy.logprobs);
      expect(gpu.whole.tokens).toEqual(gpu.greedy.tokens.slice(0, 6));
      close(gpu.incremental, host.incremental);
      expect(gpu.incremental).toHaveLength(row.inputIds.length - row.responseStart);
    });

    it('uploads each set of LoRA weights once and generates what host-fed weights generate, before and after a new set', async () => {
      const lora: LoraShape = { r: 2, alpha: 4, targets: ['q', 'v', 'down'] };
      const adapter = (seed: number) => randomAdapter(ModelEngine.open(STORIES).config, lora, seed);
      const runs = [];
      for (const decodeCacheOnDevice of [true, false]) {
        const engine = ModelEngine.open(STORIES, { device: 'webgpu', graphCache: false, lora, decodeCacheOnDevice });
        try {
          const story = () => engine.generate([1, 403, 407], { maxNewTokens: 12, stopTokenIds: [] });
          const base = await story();
          engine.setLora(adapter(3));
          const first = await story();
          engine.setLora(adapter(8)); // the first set is freed: no call holds it
          runs.push({ base, first, second: await story(), scores: await engine.score([{ inputIds: [1, 403, 407, 261, 378], responseStart: 2 }]) });
        } finally {
          await engine.close();
        }
      }
      const [gpu, host] = runs as [typeof runs[0], typeof runs[0]];
      for (const key of ['base', 'first', 'second'] as const) {
        expect(gpu[key].tokens).toEqual(host[key].tokens);
        gpu[key].logprobs.forEach((x, i) => expect(Math.abs(x - host[key].logprobs[i]!)).toBeLessThan(1e-4));
      }
      expect(gpu.first.tokens).not.toEqual(gpu.base.tokens); // the adapter really changes the story
      expect(gpu.second.tokens).not.toEqual(gpu.first.tokens);
      gpu.scores[0]!.forEach((x, i) => expect(Math.abs(x - host.scores[0]![i]!)).toBeLessThan(1e-4));
    });

    // test/helpers/carried-rounds.ts's rounds of random batches, as the host cache runs them
    // (test/model/carried-rows.test.ts); then a chat's next turn.
    it('continues carried rows on the GPU: rounds of random batches and a chat turn give a whole prefill\'s tokens, and every row copied is freed', async () => {
      const open = () => ModelEngine.open(STORIES, { device: 'webgpu', graphCache: false, prefillPiece: 4, decodeCacheOnDevice: true });
      const carrying = open(), whole = open();
      const joined = vi.spyOn(DeviceKvCache, 'joined');
      const copies: DeviceKvCache[] = [];
      const rowCopy = DeviceKvCache.prototype.rowCopy;
      vi.spyOn(DeviceKvCache.prototype, 'rowCopy').mockImplementation(async function (this: DeviceKvCache, row: number) {
        const copy = await rowCopy.call(this, row);
        copies.push(copy);
        return copy;
      });
      const disposed = new Set<DeviceKvCache>();
      const dispose = DeviceKvCache.prototype.dispose;
      vi.spyOn(DeviceKvCache.prototype, 'dispose').mockImplementation(function (this: DeviceKvCache) {
        disposed.add(this);
        dispose.call(this);
      });
      try {
        const carry = new CarriedRows();
        await carriedRounds(carrying, whole, carry, 23);
        const parts = joined.mock.calls.flatMap((call) => call[0].filter((p) => p !== undefined) as unknown as TakenRow[]);
        expect(parts.some((p) => p.tokens < p.ids.length)).toBe(true); // rows cut to a shared beginning
        expect(parts.some((p) => p.tokens === p.ids.length)).toBe(true); // and continued whole
        expect(joined.mock.calls.some((call) => call[0].includes(undefined))).toBe(true); // beside a prompt that continues nothing
        carry.clear();
        expect(copies.length).toBeGreaterThan(0);
        expect(copies.filter((c) => !disposed.has(c))).toEqual([]);

        // A chat's next turn: the conversation so far and more, continuing the reply's row on the GPU.
        const chat = { temperature: 0.9, maxNewTokens: 12, stopTokenIds: [] };
        const prompt = [1, 403, 407, 261, 378, 300, 301];
        const first = await carrying.generate(prompt, { ...chat, seed: 1, reusePrefix: true });
        const next = [...prompt, ...first.tokens, 290, 291, 292];
        const calls = joined.mock.calls.length;
        expectSame([await carrying.generate(next, { ...chat, seed: 2, reusePrefix: true })], [await whole.generate(next, { ...chat, seed: 2 })]);
        expect(joined.mock.calls.length).toBe(calls + 1);
        expect(joined.mock.calls.at(-1)![0][0]).toMatchObject({ tokens: prompt.length + first.tokens.length - 1 });
      } finally {
        await Promise.all([carrying.close(), whole.close()]);
      }
      expect(copies.filter((c) => !disposed.has(c))).toEqual([]); // the chat's row too, with the engine
    });
  });
});
