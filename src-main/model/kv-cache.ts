/**
 * The decode cache (docs/design.md §Batched generation): every row's past keys and values,
 * per layer, in buffers of a fixed capacity [rows, kvHeads, capacity, headDim] that the
 * generate graph reads where they lie.
 *
 * The graph returns only the current tokens' keys and values (new_key_<i>, new_value_<i>),
 * which {@link KvCache.append} writes into the next free slots. So a decode step copies one
 * token's keys per row, not the whole cache: returning the grown cache from the graph cost two
 * copies of it per step (ONNX Runtime's Concat, then its copy into a JavaScript buffer).
 *
 * - Every row has the same number of slots: rows are left-padded, and a padding slot is
 *   masked (its `filled` flag is 0), as is every slot past `length`.
 * - Capacity grows in blocks of {@link SLOT_BLOCK} slots, so attention reads at most a block
 *   of empty (masked) slots. The buffers are allocated once for the slots the caller reserves
 *   (a prompt and its reply budget) and grow inside that memory, moving each head's slots
 *   apart: fresh buffers at every block cost a page fault per 4 KiB touched, which at an
 *   8,192-token prompt was 15 s of a 125 s prefill (docs/design.md §Batched generation).
 * - The graph always sees at least one slot, empty at first: ONNX Runtime's MatMul over a
 *   zero-length dimension is not to be trusted (docs/design.md §Batched generation).
 */
import { positionIdsFromMask } from './decoder.js';
import type { ModelConfig } from './hf-checkpoint.js';
import { int64Tensor, ort } from './ort-session.js';

type Feeds = Record<string, ort.Tensor>;
type Outputs = ort.InferenceSession.OnnxValueMapType;

/** Slots added at a time when the cache is full. */
export const SLOT_BLOCK = 32;

export class KvCache {
  private constructor(
    private readonly config: ModelConfig,
    /** Per row, per slot: 1 where the slot holds a real token. */
    private filled: Uint8Array[],
    /** Per layer: [rows, kvHeads, capacity, headDim], views over buffers of `reserved` slots. */
    private keys: Float32Array[],
    private values: Float32Array[],
    private capacity: number,
    /** Slots written so far (the same for every row). */
    private length: number,
    /** The slots the buffers were allocated for: growth up to here stays in place. */
    private readonly reserved: number,
  ) {}

  /** An empty cache for `rows` rows, its memory allocated for `reserve` slots (at least one block). */
  static empty(config: ModelConfig, rows: number, reserve = SLOT_BLOCK): KvCache {
    const reserved = blocksFor(reserve);
    const buffers = () => Array.from({ length: config.numLayers }, () => slotBuffer(config, rows, SLOT_BLOCK, reserved));
    const filled = Array.from({ length: rows }, () => new Uint8Array(SLOT_BLOCK));
    return new KvCache(config, filled, buffers(), buffers(), SLOT_BLOCK, 0, reserved);
  }

  get rows(): number {
    return this.filled.length;
  }

  /** How many real tokens each row holds: the position of its next token. */
  realTokens(): number[] {
    return this.filled.map((row) => row.subarray(0, this.length).reduce((a, m) => a + m, 0));
  }

  /**
   * Feeds for `tokens` (one list per row, all the same length) after the cache, with `mask`
   * marking which of them are real (1) or padding (0); positions count real tokens only.
   */
  feeds(tokens: number[][], mask: number[][]): Feeds {
    const T = tokens[0]!.length, R = this.rows;
    const positions = positionIdsFromMask(mask, this.realTokens());
    const fullMask = this.filled.flatMap((row, r) => [...row, ...mask[r]!]);
    const feeds: Feeds = {
      input_ids: int64Tensor(tokens.flat(), [R, T]),
      attention_mask: int64Tensor(fullMask, [R, this.capacity + T]),
      position_ids: int64Tensor(positions.flat(), [R, T]),
    };
    const dims = [R, this.config.numKvHeads, this.capacity, this.config.headDim];
    for (let i = 0; i < this.config.numLayers; i++) {
      feeds[`past_key_${i}`] = new ort.Tensor('float32', this.keys[i]!, dims);
      feeds[`past_value_${i}`] = new ort.Tensor('float32', this.values[i]!, dims);
    }
    return feeds;
  }

