/**
 * The decode cache in GPU memory (docs/design.md §Devices, "The decode cache on the GPU"): on
 * WebGPU every layer's keys and values stay on the GPU between steps, and a step reads back
 * only `last_logprobs`, what sampling needs. The generate graph's new keys and values come
 * out as GPU-resident tensors (the session's `deviceOutputs`), and two small graphs on the
 * same device fold them in:
 *
 * - kv_append: past [rows, kvHeads, capacity, headDim] and the step's new [rows, kvHeads, T,
 *   headDim] → the written slots, then the new ones, then zeros up to the step's capacity
 *   (Slice, Concat, Pad). Capacity grows in whole blocks, as the host cache's does
 *   (./cache-slots.ts), so the generate graph sees the same shapes, masks and positions on
 *   either cache, and new shapes once a block.
 * - kv_select: the rows a batch keeps, in order, repeated for a prompt's n sequences (Gather).
 *
 * Host memory's cache (./kv-cache.ts) writes one token's keys per step into buffers the graph
 * reads; here each step copies the cache once, GPU to GPU, instead of sending it to the GPU and
 * reading the new keys back (2 × layers tensors each way per token). onnxruntime-node holds
 * GPU-resident tensors for WebGPU only, so the CPU and CUDA keep the host cache.
 *
 * A GPU-resident tensor cannot be read from Node (its download is not implemented in
 * onnxruntime-node 1.30, and calling it aborts the process), so nothing here ever reads one:
 * the tests compare what generation gives with the host cache's tokens and log-probs.
 */
import { GraphBuilder, str } from '../graph/ir.js';
import type { ModelConfig } from './hf-checkpoint.js';
import { CacheSlots, SLOT_BLOCK, keepsEveryRow, type DecodeCache } from './cache-slots.js';
import { createSession, int64Tensor, ort, type SessionConfig } from './ort-session.js';

type Feeds = Record<string, ort.Tensor>;
type Outputs = ort.InferenceSession.OnnxValueMapType;

/** The generate graph's outputs that stay on the device: every layer's new keys and values. */
export function cacheOutputNames(config: ModelConfig): string[] {
  return Array.from({ length: config.numLayers }, (_, i) => [`new_key_${i}`, `new_value_${i}`]).flat();
}

const KINDS = ['key', 'value'] as const;

/** kv_append: per layer and kind, past's first `kept` slots, then `new`, padded by `pads` (see the module comment). */
function appendGraph(config: ModelConfig) {
  const b = new GraphBuilder('kv_append');
  const { numKvHeads: H, headDim: D } = config;
  const kept = b.input('kept', 'int64', [1]);
  const pads = b.input('pads', 'int64', [8]);
  const start = b.int64s([0]), slotAxis = b.int64s([2]);
  for (let i = 0; i < config.numLayers; i++) {
    for (const kind of KINDS) {
      const past = b.input(`past_${kind}_${i}`, 'float32', ['R', H, 'S', D]);
      const step = b.input(`new_${kind}_${i}`, 'float32', ['R', H, 'T', D]);
      const [written] = b.op('Slice', [past, start, kept, slotAxis], {}, 1, [{ dtype: 'float32', shape: ['R', H, 'K', D] }]);
      const joined = b.concat([written!, step], 2);
      const [grown] = b.op('Pad', [joined, pads], { mode: str('constant') }, 1, [{ dtype: 'float32', shape: ['R', H, 'C', D] }]);
      b.output(b.identityAs(grown!, `${kind}_${i}`));
    }
  }
  return b.graph;
}

/** kv_select: per layer and kind, the rows `rows` names, in order. */
function selectGraph(config: ModelConfig) {
  const b = new GraphBuilder('kv_select');
  const { numKvHeads: H, headDim: D } = config;
  const rows = b.input('rows', 'int32', ['N']);
  for (let i = 0; i < config.numLayers; i++) {
    for (const kind of KINDS) {
      const past = b.input(`past_${kind}_${i}`, 'float32', ['R', H, 'S', D]);
      b.output(b.identityAs(b.gather(past, rows, 0), `${kind}_${i}`));
    }
  }
  return b.graph;
}

/** lora_upload: each input copied to an output of the same name prefixed `gpu_`, left on the device. */
function uploadGraph(feeds: Feeds) {
  const b = new GraphBuilder('lora_upload');
  for (const [name, t] of Object.entries(feeds)) b.output(b.identityAs(b.identity(b.input(name, 'float32', [...t.dims])), `gpu_${name}`));
  return b.graph;
}

/**
 * The small graphs that keep tensors on one device, built on first use, one set per engine:
 * the cache's kv_append and kv_select, and lora_upload (./lora-feeds.ts).
 */
export class DeviceGraphs {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();

  constructor(readonly config: ModelConfig, private readonly sessionConfig: SessionConfig) {}

