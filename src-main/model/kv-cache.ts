/**
 * The decode cache in host memory (docs/design.md §Batched generation): every row's past keys
 * and values, per layer, in buffers of a fixed capacity [rows, kvHeads, capacity, headDim] that
 * the generate graph reads where they lie. Which slots hold what is ./cache-slots.ts's.
 *
 * The graph returns only the current tokens' keys and values (new_key_<i>, new_value_<i>),
 * which {@link KvCache.append} writes into the next free slots. So a decode step copies one
 * token's keys per row, not the whole cache: returning the grown cache from the graph cost two
 * copies of it per step (ONNX Runtime's Concat, then its copy into a JavaScript buffer).
 *
 * The buffers are allocated once for the slots the caller reserves (a prompt and its reply
 * budget) and grow inside that memory, moving each head's slots apart: fresh buffers at every
 * block cost a page fault per 4 KiB touched, which at an 8,192-token prompt was 15 s of a
 * 125 s prefill (docs/design.md §Batched generation).
 *
 * The CPU and CUDA use this cache; on WebGPU the keys and values stay on the GPU
 * (./device-kv-cache.ts).
 *
 * Its values are fp32, or fp16 (`cachePrecision`, half the memory: a chat twice as long, as
 * llama.cpp's default cache holds it) where the memory check found that fp32 would cut the
 * model's chats short (./inference-fit.ts). The generate graph then takes fp16 keys and values,
 * reads each layer's as fp32, and returns the new ones in fp16 (./decoder.ts `halfCache`); the
 * cache itself only moves their bits (Uint16Array, as onnxruntime-node holds float16).
 */
import type { CachePrecision } from '../../src-shared/inference-memory.js';
import type { ModelConfig } from './hf-checkpoint.js';
import { CacheSlots, SLOT_BLOCK, blocksFor, keepsEveryRow, type CarriedPart, type DecodeCache } from './cache-slots.js';
import { ort } from './ort-session.js';

export { SLOT_BLOCK } from './cache-slots.js';

type Feeds = Record<string, ort.Tensor>;
type Outputs = ort.InferenceSession.OnnxValueMapType;
/** A layer's keys or values: fp32, or fp16's bits. */
type SlotArray = Float32Array | Uint16Array;

export class KvCache implements DecodeCache {
  private constructor(
    private readonly config: ModelConfig,
    private readonly slots: CacheSlots,
    /** Per layer: [rows, kvHeads, capacity, headDim], views over buffers of `reserved` slots. */
    private keys: SlotArray[],
    private values: SlotArray[],
    /** The slots the buffers were allocated for: growth up to here stays in place. */
    private readonly reserved: number,
    readonly precision: CachePrecision,
  ) {}

  /** An empty cache for `rows` rows, its memory allocated for `reserve` slots (at least one block). */
  static empty(config: ModelConfig, rows: number, reserve = SLOT_BLOCK, precision: CachePrecision = 'fp32'): KvCache {
    const reserved = blocksFor(reserve);
    const buffers = () => Array.from({ length: config.numLayers }, () => slotBuffer(config, rows, SLOT_BLOCK, reserved, precision));
    return new KvCache(config, CacheSlots.empty(rows), buffers(), buffers(), reserved, precision);
  }

  get rows(): number {
    return this.slots.rows;
  }

  /** How many real tokens each row holds: the position of its next token. */
  realTokens(): number[] {
    return this.slots.realTokens();
  }

  /**
   * Feeds for `tokens` (one list per row, all the same length) after the cache, with `mask`
   * marking which of them are real (1) or padding (0); positions count real tokens only.
   */
  feeds(tokens: number[][], mask: number[][]): Feeds {
    const feeds = this.slots.tokenFeeds(tokens, mask);
    const dims = [this.rows, this.config.numKvHeads, this.slots.capacity, this.config.headDim];
    const type = this.precision === 'fp16' ? 'float16' : 'float32';
    for (let i = 0; i < this.config.numLayers; i++) {
      feeds[`past_key_${i}`] = new ort.Tensor(type, this.keys[i]!, dims);
      feeds[`past_value_${i}`] = new ort.Tensor(type, this.values[i]!, dims);
    }
    return feeds;
  }

