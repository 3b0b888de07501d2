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
 *   of empty (masked) slots, and the buffers are copied once per block.
 * - The graph always sees at least one slot, empty at first: ONNX Runtime's MatMul over a
 *   zero-length dimension is not to be trusted (docs/design.md §Batched generation).
 */
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
    private readonly filled: Uint8Array[],
    private readonly keys: Float32Array[],
    private readonly values: Float32Array[],
    private capacity: number,
    /** Slots written so far (the same for every row). */
    private length: number,
  ) {}

  /** An empty cache for `rows` rows. */
  static empty(config: ModelConfig, rows: number): KvCache {
    const cache = new KvCache(config, [], [], [], 0, 0);
    return cache.resized(rows, SLOT_BLOCK, () => undefined);
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
    const start = this.realTokens();
    const positions = mask.map((row, r) => {
      let n = start[r]!;
      return row.map((m) => (m ? n++ : 0));
    });
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
      for (let r = 0; r < this.rows; r++) {
        for (let h = 0; h < heads; h++) {
          const from = ((r * heads + h) * T) * d;
          dst.set(src.subarray(from, from + T * d), ((r * heads + h) * this.capacity + this.length) * d);
        }
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
    const picked = new KvCache(this.config, [], [], [], 0, this.length);
    return picked.resized(rows.length, this.capacity, (r) => this.rowSlices(rows[r]!), rows.map((r) => this.filled[r]!));
  }

  /** Room for `slots` slots at least, in whole blocks; the rows keep what they hold. */
  private grow(slots: number): void {
    const capacity = Math.ceil(slots / SLOT_BLOCK) * SLOT_BLOCK;
    const old = { keys: [...this.keys], values: [...this.values], capacity: this.capacity, filled: [...this.filled] };
    const rowSlices = (r: number) => this.rowSlices(r, old);
    this.resized(this.rows, capacity, rowSlices, old.filled);
  }

  /**
   * Reallocates every buffer for `rows` rows of `capacity` slots; row r's heads are copied from
   * `source(r)` (per layer, per head: its first `length` slots), where given.
   */
  private resized(rows: number, capacity: number, source: (r: number) => RowSlices | undefined, filled?: Uint8Array[]): KvCache {
    const { numKvHeads: heads, headDim: d, numLayers } = this.config;
    const fresh = () => new Float32Array(rows * heads * capacity * d);
    const keys = Array.from({ length: numLayers }, fresh), values = Array.from({ length: numLayers }, fresh);
    for (let r = 0; r < rows; r++) {
      const from = source(r);
      if (!from) continue;
      for (let i = 0; i < numLayers; i++) {
        for (let h = 0; h < heads; h++) {
          const at = (r * heads + h) * capacity * d;
          keys[i]!.set(from.keys[i]![h]!, at);
          values[i]!.set(from.values[i]![h]!, at);
        }
      }
    }
    this.keys.splice(0, this.keys.length, ...keys);
    this.values.splice(0, this.values.length, ...values);
    this.filled.splice(0, this.filled.length, ...Array.from({ length: rows }, (_, r) => {
      const row = new Uint8Array(capacity);
      if (filled?.[r]) row.set(filled[r]!.subarray(0, this.length));
      return row;
    }));
    this.capacity = capacity;
    return this;
  }

  /** Row r's filled slots, per layer and head, as views into `from` (default: this cache). */
  private rowSlices(r: number, from = { keys: this.keys, values: this.values, capacity: this.capacity }): RowSlices {
    const { numKvHeads: heads, headDim: d } = this.config;
    const view = (buffer: Float32Array) => Array.from({ length: heads }, (_, h) => {
      const at = (r * heads + h) * from.capacity * d;
      return buffer.subarray(at, at + this.length * d);
    });
    return { keys: from.keys.map(view), values: from.values.map(view) };
  }
}

/** One row's filled slots: per layer, per head, [length, headDim]. */
interface RowSlices {
  keys: Float32Array[][];
  values: Float32Array[][];
}