  run(which: 'append' | 'select', feeds: Feeds): Promise<Outputs> {
    return this.session(which, () => (which === 'append' ? appendGraph(this.config) : selectGraph(this.config))).then((s) => s.run(feeds));
  }

  /** GPU-resident copies of host tensors, under the same names. */
  async upload(feeds: Feeds): Promise<Feeds> {
    const key = `upload:${Object.entries(feeds).map(([name, t]) => `${name}=${t.dims.join('x')}`).join(',')}`;
    const out = await (await this.session(key, () => uploadGraph(feeds))).run(feeds);
    return Object.fromEntries(Object.keys(feeds).map((name) => [name, out[`gpu_${name}`] as ort.Tensor]));
  }

  private session(key: string, build: () => ReturnType<typeof appendGraph>): Promise<ort.InferenceSession> {
    let session = this.sessions.get(key);
    if (!session) {
      const graph = build();
      const outputs = graph.outputs.map((o) => o.name);
      session = createSession(graph, { ...this.sessionConfig, sharedWeights: undefined, keepGraph: false, deviceOutputs: outputs }).then((s) => s.session);
      session.catch(() => this.sessions.delete(key));
      this.sessions.set(key, session);
    }
    return session;
  }

  /** An empty cache of `rows` rows. */
  empty(rows: number): DeviceKvCache {
    return DeviceKvCache.empty(this, rows);
  }

  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const s of sessions) await (await s.catch(() => undefined))?.release();
  }
}

export class DeviceKvCache implements DecodeCache {
  private constructor(
    private readonly kit: DeviceGraphs,
    private readonly slots: CacheSlots,
    /** Per layer and kind ('key_3', 'value_3'): [rows, kvHeads, capacity, headDim], on the GPU once written. */
    private tensors: Map<string, ort.Tensor>,
  ) {}

  /** One block of empty slots, zeros in host memory until the first append moves the cache to the GPU. */
  static empty(kit: DeviceGraphs, rows: number): DeviceKvCache {
    const { numKvHeads: H, headDim: D, numLayers } = kit.config;
    const zeros = new ort.Tensor('float32', new Float32Array(rows * H * SLOT_BLOCK * D), [rows, H, SLOT_BLOCK, D]);
    const tensors = new Map<string, ort.Tensor>();
    for (let i = 0; i < numLayers; i++) for (const kind of KINDS) tensors.set(`${kind}_${i}`, zeros);
    return new DeviceKvCache(kit, CacheSlots.empty(rows), tensors);
  }

  get rows(): number {
    return this.slots.rows;
  }

  realTokens(): number[] {
    return this.slots.realTokens();
  }

  feeds(tokens: number[][], mask: number[][]): Feeds {
    const feeds = this.slots.tokenFeeds(tokens, mask);
    for (const [name, tensor] of this.tensors) feeds[`past_${name}`] = tensor;
    return feeds;
  }

  /** Folds the step's new keys and values (`out`, GPU-resident) into the cache, on the GPU; frees the step's and the old cache's. */
  async append(out: Outputs, mask: number[][]): Promise<void> {
    const T = mask[0]!.length;
    const capacity = this.slots.capacityFor(T), length = this.slots.length;
    const feeds: Feeds = {
      kept: int64Tensor([length], [1]),
      pads: int64Tensor([0, 0, 0, 0, 0, 0, capacity - length - T, 0], [8]),
    };
    const steps: ort.Tensor[] = [];
    for (const [name, tensor] of this.tensors) {
      const step = out[`new_${name}`] as ort.Tensor;
      feeds[`past_${name}`] = tensor;
      feeds[`new_${name}`] = step;
      steps.push(step);
    }
    const grown = await this.kit.run('append', feeds);
    for (const step of steps) if (step.location === 'gpu-buffer') step.dispose();
    this.replace(grown);
    this.slots.record(mask, capacity);
  }

  /** The given rows, in that order (a row may repeat), in a new cache; this one is emptied. */
  async select(rows: number[]): Promise<DecodeCache> {
    if (keepsEveryRow(rows, this.rows)) return this;
    const feeds: Feeds = { rows: new ort.Tensor('int32', Int32Array.from(rows), [rows.length]) };
    for (const [name, tensor] of this.tensors) feeds[`past_${name}`] = tensor;
    const picked = await this.kit.run('select', feeds);
    const next = new DeviceKvCache(this.kit, this.slots.pick(rows), new Map());
    next.replace(picked);
    this.dispose();
    return next;
  }

  dispose(): void {
    for (const tensor of this.tensors.values()) if (tensor.location === 'gpu-buffer') tensor.dispose();
    this.tensors = new Map();
  }

  /** Takes `outputs` (named like `tensors`) as the cache's contents, freeing what it held. */
  private replace(outputs: Outputs): void {
    const next = new Map<string, ort.Tensor>();
    for (const name of this.tensors.size ? this.tensors.keys() : Object.keys(outputs)) next.set(name, outputs[name] as ort.Tensor);
    this.dispose();
    this.tensors = next;
  }
}