  /** Writes the step's new keys and values (`out`) for tokens masked by `mask` into the next slots. */
  append(out: Outputs, mask: number[][]): void {
    const T = mask[0]!.length;
    const capacity = this.slots.capacityFor(T);
    if (capacity !== this.slots.capacity) this.grow(capacity);
    const { numKvHeads: heads, headDim: d } = this.config;
    const length = this.slots.length;
    const write = (dst: SlotArray, output: ort.Tensor) => {
      const src = this.slotData(output);
      for (let row = 0; row < this.rows * heads; row++) {
        dst.set(src.subarray(row * T * d, (row + 1) * T * d), (row * capacity + length) * d);
      }
    };
    for (let i = 0; i < this.config.numLayers; i++) {
      write(this.keys[i]!, out[`new_key_${i}`]!);
      write(this.values[i]!, out[`new_value_${i}`]!);
    }
    this.slots.record(mask, capacity);
  }

  /** A step's new keys or values as this cache holds them: fp16 as its bits, whatever array type ONNX Runtime gave them in. */
  private slotData(output: ort.Tensor): SlotArray {
    const expected = this.precision === 'fp16' ? 'float16' : 'float32';
    if (output.type !== expected) throw new Error(`the generate graph returned ${output.type} keys and values for a ${this.precision} cache`);
    const data = output.data as unknown as ArrayBufferView & { length: number };
    return this.precision === 'fp16' ? new Uint16Array(data.buffer, data.byteOffset, data.length) : (data as Float32Array);
  }

  /**
   * A cache of the given rows, in that order (a row may repeat: a prompt's n sequences). Rows
   * that only leave (finished sequences; the rest in order) are dropped in place: the rows kept
   * move down in the same buffers, which this cache hands over. A copy there would hold the
   * batch's cache twice until the garbage collector ran: a batch whose sequences end one by one
   * peaked 25% higher (docs/design.md §Memory estimate, the rollouts' cache).
   */
  select(rows: number[]): KvCache {
    if (keepsEveryRow(rows, this.rows)) return this;
    const drops = rows.every((r, i) => i === 0 || r > rows[i - 1]!);
    const pick = (buffers: SlotArray[]) => (drops ? buffers.map((b) => this.keepInPlace(b, rows)) : this.copyRows(rows, buffers));
    return new KvCache(this.config, this.slots.pick(rows), pick(this.keys), pick(this.values), this.reserved, this.precision);
  }

  carry(row: number, last: boolean): CarriedPart {
    return last ? { cache: this, row } : { cache: this.rowCopy(row), row: 0 };
  }

  join(parts: (CarriedPart | undefined)[], extra: number): { cache: KvCache; order: number[] } {
    return KvCache.joined(this.config, parts as (KvPart | undefined)[], extra, this.precision);
  }

  /** Row `row` alone, in buffers of its own sized to what it holds (a row that a later batch may continue: ./carried-rows.ts). */
  rowCopy(row: number): KvCache {
    const copy = (buffers: SlotArray[]) => this.copyRows([row], buffers, this.slots.capacity, this.slots.capacity);
    return new KvCache(this.config, this.slots.pick([row]), copy(this.keys), copy(this.values), this.slots.capacity, this.precision);
  }

  /**
   * One cache of rows of other caches (absent: an empty row), each part its row's first
   * `tokens` real tokens (all, without), with memory for `extra` slots more (in place, the last
   * batch's reserve): what a batch continuing carried rows starts from (./carried-rows.ts).
   * `order` says which part each of its rows holds. The rows of the cache most parts come from
   * (the last batch's) stay in its memory, in their order, moved down in place, and the other
   * parts are written after them, when that memory has room for every part and the others are
   * no longer: so a turn's cache becomes the next turn's without a second one beside it. Else
   * every part is copied into new buffers, in the order given. Each row keeps its slots, a
   * shorter one masked after its own (CacheSlots.joined). `precision`: the engine's, every part's
   * (a cache of empty rows only is still the engine's kind).
   */
  static joined(config: ModelConfig, parts: (KvPart | undefined)[], extra: number, precision: CachePrecision = 'fp32'): { cache: KvCache; order: number[] } {
    if (parts.some((p) => p && p.cache.precision !== precision)) throw new Error(`KvCache.joined: a part is not a ${precision} cache`);
    const kept = parts.map((p) => p && { ...p, keep: p.cache.slots.slotsHolding(p.row, p.tokens ?? Infinity) });
    const base = baseFor(kept);
    if (base) {
      const inBase: number[] = [], others: number[] = [];
      kept.forEach((p, part) => (p?.cache === base && !inBase.some((k) => kept[k]!.row === p.row) ? inBase : others).push(part));
      inBase.sort((a, b) => kept[a]!.row - kept[b]!.row);
      const fits = others.every((k) => !kept[k] || (kept[k]!.cache !== base && kept[k]!.keep <= base.slots.length));
      if (fits) return { cache: base.extendedInPlace(inBase.map((k) => kept[k]!), others.map((k) => kept[k])), order: [...inBase, ...others] };
    }
    const slots = CacheSlots.joined(kept.map((p) => p && { slots: p.cache.slots, row: p.row, keep: p.keep }));
    const reserved = blocksFor(slots.length + extra);
    const buffers = (which: 'keys' | 'values') => Array.from({ length: config.numLayers }, (_, layer) => {
      const dst = slotBuffer(config, parts.length, slots.capacity, reserved, precision);
      kept.forEach((p, to) => p && p.cache.writeRow(which, layer, p, dst, to, slots.capacity));
      return dst;
    });
    return { cache: new KvCache(config, slots, buffers('keys'), buffers('values'), reserved, precision), order: parts.map((_, k) => k) };
  }

