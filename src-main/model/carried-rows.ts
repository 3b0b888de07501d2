/**
 * Decode-cache rows that a batch's finished sequences leave for a later batch that continues
 * them (docs/design.md §Rollouts, "Later turns continue the cache"; §Batched generation). The
 * rollout manager's next turn of an episode is its tokens so far, the end of its reply, a tool's
 * turn and a new generation prompt; with the episode's row carried over, only those new tokens
 * are prefilled, not the whole conversation again. The engine keeps a store of its own for calls
 * with `reusePrefix` (a chat's next message, the local judge's and evaluation replay's next
 * batch), dropped after {@link REUSE_KEEP_MS} without another.
 *
 * - A row holds the keys and values of exactly `ids` (a sequence's prompt and every token it
 *   generated but the last, which was sampled and never fed). It serves a prompt for as many of
 *   its first ids as the prompt begins with, leaving at least one prompt token to feed; its slots
 *   past those are masked. So a carried row never changes what a prompt means, only what has
 *   to be computed for it.
 * - Each batch takes the rows its prompts continue and drops the rest, so the store holds one
 *   batch's rows at most; whoever owns the store clears it when its batches are done.
 * - Either cache: host memory's (./kv-cache.ts: the CPU, and CUDA's chunks), whose rows may
 *   stay in the batch's own memory; or GPU memory's (./device-kv-cache.ts: WebGPU), where each
 *   kept row is a copy of its own on the GPU, freed (`dispose`) as soon as the store drops it,
 *   not whenever the garbage collector runs.
 */
import { sharedPrefixLength } from '../../src-shared/shared-prefix.js';
import type { DecodeCache } from './cache-slots.js';

/**
 * {@link CarriedRows.room}'s default: a tool's turn or two of tokens. Reserved memory is not
 * touched until written (where the system commits memory lazily, as Linux and macOS do), and a
 * longer turn only makes the cache grow by a copy, as any batch past its reserve does.
 */
export const CARRY_ROOM = 512;

/**
 * How long the engine keeps what a `reusePrefix` call left for the next such call (a chat's
 * next message usually comes within it); then it is dropped, as Ollama unloads an idle model.
 */
export const REUSE_KEEP_MS = 5 * 60_000;

/** What a sequence generated and why it stopped (batch-decode's GeneratedTokens, which imports this module). */
export interface EndedSequence {
  tokens: number[];
  finishReason: string;
}

/** Row `row` of `cache`, which holds the keys and values of `ids`. */
export interface CarriedRow {
  ids: number[];
  cache: DecodeCache;
  row: number;
}

/** A row taken for a prompt: its first `tokens` ids are the prompt's first (the rest of the row is not used). */
export interface TakenRow extends CarriedRow {
  tokens: number;
}

/** How many of `ids` begin `prompt`, leaving at least one prompt token to feed. */
function shared(prompt: number[], ids: number[]): number {
  return Math.max(0, Math.min(sharedPrefixLength(ids, prompt), prompt.length - 1));
}

export class CarriedRows {
  private rows: CarriedRow[] = [];
  /**
   * Whether a sequence that ended with `out` goes on in a later batch: only its row is kept
   * (the rollout manager: a reply that calls a tool, before the last turn). Default: every one.
   */
  wanted: (out: EndedSequence) => boolean = () => true;
  /**
   * Slots of room (memory reserved, not touched) that a batch's cache keeps beyond its own
   * prompts and budgets, so that the next batch, continuing its rows with a few more tokens
   * each (a tool's turn), grows it in place rather than into a second cache beside it.
   */
  room = CARRY_ROOM;
  private expiry?: ReturnType<typeof setTimeout>;

  get size(): number {
    return this.rows.length;
  }

  /** Keeps row `row` of `cache` (which nothing changes afterwards), holding `ids`. */
  keep(ids: number[], cache: CarriedRow['cache'], row: number): void {
    this.rows.push({ ids, cache, row });
  }

  /**
   * For each prompt, the kept row that holds the most of its first tokens, or undefined; each
   * row serves one prompt. Rows a prompt continues whole go first (a later turn and its own
   * episode's row); then a row may serve a prompt it shares only a beginning with (a chat whose
   * history the template renders otherwise than the reply was generated, or another
   * conversation with the same system prompt), cut to what they share. Every row is then
   * dropped from the store: a batch's own rows replace them.
   */
  takeFor(prompts: number[][]): (TakenRow | undefined)[] {
    const left = [...this.rows];
    this.rows = [];
    const taken: (TakenRow | undefined)[] = prompts.map(() => undefined);
    for (const whole of [true, false]) {
      prompts.forEach((prompt, p) => {
        if (taken[p]) return;
        let best = -1, bestTokens = 0;
        left.forEach((r, i) => {
          const n = shared(prompt, r.ids);
          if ((whole ? n === r.ids.length : n > 0) && n > bestTokens) [best, bestTokens] = [i, n];
        });
        if (best >= 0) taken[p] = { ...left.splice(best, 1)[0]!, tokens: bestTokens };
      });
    }
    // Rows no prompt took go now (a host row may share its cache with a taken one: that stays).
    release(left, taken.filter((t) => t !== undefined));
    return taken;
  }

  /** Drops every kept row: GPU memory is freed now, host memory goes with the garbage collector. */
  clear(): void {
    release(this.rows, []);
    this.rows = [];
    clearTimeout(this.expiry);
  }

  /** Drops the rows kept now (and any kept later) `ms` from now, unless cleared or called again first; the timer keeps no process alive. */
  expireAfter(ms: number): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(() => this.clear(), ms);
    this.expiry.unref?.();
  }
}

/** Disposes the caches of `dropped` rows that none of `still` uses. */
function release(dropped: CarriedRow[], still: CarriedRow[]): void {
  const used = new Set(still.map((r) => r.cache));
  for (const cache of new Set(dropped.map((r) => r.cache))) if (!used.has(cache)) cache.dispose();
}
