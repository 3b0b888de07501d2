// One script of decode steps through both forms of the decode cache (docs/design.md §Devices):
// the host cache, after which the generate graph appends ('appended', src-main/model/kv-cache.ts),
// and the written cache, into which the graph writes (src-main/model/device-kv-cache.ts, kvCache
// 'written': GPU-resident on WebGPU, in host memory elsewhere). The script pads a row, crosses a
// block of slots (so the written cache grows through kv_grow once it is written), picks and
// repeats rows and feeds two tokens at once; it returns each step's log-probs and every cached
// tensor's written slots from both, laid out alike ([rows, kvHeads, slots, headDim]).
import { expect } from 'vitest';
import { SLOT_BLOCK, type DecodeCache } from '../../src-main/model/cache-slots.js';
import { checkpointWeights, decoderGraph } from '../../src-main/model/decoder.js';
import { DeviceGraphs, cacheOutputNames } from '../../src-main/model/device-kv-cache.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { KvCache } from '../../src-main/model/kv-cache.js';
import { createSession, holdsTensorsOnDevice, inferenceFusions, ort, type Device } from '../../src-main/model/ort-session.js';
import { maxAbsDiff } from './numbers.js';

export interface CacheRun {
  /** Each step's last_logprobs, [rows · vocab]. */
  logprobs: Float32Array[];
  /** After the script, per layer and kind (key_0, value_0, …): the written slots, [rows, kvHeads, length, headDim]. */
  slots: Map<string, Float32Array>;
  realTokens: number[];
}

/**
 * The written cache's run against the host cache's: the same log-probs at every step and the same
 * written slots, within `tolerance` (relative for values past 1): the two graphs add attention's
 * terms in another order.
 */
export function expectSameRuns(written: CacheRun, host: CacheRun, tolerance = 1e-5): void {
  expect(written.logprobs).toHaveLength(host.logprobs.length);
  written.logprobs.forEach((step, i) => expect(maxAbsDiff(step, host.logprobs[i]!)).toBeLessThan(tolerance));
  expect([...written.slots.keys()]).toEqual([...host.slots.keys()]);
  for (const [name, slots] of written.slots) {
    const expected = host.slots.get(name)!;
    const scale = expected.reduce((m, x) => Math.max(m, Math.abs(x)), 1); // keys and values run to tens: relative past 1
    expect(maxAbsDiff(slots, expected) / scale).toBeLessThan(tolerance);
  }
  expect(written.realTokens).toEqual(host.realTokens);
}

/** `read`: a tensor's values in host memory (a GPU-resident one copied back). */
export async function bothCaches(dir: string, device: Device, read: (t: ort.Tensor) => Promise<Float32Array>): Promise<{ host: CacheRun; written: CacheRun }> {
  const weights = checkpointWeights(Checkpoint.open(dir));
  const config = weights.config;
  const graph = (kvCache: 'appended' | 'written') => decoderGraph(weights, { output: 'last_logprobs', kvCache, ...inferenceFusions(device) }).graph;
  const host = (await createSession(graph('appended'), { device })).session;
  const written = (await createSession(graph('written'), { device, deviceOutputs: holdsTensorsOnDevice(device) ? cacheOutputNames(config) : undefined })).session;
  const kit = new DeviceGraphs(config, { device });
  try {
    return {
      host: await script(host, KvCache.empty(config, 2), config.numLayers, config.vocabSize, async (t) => t.data as Float32Array),
      written: await script(written, kit.empty(2), config.numLayers, config.vocabSize, read),
    };
  } finally {
    await Promise.all([host.release(), written.release(), kit.close()]);
  }
}

async function script(session: ort.InferenceSession, cache: DecodeCache, layers: number, vocab: number, read: (t: ort.Tensor) => Promise<Float32Array>): Promise<CacheRun> {
  const logprobs: Float32Array[] = [];
  let length = 0; // slots written
  const token = (step: number, row: number, t: number) => 1 + ((step * 31 + row * 7 + t * 3) % (vocab - 1));
  const step = async (mask: number[][]) => {
    const tokens = mask.map((row, r) => row.map((_, t) => token(logprobs.length, r, t)));
    const out = await session.run(await cache.feeds(tokens, mask));
    logprobs.push(Float32Array.from(out.last_logprobs!.data as Float32Array));
    await cache.append(out, mask);
    length += mask[0]!.length;
  };
  try {
    const prefill = SLOT_BLOCK - 2;
    await step([new Array(prefill).fill(1), [0, 0, ...new Array(prefill - 2).fill(1)]]);
    for (let i = 0; i < 3; i++) await step([[1], [1]]); // past the first block
    cache = await cache.select([1, 1, 0]);
    await step([[1, 1], [0, 1], [1, 1]]);
    cache = await cache.select([2]);
    await step([[1]]);
    const feeds = await cache.feeds([[1]], [[1]]);
    const slots = new Map<string, Float32Array>();
    for (let i = 0; i < layers; i++) {
      for (const kind of ['key', 'value']) {
        const t = feeds[`past_${kind}_${i}`]!;
        slots.set(`${kind}_${i}`, writtenSlots(await read(t), t.dims, kind === 'key' && feeds.write_slots !== undefined, length));
      }
    }
    return { logprobs, slots, realTokens: cache.realTokens() };
  } finally {
    cache.dispose();
  }
}

/** The first `length` slots of a cached tensor, [R, H, length, D], from [R, H, C, D] or (`transposed`) [R, H, D, C]. */
function writtenSlots(data: Float32Array, dims: readonly number[], transposed: boolean, length: number): Float32Array {
  const [R, H] = dims as [number, number];
  const [C, D] = transposed ? [dims[3]!, dims[2]!] : [dims[2]!, dims[3]!];
  const out = new Float32Array(R * H * length * D);
  for (let rh = 0; rh < R * H; rh++) {
    for (let s = 0; s < length; s++) {
      for (let d = 0; d < D; d++) out[(rh * length + s) * D + d] = data[transposed ? rh * D * C + d * C + s : rh * C * D + s * D + d]!;
    }
  }
  return out;
}