  /**
   * Rows this cache's memory has room for, each with its reserved slots (or its capacity, once
   * grown past them), so that growing in place ({@link grow}) stays inside it.
   */
  roomForRows(): number {
    const perRow = this.keys[0]!.BYTES_PER_ELEMENT * this.config.numKvHeads * Math.max(this.reserved, this.slots.capacity) * this.config.headDim;
    return Math.floor(this.keys[0]!.buffer.byteLength / perRow);
  }

  /** Writes the first `part.keep` slots of row `part.row` of layer `layer`'s keys or values into row `to` of `dst`, laid out for `capacity` slots. */
  private writeRow(which: 'keys' | 'values', layer: number, part: KeptPart, dst: SlotArray, to: number, capacity: number): void {
    this.copyRow(this[which][layer]!, part.row, part.keep, dst, to, capacity);
  }

  /** Copies the first `slots` slots of each head of row `row` of `src` (laid out as this cache is) into row `to` of `dst`, laid out for `capacity` slots. */
  private copyRow(src: SlotArray, row: number, slots: number, dst: SlotArray, to: number, capacity: number): void {
    const { numKvHeads: heads, headDim: d } = this.config;
    const old = this.slots.capacity;
    for (let h = 0; h < heads; h++) {
      const from = (row * heads + h) * old * d;
      dst.set(src.subarray(from, from + slots * d), (to * heads + h) * capacity * d);
    }
  }

  /**
   * This cache's rows `keep` (increasing), moved down in place, each cut to its own first slots,
   * then `others` (absent: empty), in the same memory ({@link joined}); this cache is not to be
   * used afterwards.
   */
  private extendedInPlace(keep: KeptPart[], others: (KeptPart | undefined)[]): KvCache {
    const { numKvHeads: heads, headDim: d } = this.config;
    const rows = keep.length + others.length, capacity = this.slots.capacity, rowSize = heads * capacity * d;
    const extend = (which: 'keys' | 'values') => this[which].map((buffer, layer) => {
      this.keepInPlace(buffer, keep.map((p) => p.row));
      const all = viewOf(buffer, rows * rowSize);
      // Every slot past a row's own is zero: a cut row's tail, and the rows after the kept ones (what earlier rows left there).
      keep.forEach((p, to) => {
        for (let h = 0; h < heads; h++) all.fill(0, (to * heads + h) * capacity * d + p.keep * d, (to * heads + h + 1) * capacity * d);
      });
      all.fill(0, keep.length * rowSize);
      others.forEach((p, k) => p?.cache.writeRow(which, layer, p, all, keep.length + k, capacity));
      return all;
    });
    const slots = CacheSlots.joined([...keep, ...others].map((p) => p && { slots: p.cache.slots, row: p.row, keep: p.keep }), capacity);
    return new KvCache(this.config, slots, extend('keys'), extend('values'), this.reserved, this.precision);
  }

  /** Host memory goes with the garbage collector. */
  dispose(): void {}

