/**
 * The decode cache's slot bookkeeping (docs/design.md §Batched generation), shared by the
 * host cache (./kv-cache.ts) and the GPU-resident one (./device-kv-cache.ts): which slots of
 * each row hold a real token, how many are written, the capacity the graph sees, and the
 * token, mask and position feeds that follow from them. The keys and values themselves live
 * wherever the cache keeps them.
 *
 * - Every row has the same number of slots: rows are left-padded, and a padding slot is
 *   masked (its `filled` flag is 0), as is every slot past `length`.
 * - Capacity grows in blocks of {@link SLOT_BLOCK} slots, so attention reads at most a block
 *   of empty (masked) slots, and the graph's shapes change once a block, not every token.
 * - The graph always sees at least one slot, empty at first: ONNX Runtime's MatMul over a
 *   zero-length dimension is not to be trusted (docs/design.md §Batched generation).
 */
import { int64Tensor, ort } from './ort-session.js';

/** Slots added at a time when the cache is full. */
export const SLOT_BLOCK = 32;

/** `slots` rounded up to whole blocks. */
export function blocksFor(slots: number): number {
  return Math.max(1, Math.ceil(slots / SLOT_BLOCK)) * SLOT_BLOCK;
}

export class CacheSlots {
  /** Per row, how many of its written slots hold a real token (kept, not counted each step). */
  private readonly real: number[];

  constructor(
    /** Per row, per slot: 1 where the slot holds a real token. */
    private filled: Uint8Array[],
    /** Slots the graph sees per row (whole blocks). */
    public capacity: number,
    /** Slots written so far (the same for every row). */
    public length: number,
  ) {
    this.real = filled.map((row) => row.subarray(0, length).reduce((a, m) => a + m, 0));
  }

  /** One block of empty slots for `rows` rows. */
  static empty(rows: number): CacheSlots {
    return new CacheSlots(Array.from({ length: rows }, () => new Uint8Array(SLOT_BLOCK)), SLOT_BLOCK, 0);
  }

  get rows(): number {
    return this.filled.length;
  }

  /** How many real tokens each row holds: the position of its next token. */
  realTokens(): number[] {
    return [...this.real];
  }

  /**
   * The token feeds for `tokens` (one list per row, all the same length) after the cache, with
   * `mask` marking which of them are real (1) or padding (0); positions count real tokens only.
   */
  tokenFeeds(tokens: number[][], mask: number[][]): Record<string, ort.Tensor> {
    return this.feedsWithMask(tokens, mask, this.capacity + tokens[0]!.length, this.capacity);
  }

  /**
   * The token feeds for a graph that writes the tokens into the cache's next slots (decoder.ts
   * kvCache 'written'; the capacity must hold them, {@link widen}): the mask covers the slots as
   * they will be, the tokens' own included, and `write_slots` names the tokens' slots.
   */
  writtenTokenFeeds(tokens: number[][], mask: number[][]): Record<string, ort.Tensor> {
    const T = tokens[0]!.length, C = this.capacity;
    if (this.length + T > C) throw new Error(`${T} tokens do not fit after ${this.length} of ${C} slots: widen the cache first`);
    return { ...this.feedsWithMask(tokens, mask, C, this.length), write_slots: int64Tensor(Array.from({ length: T }, (_, t) => this.length + t), [T]) };
  }

  /**
   * input_ids, position_ids and attention_mask [rows, width]: each row's written slots, then
   * `mask`'s row from slot `at`, zeros elsewhere. The mask is written straight into the int64
   * array: built through number arrays, it took 11 ms a step at 16 rows of 2,048 slots (a step
   * of on-policy rollouts), a real share of a decode step on a GPU.
   */
  private feedsWithMask(tokens: number[][], mask: number[][], width: number, at: number): Record<string, ort.Tensor> {
    const T = tokens[0]!.length, R = this.rows;
    const data = new BigInt64Array(R * width);
    this.filled.forEach((row, r) => {
      const base = r * width;
      for (let s = 0; s < this.length; s++) if (row[s]) data[base + s] = 1n;
      mask[r]!.forEach((m, t) => m && (data[base + at + t] = 1n));
    });
    return {
      input_ids: int64Tensor(tokens.flat(), [R, T]),
      attention_mask: new ort.Tensor('int64', data, [R, width]),
      position_ids: int64Tensor(positionIdsFromMask(mask, this.real).flat(), [R, T]),
    };
  }

  /** The capacity `T` more slots need: the current one, or more whole blocks. */
  capacityFor(T: number): number {
    return this.length + T > this.capacity ? blocksFor(this.length + T) : this.capacity;
  }

  /** Records `mask`'s tokens in the next slots, widening every row to `capacity` first. */
  record(mask: number[][], capacity: number): void {
    this.widen(capacity);
    this.filled.forEach((row, r) => row.set(mask[r]!, this.length));
    mask.forEach((row, r) => (this.real[r] += row.reduce((a, m) => a + m, 0)));
    this.length += mask[0]!.length;
  }

