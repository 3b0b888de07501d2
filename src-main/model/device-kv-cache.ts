/**
 * The decode cache in GPU memory (docs/design.md §Devices, "The decode cache on the GPU"): on
 * WebGPU every layer's keys and values stay on the GPU between steps, and a step reads back
 * only `last_logprobs`, what sampling needs. The generate graph writes each step's keys and
 * values into the cache it is given (decoder.ts kvCache 'written': one ScatterElements per
 * tensor) and returns the whole cache as GPU-resident tensors (the session's `deviceOutputs`),
 * which are the next step's cache; keys are kept transposed, [rows, kvHeads, headDim, capacity],
 * as attention's q·kᵀ reads them, values [rows, kvHeads, capacity, headDim]. Two small graphs
 * on the same device do the rest:
 *
 * - kv_grow: the cache with more empty slots (Pad), before a step that would not fit, in whole
 *   blocks as the host cache grows (./cache-slots.ts), so the generate graph sees new shapes
 *   once a block, not every token.
 * - kv_select: the rows a batch keeps, in order, repeated for a prompt's n sequences (Gather);
 *   one row of it is a row a later batch may continue (./carried-rows.ts: a chat's next turn,
 *   a rollout's next turn after a tool's).
 * - kv_join: carried rows side by side, each cut to the slots it serves and padded with empty
 *   ones to one capacity (Slice, Pad, Concat): what a batch continuing them starts from
 *   ({@link DeviceKvCache.joined}).
 *
 * Host memory's cache (./kv-cache.ts) writes one token's keys per step into buffers the graph
 * reads; here each step copies the cache once, GPU to GPU, inside the generate graph, instead of
 * sending it to the GPU and reading the new keys back (2 × layers tensors each way per token).
 * onnxruntime-node holds GPU-resident tensors for WebGPU only, so the CPU and CUDA keep the host
 * cache.
 *
 * A GPU-resident tensor cannot be read from Node (its download is not implemented in
 * onnxruntime-node 1.30, and calling it aborts the process), so nothing here ever reads one:
 * the tests read the cache through a WebGPU graph with a host output.
 */
import { GraphBuilder, str } from '../graph/ir.js';
import { WRITTEN_SLOT_AXIS, writtenCacheDims } from './attention.js';
import type { ModelConfig } from './hf-checkpoint.js';
import { CacheSlots, SLOT_BLOCK, keepsEveryRow, type CarriedPart, type DecodeCache } from './cache-slots.js';
import { createSession, holdsTensorsOnDevice, int64Tensor, ort, type SessionConfig } from './ort-session.js';

type Feeds = Record<string, ort.Tensor>;
type Outputs = ort.InferenceSession.OnnxValueMapType;

/** The generate graph's outputs that stay on the device: every layer's cache, written. */
export function cacheOutputNames(config: ModelConfig): string[] {
  return cacheNames(config).map((name) => `present_${name}`);
}

/** Per layer and kind: 'key_3', 'value_3'. */
function cacheNames(config: ModelConfig): string[] {
  return Array.from({ length: config.numLayers }, (_, i) => [`key_${i}`, `value_${i}`]).flat();
}

/** A cached tensor's kind: 'key_3' holds keys. */
const kindOf = (name: string) => (name.startsWith('key_') ? 'key' : 'value');

/** A cached tensor's dims for `rows` rows of `capacity` slots (keys stored transposed, as attention.ts lays a written cache out). */
function cacheDims<D extends number | string>(config: ModelConfig, name: string, rows: D, capacity: D): (number | D)[] {
  return writtenCacheDims(kindOf(name), rows, config.numKvHeads, config.headDim, capacity);
}

/** Pad's pads (each axis's start, then each axis's end) for `grow` empty slots after a cached tensor's last. */
function slotPads(kind: 'key' | 'value', grow: number): ort.Tensor {
  return int64Tensor([0, 0, 0, 0, ...[0, 1, 2, 3].map((axis) => (axis === WRITTEN_SLOT_AXIS[kind] ? grow : 0))], [8]);
}

/** kv_grow: every cached tensor with `key_pads`/`value_pads` empty slots after its last (Pad). */
function growGraph(config: ModelConfig) {
  const b = new GraphBuilder('kv_grow');
  const pads = { key: b.input('key_pads', 'int64', [8]), value: b.input('value_pads', 'int64', [8]) };
  for (const name of cacheNames(config)) {
    const past = b.input(`past_${name}`, 'float32', cacheDims(config, name, 'R', 'S'));
    const [grown] = b.op('Pad', [past, pads[kindOf(name)]], { mode: str('constant') }, 1, [{ dtype: 'float32', shape: cacheDims(config, name, 'R', 'C') }]);
    b.output(b.identityAs(grown!, name));
  }
  return b.graph;
}

/** kv_select: every cached tensor's rows that `rows` names, in order. */
function selectGraph(config: ModelConfig) {
  const b = new GraphBuilder('kv_select');
  const rows = b.input('rows', 'int32', ['N']);
  for (const name of cacheNames(config)) b.output(b.identityAs(b.gather(b.input(`past_${name}`, 'float32', cacheDims(config, name, 'R', 'S')), rows, 0), name));
  return b.graph;
}

