// The LoRA inputs' leases (src-main/model/lora-feeds.ts): where weights are uploaded to the GPU,
// a set replaced by setLora is freed as soon as no call holds it, and not before; a call keeps
// the set it started with. The GPU copies here are stand-ins that record their dispose: the
// WebGPU path itself is test/model/device-kv-cache.test.ts's.
import { describe, expect, it } from 'vitest';
import { LoraFeeds } from '../../src-main/model/lora-feeds.js';
import type { LoraSpec } from '../../src-main/model/lora-inputs.js';
import type { ort } from '../../src-main/model/ort-session.js';

const specs: LoraSpec[] = [{ module: 'model.layers.0.self_attn.q_proj', layer: 0, target: 'q', inFeatures: 3, outFeatures: 2 }];

describe('LoraFeeds', () => {
  it('frees a replaced set once its last call ends, and a call keeps the set it started with', async () => {
    const freed: number[] = [];
    let uploads = 0;
    const upload = async (feeds: Record<string, ort.Tensor>) => {
      const id = uploads++;
      return Object.fromEntries(Object.keys(feeds).map((name) => [name, { location: 'gpu-buffer', id, dispose: () => freed.push(id) } as unknown as ort.Tensor]));
    };
    const lora = new LoraFeeds(specs, 1, upload);
    const held = lora.lease(); // a call running on set 0 (zeros)
    lora.set(null); // set 1
    await Promise.resolve();
    expect(freed).toEqual([]);
    expect(Object.values(await held.feeds()).map((t) => (t as unknown as { id: number }).id)).toEqual([0, 0]);
    held.release();
    held.release(); // twice is once
    await new Promise((r) => setImmediate(r));
    expect(freed).toEqual([0, 0]);
    lora.set(null); // set 2: set 1 had no call, so it goes at once
    await new Promise((r) => setImmediate(r));
    expect(freed).toEqual([0, 0, 1, 1]);
    lora.dispose();
    await new Promise((r) => setImmediate(r));
    expect(freed).toEqual([0, 0, 1, 1, 2, 2]);
    expect(uploads).toBe(3);
  });

  it('without an upload feeds the host tensors, checked against the specs', async () => {
    const lora = new LoraFeeds(specs, 1);
    const feeds = await lora.lease().feeds();
    expect(Object.values(feeds).map((t) => t.dims)).toEqual([[1, 3], [2, 1]]);
    expect(() => lora.set(new Map([['nope', new Float32Array(1)]]))).toThrow();
  });
});