  /** Writes the step's new keys and values (`out`) for tokens masked by `mask` into the next slots. */
  append(out: Outputs, mask: number[][]): void {
    const T = mask[0]!.length;
    if (this.length + T > this.capacity) this.grow(this.length + T);
    const { numKvHeads: heads, headDim: d } = this.config;
    const write = (dst: Float32Array, src: Float32Array) => {
      for (let row = 0; row < this.rows * heads; row++) {
        dst.set(src.subarray(row * T * d, (row + 1) * T * d), (row * this.capacity + this.length) * d);
      }
    };
    for (let i = 0; i < this.config.numLayers; i++) {
      write(this.keys[i]!, out[`new_key_${i}`]!.data as Float32Array);
      write(this.values[i]!, out[`new_value_${i}`]!.data as Float32Array);
    }
    this.filled.forEach((row, r) => row.set(mask[r]!, this.length));
    this.length += T;
  }

  /** A cache of the given rows, in that order (a row may repeat: a prompt's n sequences). */
  select(rows: number[]): KvCache {
    if (rows.length === this.rows && rows.every((r, i) => r === i)) return this;
    return new KvCache(this.config, rows.map((r) => this.filled[r]!.slice()), this.copyRows(rows, this.keys),
      this.copyRows(rows, this.values), this.capacity, this.length, this.reserved);
  }

  /** Room for `slots` slots at least, in whole blocks; the rows keep what they hold. */
  private grow(slots: number): void {
    const capacity = blocksFor(slots);
    if (capacity <= this.reserved) {
      this.keys = this.keys.map((buffer) => this.spreadInPlace(buffer, capacity));
      this.values = this.values.map((buffer) => this.spreadInPlace(buffer, capacity));
    } else {
      const all = this.filled.map((_, r) => r);
      this.keys = this.copyRows(all, this.keys, capacity);
      this.values = this.copyRows(all, this.values, capacity);
    }
    this.filled = this.filled.map((row) => {
      const wider = new Uint8Array(capacity);
      wider.set(row);
      return wider;
    });
    this.capacity = capacity;
  }

  /**
   * `buffer`'s written slots laid out for `capacity` slots per head, in the same memory. Each
   * head moves to a higher offset, so moving the last head first never overwrites one not yet
   * moved. The new empty slots are zeroed: masked, but their contents are then known.
   */
  private spreadInPlace(buffer: Float32Array, capacity: number): Float32Array {
    const d = this.config.headDim, written = this.length * d;
    const wider = new Float32Array(buffer.buffer, buffer.byteOffset, this.rows * this.config.numKvHeads * capacity * d);
    for (let head = this.rows * this.config.numKvHeads - 1; head >= 0; head--) {
      const from = head * this.capacity * d, to = head * capacity * d;
      wider.copyWithin(to, from, from + written);
      wider.fill(0, to + written, to + capacity * d);
    }
    return wider;
  }

  /** New per-layer buffers of `capacity` slots (reserving at least as many as this cache) holding `rows` of `buffers`. */
  private copyRows(rows: number[], buffers: Float32Array[], capacity = this.capacity): Float32Array[] {
    const { numKvHeads: heads, headDim: d } = this.config;
    return buffers.map((src) => {
      const dst = slotBuffer(this.config, rows.length, capacity, Math.max(capacity, this.reserved));
      rows.forEach((r, to) => {
        for (let h = 0; h < heads; h++) {
          const from = (r * heads + h) * this.capacity * d;
          dst.set(src.subarray(from, from + this.length * d), (to * heads + h) * capacity * d);
        }
      });
      return dst;
    });
  }
}

/** `slots` rounded up to whole blocks. */
function blocksFor(slots: number): number {
  return Math.max(1, Math.ceil(slots / SLOT_BLOCK)) * SLOT_BLOCK;
}

/**
 * A zeroed [rows, kvHeads, capacity, headDim] buffer whose memory has room for `reserved` slots
 * per head. Pages are only touched as slots are written, so unused room costs no memory.
 */
function slotBuffer(config: ModelConfig, rows: number, capacity: number, reserved: number): Float32Array {
  const perSlot = rows * config.numKvHeads * config.headDim;
  return new Float32Array(new ArrayBuffer(perSlot * reserved * Float32Array.BYTES_PER_ELEMENT), 0, perSlot * capacity);
}