  /** Room for `capacity` slots; the rows keep what they hold. */
  private grow(capacity: number): void {
    if (capacity <= this.reserved) {
      this.keys = this.keys.map((buffer) => this.spreadInPlace(buffer, capacity));
      this.values = this.values.map((buffer) => this.spreadInPlace(buffer, capacity));
    } else {
      const all = Array.from({ length: this.rows }, (_, r) => r);
      this.keys = this.copyRows(all, this.keys, capacity);
      this.values = this.copyRows(all, this.values, capacity);
    }
  }

  /**
   * `buffer`'s written slots laid out for `capacity` slots per head, in the same memory. Each
   * head moves to a higher offset, so moving the last head first never overwrites one not yet
   * moved. The new empty slots are zeroed: masked, but their contents are then known.
   */
  private spreadInPlace(buffer: SlotArray, capacity: number): SlotArray {
    const d = this.config.headDim, written = this.slots.length * d, old = this.slots.capacity;
    const wider = viewOf(buffer, this.rows * this.config.numKvHeads * capacity * d);
    for (let head = this.rows * this.config.numKvHeads - 1; head >= 0; head--) {
      const from = head * old * d, to = head * capacity * d;
      wider.copyWithin(to, from, from + written);
      wider.fill(0, to + written, to + capacity * d);
    }
    return wider;
  }

  /**
   * `buffer`'s rows `rows` (increasing) as the first rows of the same memory. Each row moves to a
   * lower offset (or stays), so moving them in order never overwrites one not yet moved; the
   * slots past the written ones are zero in every row (./cache-slots.ts: all rows have the same
   * length), so only the written ones move.
   */
  private keepInPlace(buffer: SlotArray, rows: number[]): SlotArray {
    const { numKvHeads: heads, headDim: d } = this.config;
    const capacity = this.slots.capacity, written = this.slots.length * d;
    rows.forEach((r, to) => {
      if (r === to) return;
      for (let h = 0; h < heads; h++) {
        const from = (r * heads + h) * capacity * d;
        buffer.copyWithin((to * heads + h) * capacity * d, from, from + written);
      }
    });
    return viewOf(buffer, rows.length * heads * capacity * d);
  }

  /** New per-layer buffers of `capacity` slots (with room for `reserve`: by default as many as this cache) holding `rows` of `buffers`. */
  private copyRows(rows: number[], buffers: SlotArray[], capacity = this.slots.capacity, reserve = this.reserved): SlotArray[] {
    return buffers.map((src) => {
      const dst = slotBuffer(this.config, rows.length, capacity, Math.max(capacity, reserve), this.precision);
      rows.forEach((r, to) => this.copyRow(src, r, this.slots.length, dst, to, capacity));
      return dst;
    });
  }
}

/** A carried row of a host cache. */
type KvPart = CarriedPart & { cache: KvCache };

/** A carried row and how many of its first slots are used. */
type KeptPart = KvPart & { keep: number };

/**
 * The cache whose memory the parts can be joined in ({@link KvCache.joined}): of those with room
 * for every part (the last batch's, whose memory held all its sequences), the one most parts
 * come from; none if none has the room.
 */
function baseFor(parts: (KeptPart | undefined)[]): KvCache | undefined {
  const counts = new Map<KvCache, number>();
  for (const p of parts) if (p) counts.set(p.cache, (counts.get(p.cache) ?? 0) + 1);
  return [...counts.entries()].filter(([c]) => c.roomForRows() >= parts.length).sort((a, b) => b[1] - a[1])[0]?.[0];
}

/**
 * A zeroed [rows, kvHeads, capacity, headDim] buffer whose memory has room for `reserved` slots
 * per head. Pages are only touched as slots are written, so unused room costs no memory.
 */
function slotBuffer(config: ModelConfig, rows: number, capacity: number, reserved: number, precision: CachePrecision): SlotArray {
  const perSlot = rows * config.numKvHeads * config.headDim;
  const Type = precision === 'fp16' ? Uint16Array : Float32Array;
  return new Type(new ArrayBuffer(perSlot * reserved * Type.BYTES_PER_ELEMENT), 0, perSlot * capacity);
}

/** The first `length` values of `buffer`'s memory, as its type (a view: wider or narrower than `buffer`). */
function viewOf(buffer: SlotArray, length: number): SlotArray {
  return buffer instanceof Uint16Array ? new Uint16Array(buffer.buffer, buffer.byteOffset, length) : new Float32Array(buffer.buffer, buffer.byteOffset, length);
}