  /** Gives every row `capacity` slots (at least the current capacity), the new ones empty. */
  widen(capacity: number): void {
    if (capacity === this.capacity) return;
    this.filled = this.filled.map((row) => {
      const wider = new Uint8Array(capacity);
      wider.set(row);
      return wider;
    });
    this.capacity = capacity;
  }

  /** The bookkeeping of the given rows, in that order (a row may repeat). */
  pick(rows: number[]): CacheSlots {
    return new CacheSlots(rows.map((r) => this.filled[r]!.slice()), this.capacity, this.length);
  }

  /** How many of row `row`'s first slots hold its first `tokens` real tokens (all it has written, when it has no more). */
  slotsHolding(row: number, tokens: number): number {
    if (tokens >= this.real[row]!) return this.length;
    const filled = this.filled[row]!;
    let slot = 0;
    for (let seen = 0; seen < tokens; slot++) seen += filled[slot]!;
    return slot;
  }

  /**
   * Rows of other caches side by side (./carried-rows.ts), each part its row's first `slots`
   * slots, every row as long as the longest: a shorter row's missing slots are masked, so it
   * reads as if padded there, and an absent part is a row with every slot empty. `capacity`:
   * whole blocks for the longest, unless given.
   */
  static joined(parts: ({ slots: CacheSlots; row: number; keep: number } | undefined)[], capacity?: number): CacheSlots {
    const length = Math.max(0, ...parts.map((p) => p?.keep ?? 0));
    capacity ??= blocksFor(length);
    return new CacheSlots(parts.map((p) => {
      const row = new Uint8Array(capacity);
      if (p) row.set(p.slots.filled[p.row]!.subarray(0, p.keep));
      return row;
    }), capacity, length);
  }
}

/**
 * HF-style position ids for a padded batch: each real token's index among the real tokens of
 * its row (after `pastReal` real tokens of that row), padding gets 0 (its result is never read).
 */
export function positionIdsFromMask(mask: number[][], pastReal: number[] = []): number[][] {
  return mask.map((row, r) => {
    let n = pastReal[r] ?? 0;
    return row.map((m) => (m ? n++ : 0));
  });
}

/** Whether `rows` keeps every row of `count`, in order (selecting it changes nothing). */
export function keepsEveryRow(rows: number[], count: number): boolean {
  return rows.length === count && rows.every((r, i) => r === i);
}

type Outputs = ort.InferenceSession.OnnxValueMapType;

/**
 * The decode cache as generation uses it (./batch-decode.ts): host memory (./kv-cache.ts) or
 * GPU memory (./device-kv-cache.ts). `feeds` gives a step's inputs (the GPU cache may first
 * widen itself, on the GPU: hence a promise there); `append` takes ownership of what the step
 * returned for the cache (the host cache's new keys and values, the GPU cache's whole written
 * cache); `select` hands this cache's contents to the cache it returns, so the caller uses
 * only that one afterwards; `dispose` frees what the cache holds (GPU memory at once, rather
 * than whenever the garbage collector runs). `carry` and `join` keep rows for a later batch and
 * start one from them (./carried-rows.ts).
 */
export interface DecodeCache {
  readonly rows: number;
  realTokens(): number[];
  feeds(tokens: number[][], mask: number[][]): Record<string, ort.Tensor> | Promise<Record<string, ort.Tensor>>;
  append(out: Outputs, mask: number[][]): void | Promise<void>;
  select(rows: number[]): DecodeCache | Promise<DecodeCache>;
  /**
   * Row `row`, kept for a later batch: a copy of its own, or, with `last` (the batch is done with
   * this cache), this cache where its rows can stay where they lie (the host's).
   */
  carry(row: number, last: boolean): CarriedPart | Promise<CarriedPart>;
  /**
   * One cache of carried rows (absent: an empty row), each its first `tokens` real tokens, with
   * room for `extra` slots more: what a batch continuing them starts from. Called on a part's
   * cache; the parts are all of its kind (one engine's). `order`: which part each row holds.
   */
  join(parts: (CarriedPart | undefined)[], extra: number): JoinedCache | Promise<JoinedCache>;
  dispose(): void;
}

/** A carried row: row `row` of `cache`, or its first `tokens` real tokens. */
export interface CarriedPart {
  cache: DecodeCache;
  row: number;
  tokens?: number;
}

/** A cache of carried rows and which part each of its rows holds. */
export interface JoinedCache {
  cache: DecodeCache;
  order: number[];
}

/** Makes an empty cache of `rows` rows with room for `reserve` slots. */
export type DecodeCacheFactory = (rows: number, reserve?: number) => DecodeCache;

/**
 * Frees the GPU-resident tensors among a run's outputs that nothing keeps (the new keys and
 * values of a run without the cache): GPU memory is not the garbage collector's to watch.
 */
export function releaseDeviceOutputs(out: Outputs): void {
  for (const value of Object.values(out)) {
    if ((value as ort.Tensor).location === 'gpu-buffer') (value as ort.Tensor).dispose();
  }
}