/**
 * kv_join for `parts` rows: every cached tensor of part p (`part<p>_key_3`, one row of any
 * capacity) cut to `ends<p>` slots and padded with `key_pads<p>`/`value_pads<p>` empty ones,
 * the parts then one after another on the row axis.
 */
function joinGraph(config: ModelConfig, parts: number) {
  const b = new GraphBuilder(`kv_join_${parts}`);
  const zero = b.int64s([0]);
  const inputs = Array.from({ length: parts }, (_, p) => ({
    ends: b.input(`ends${p}`, 'int64', [1]),
    pads: { key: b.input(`key_pads${p}`, 'int64', [8]), value: b.input(`value_pads${p}`, 'int64', [8]) },
  }));
  for (const name of cacheNames(config)) {
    const kind = kindOf(name), axis = b.int64s([WRITTEN_SLOT_AXIS[kind]]);
    const rows = inputs.map(({ ends, pads }, p) => {
      const part = b.input(`part${p}_${name}`, 'float32', cacheDims<number | string>(config, name, 1, `S${p}`));
      const [cut] = b.op('Slice', [part, zero, ends, axis], {}, 1, [{ dtype: 'float32', shape: cacheDims<number | string>(config, name, 1, `K${p}`) }]);
      return b.op('Pad', [cut!, pads[kind]], { mode: str('constant') }, 1, [{ dtype: 'float32', shape: cacheDims<number | string>(config, name, 1, 'C') }])[0]!;
    });
    b.output(b.identityAs(b.concat(rows, 0), name));
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
 * the cache's kv_grow and kv_select, and lora_upload (./lora-feeds.ts).
 */
export class DeviceGraphs {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();

  constructor(readonly config: ModelConfig, private readonly sessionConfig: SessionConfig) {}

  run(which: 'grow' | 'select', feeds: Feeds): Promise<Outputs> {
    return this.session(which, () => (which === 'grow' ? growGraph(this.config) : selectGraph(this.config))).then((s) => s.run(feeds));
  }

  /** kv_join of `parts` rows (a session for each count of parts). */
  join(parts: number, feeds: Feeds): Promise<Outputs> {
    return this.session(`join:${parts}`, () => joinGraph(this.config, parts)).then((s) => s.run(feeds));
  }

  /** GPU-resident copies of host tensors, under the same names. */
  async upload(feeds: Feeds): Promise<Feeds> {
    const key = `upload:${Object.entries(feeds).map(([name, t]) => `${name}=${t.dims.join('x')}`).join(',')}`;
    const out = await (await this.session(key, () => uploadGraph(feeds))).run(feeds);
    return Object.fromEntries(Object.keys(feeds).map((name) => [name, out[`gpu_${name}`] as ort.Tensor]));
  }

  private session(key: string, build: () => ReturnType<typeof growGraph>): Promise<ort.InferenceSession> {
    let session = this.sessions.get(key);
    if (!session) {
      const graph = build();
      const outputs = graph.outputs.map((o) => o.name);
      // Elsewhere than WebGPU (the CPU, in tests) the same graphs keep the cache in host memory.
      const deviceOutputs = holdsTensorsOnDevice(this.sessionConfig.device) ? outputs : undefined;
      session = createSession(graph, { ...this.sessionConfig, sharedWeights: undefined, keepGraph: false, deviceOutputs }).then((s) => s.session);
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
    /** Per layer and kind ('key_3', 'value_3'): laid out as {@link cacheDims}, on the GPU once written. */
    private tensors: Map<string, ort.Tensor>,
  ) {}

  /** One block of empty slots, zeros in host memory until the first step moves the cache to the GPU. */
  static empty(kit: DeviceGraphs, rows: number): DeviceKvCache {
    const zeros = (kind: 'key' | 'value') => {
      const dims = writtenCacheDims(kind, rows, kit.config.numKvHeads, kit.config.headDim, SLOT_BLOCK);
      return new ort.Tensor('float32', new Float32Array(dims.reduce((a, d) => a * d, 1)), dims);
    };
    const shared = { key: zeros('key'), value: zeros('value') }; // one array per kind, fed for every layer
    return new DeviceKvCache(kit, CacheSlots.empty(rows), new Map(cacheNames(kit.config).map((name) => [name, shared[kindOf(name)]])));
  }

  get rows(): number {
    return this.slots.rows;
  }

  realTokens(): number[] {
    return this.slots.realTokens();
  }

  /** The step's feeds (the generate graph writes the tokens in, decoder.ts kvCache 'written'), widening the cache first where they would not fit. */
  async feeds(tokens: number[][], mask: number[][]): Promise<Feeds> {
    const capacity = this.slots.capacityFor(tokens[0]!.length);
    if (capacity > this.slots.capacity) await this.widen(capacity);
    return this.withCache(this.slots.writtenTokenFeeds(tokens, mask));
  }

  /** Takes the step's written cache (`out`'s present_*, GPU-resident) as this cache; frees the one it replaces. */
  append(out: Outputs, mask: number[][]): void {
    const next = new Map<string, ort.Tensor>();
    for (const name of this.tensors.keys()) next.set(name, out[`present_${name}`] as ort.Tensor);
    this.dispose();
    this.tensors = next;
    this.slots.record(mask, this.slots.capacity);
  }

  /** The given rows, in that order (a row may repeat), in a new cache; this one is emptied. */
  async select(rows: number[]): Promise<DecodeCache> {
    if (keepsEveryRow(rows, this.rows)) return this;
    const next = await this.copyOfRows(rows);
    this.dispose();
    return next;
  }

  /** Always a copy: the batch disposes its own cache, `last` or not. */
  async carry(row: number): Promise<CarriedPart> {
    return { cache: await this.rowCopy(row), row: 0 };
  }

  join(parts: (CarriedPart | undefined)[]): Promise<{ cache: DeviceKvCache; order: number[] }> {
    return DeviceKvCache.joined(parts as (DevicePart | undefined)[]);
  }

  /** Row `row` alone, in a cache of its own on the device (a row that a later batch may continue: ./carried-rows.ts); this cache is unchanged. */
  rowCopy(row: number): Promise<DeviceKvCache> {
    return this.copyOfRows([row]);
  }

  /** The given rows, in that order, copied into a new cache on the device (kv_select). */
  private async copyOfRows(rows: number[]): Promise<DeviceKvCache> {
    const picked = await this.kit.run('select', this.withCache({ rows: new ort.Tensor('int32', Int32Array.from(rows), [rows.length]) }));
    return new DeviceKvCache(this.kit, this.slots.pick(rows), this.taken(picked));
  }

  /**
   * One cache of carried rows (absent: an empty row), each part its row's first `tokens` real
   * tokens (all, without), in the order given: what a batch continuing them starts from, as
   * the host's KvCache.joined, on the device (kv_join). Each part is a {@link rowCopy}, which
   * this disposes. Each row is cut to the slots it serves and padded with zeros to the joined
   * capacity, so, as in the host's, every slot past a row's own is zero and masked.
   */
  static async joined(parts: (DevicePart | undefined)[]): Promise<{ cache: DeviceKvCache; order: number[] }> {
    const kit = parts.find(Boolean)!.cache.kit;
    const kept = parts.map((p) => p && { ...p, keep: p.cache.slots.slotsHolding(p.row, p.tokens ?? Infinity) });
    const slots = CacheSlots.joined(kept.map((p) => p && { slots: p.cache.slots, row: p.row, keep: p.keep }));
    const oneSlot = (kind: 'key' | 'value') => new ort.Tensor('float32', new Float32Array(kit.config.numKvHeads * kit.config.headDim), writtenCacheDims(kind, 1, kit.config.numKvHeads, kit.config.headDim, 1));
    const empty = { key: oneSlot('key'), value: oneSlot('value') }; // an absent part: one empty slot, padded
    const feeds: Feeds = {};
    kept.forEach((p, k) => {
      if (p && p.row !== 0) throw new Error('DeviceKvCache.joined: each part is a one-row copy (rowCopy)');
      const keep = p?.keep ?? 1;
      feeds[`ends${k}`] = int64Tensor([keep], [1]);
      feeds[`key_pads${k}`] = slotPads('key', slots.capacity - keep);
      feeds[`value_pads${k}`] = slotPads('value', slots.capacity - keep);
      for (const name of cacheNames(kit.config)) feeds[`part${k}_${name}`] = p ? p.cache.tensors.get(name)! : empty[kindOf(name)];
    });
    const joined = new DeviceKvCache(kit, slots, new Map());
    try {
      joined.tensors = joined.taken(await kit.join(parts.length, feeds));
    } finally {
      for (const p of parts) p?.cache.dispose();
    }
    return { cache: joined, order: parts.map((_, k) => k) };
  }

  dispose(): void {
    for (const tensor of this.tensors.values()) if (tensor.location === 'gpu-buffer') tensor.dispose();
    this.tensors = new Map();
  }

  /**
   * Every row `capacity` slots wide, the new ones empty, on the GPU (kv_grow): an empty cache's
   * first block goes there as it is, not a host array of zeros as wide as a long prompt.
   */
  private async widen(capacity: number): Promise<void> {
    const grow = capacity - this.slots.capacity;
    const grown = this.taken(await this.kit.run('grow', this.withCache({ key_pads: slotPads('key', grow), value_pads: slotPads('value', grow) })));
    this.dispose();
    this.tensors = grown;
    this.slots.widen(capacity);
  }

  /** `feeds` with this cache's tensors as the graph's `past_<name>` inputs. */
  private withCache(feeds: Feeds): Feeds {
    for (const [name, tensor] of this.tensors) feeds[`past_${name}`] = tensor;
    return feeds;
  }

  /** A run's outputs, named as this cache's tensors. */
  private taken(outputs: Outputs): Map<string, ort.Tensor> {
    return new Map(cacheNames(this.kit.config).map((name) => [name, outputs[name] as ort.Tensor]));
  }
}

/** A carried row of a GPU cache. */
type DevicePart = CarriedPart & { cache: DeviceKvCache };
