/**
 * Batched generation (docs/design.md §Batched generation): several prompts, each with any
 * number of sequences, decoded together through the generate graph's KV cache.
 *
 * - One prefill for all prompts: left-padded to the longest, with an attention mask, so every
 *   row's last position is a real token and `last_logprobs` reads it.
 * - A prompt's n sequences share its prefill: its KV rows are copied n ways afterwards.
 * - Every sequence samples with its own PRNG stream, seeded by its own seed, and has its own
 *   budget and stop conditions, so sequence i gives the tokens a single run with seed i gives.
 * - A finished sequence leaves the batch (its KV rows are dropped), so the rest run on a
 *   smaller batch.
 */
import type { ModelConfig } from './hf-checkpoint.js';
import { releaseDeviceOutputs, type DecodeCache, type DecodeCacheFactory } from './cache-slots.js';
import type { CarriedRows } from './carried-rows.js';
import { KvCache } from './kv-cache.js';
import type { ort } from './ort-session.js';
import { sampleToken, seededRandom } from './sampling.js';
import { prefillPieceAt } from '../../src-shared/train-memory.js';

/** One sequence to generate: the prompt it continues (an index), its seed and its token budget. */
export interface SequenceRequest {
  prompt: number;
  seed: number;
  maxNew: number;
}

/** 'cancelled': the caller's stop flag was raised (docs/design.md §Batched generation). */
export type FinishReason = 'eos' | 'stop' | 'length' | 'cancelled';

export interface GeneratedTokens {
  /** Generated ids, the stop token included when generation ended on one. */
  tokens: number[];
  /** log p(token) under the model (temperature 1, before top-p), one per token, the graph's fp32 log-softmax. */
  logprobs: number[];
  /** Decoded text of the generated tokens, special tokens skipped, cut at a stop string. */
  text: string;
  finishReason: FinishReason;
}

export interface DecodeSettings {
  temperature: number;
  topP: number;
  stopIds: Set<number>;
  stopStrings: string[];
  /** false recomputes every sequence whole at each step (slow; a check of the cache). */
  useKvCache: boolean;
  decode: (ids: number[]) => string;
  /** Whether each output gets its decoded `text` (a stop string's cut text is kept either way). */
  decodeText: boolean;
  /**
   * The most prompt tokens per row one prefill step feeds the generate graph; a longer prompt
   * goes in steps, each attending to the cache the earlier ones filled (docs/design.md
   * §Batched generation, "Long prompts").
   */
  prefillPiece: number;
  /**
   * A flag over a SharedArrayBuffer that another thread sets to 1 to stop every sequence after
   * the token it is on (the app's Stop button). Shared memory rather than a message: the
   * worker's event loop does not run while it generates.
   */
  stopFlag?: Int32Array;
  /**
   * Cache rows of earlier batches that this batch's prompts may continue, and where its ended
   * sequences leave theirs (./carried-rows.ts; the rollout manager's later turns).
   */
  carry?: CarriedRows;
  /**
   * Makes the decode cache: in host memory by default (./kv-cache.ts), on the GPU where the
   * device keeps tensors there (./device-kv-cache.ts, docs/design.md §Devices).
   */
  newCache?: DecodeCacheFactory;
}

/**
 * Prompt tokens per row in one prefill step (docs/design.md §Batched generation, "Long
 * prompts"): a shorter prompt prefills in one step.
 */
export const PREFILL_PIECE = 512;

// A prefill step's cap over all its rows, and the piece a row gets under it, are the memory
// estimate's too (its rollouts' cache), so they live beside it.
export { PREFILL_STEP_TOKENS, prefillPieceAt, prefillPieceFor } from '../../src-shared/train-memory.js';

type Feeds = Record<string, ort.Tensor>;
type Outputs = ort.InferenceSession.OnnxValueMapType;

/** Sequences left-padded to the longest: their ids and masks (1 = real token). */
function leftPadded(seqs: number[][]): { ids: number[][]; mask: number[][] } {
  const T = Math.max(...seqs.map((s) => s.length));
  const ids = seqs.map((s) => [...new Array<number>(T - s.length).fill(0), ...s]);
  const mask = seqs.map((s) => [...new Array<number>(T - s.length).fill(0), ...new Array<number>(s.length).fill(1)]);
  return { ids, mask };
}

function firstStop(text: string, stops: string[]): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s);
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}

/** A sequence in flight: what it has generated and whether it is done. */
export class Sequence {
  readonly out: GeneratedTokens = { tokens: [], logprobs: [], text: '', finishReason: 'length' };
  done = false;
  private readonly rand: () => number;

  constructor(readonly request: SequenceRequest) {
    this.rand = seededRandom(request.seed);
  }

  /** Samples the next token from its row of log-probs; records it and whether it ends the sequence. */
  take(logprobs: Float32Array, s: DecodeSettings): number {
    const { token, logprob } = sampleToken(logprobs, s.temperature, s.topP, this.rand);
    return this.accept(token, logprob, s);
  }

  /** The next `count` draws of this sequence's PRNG: what sampling `count` tokens takes (none when greedy). */
  draws(count: number, s: DecodeSettings): number[] {
    return Array.from({ length: count }, () => (s.temperature > 0 ? this.rand() : 0));
  }

  /** Records a token chosen for this sequence (by {@link take}, or by a graph that samples) and whether it ends it. */
  accept(token: number, logprob: number, s: DecodeSettings): number {
    const out = this.out;
    out.tokens.push(token);
    out.logprobs.push(logprob);
    if (s.stopIds.has(token)) return this.finish('eos', token);
    if (s.stopStrings.length) {
      const text = s.decode(out.tokens);
      const cut = firstStop(text, s.stopStrings);
      if (cut >= 0) {
        out.text = text.slice(0, cut);
        return this.finish('stop', token);
      }
    }
    if (out.tokens.length >= this.request.maxNew) this.finish('length', token);
    return token;
  }

  /** Stopped from outside: what was generated so far is the result. */
  cancel(): void {
    this.finish('cancelled', -1);
  }

  private finish(reason: FinishReason, token: number): number {
    this.out.finishReason = reason;
    this.done = true;
    return token;
  }
}

/**
 * Feeds the left-padded prompts into `cache` (empty, or holding carried rows) at most `piece`
 * tokens per row at a time ({@link prefillPieceAt}: fewer with many rows, and fewer as the keys
 * its queries read grow past what one copy of their attention scores may take, for a model of
 * `heads` query heads); the last step's outputs (its last log-probs) are the prompts'. The chunk
 * loop (./chunk-decode.ts) prefills through it too. In pieces, the largest attention value is
 * [heads, piece, prompt] rather than [heads, prompt, prompt], and the generate graph's packed
 * weights serve a prompt of any length.
 */
export async function prefillInPieces(run: (feeds: Feeds) => Promise<Outputs>, cache: DecodeCache, prompts: { ids: number[][]; mask: number[][] }, piece: number, heads: number): Promise<Outputs> {
  const length = prompts.ids[0]!.length, rows = prompts.ids.length;
  const held = Math.max(0, ...cache.realTokens());
  let out: Outputs | undefined;
  for (let start = 0; start < length; ) {
    const step = prefillPieceAt(rows, piece, heads, held + start + piece);
    const cut = (ids: number[][]) => ids.map((row) => row.slice(start, start + step));
    const mask = cut(prompts.mask);
    out = await run(await cache.feeds(cut(prompts.ids), mask));
    await cache.append(out, mask);
    start += step;
  }
  return out!;
}

/**
 * A way to generate every sequence of `requests` over `prompts` with one graph (`run`), results
 * in request order: token by token (below) or in chunks (./chunk-decode.ts). `onToken(i, token,
 * logprob)` sees each token of sequence i as it is chosen.
 */
export type DecodeLoop = (
  config: ModelConfig,
  run: (feeds: Feeds) => Promise<Outputs>,
  prompts: number[][],
  requests: SequenceRequest[],
  settings: DecodeSettings,
  onToken?: (sequence: number, token: number, logprob: number) => void,
) => Promise<GeneratedTokens[]>;

/** A batch's sequences and what it starts from ({@link startBatch}). */
export interface BatchStart {
  seqs: Sequence[];
  /** The prompts the sequences use, each once, in the order of the cache's rows: first use, or the order joined carried rows lie in. */
  used: number[];
  /** What of each used prompt is still to be fed (all of it unless a carried row holds its start), left-padded. */
  padded: { ids: number[][]; mask: number[][] };
  /** The cache the padded tokens go after: the carried rows the prompts continue, side by side, or empty. */
  cache: DecodeCache;
}

/**
 * The sequences of `requests` and the cache they start from: the rows of `settings.carry` that
 * the prompts continue (./carried-rows.ts), each prompt then feeding only the rest of its ids;
 * else `empty(rows, reserve)`. The cache has memory reserved for the prompts and every budget.
 */
export async function startBatch(config: ModelConfig, prompts: number[][], requests: SequenceRequest[], settings: DecodeSettings, empty: DecodeCacheFactory): Promise<BatchStart> {
  const seqs = requests.map((r) => new Sequence(r));
  const maxNew = Math.max(...requests.map((r) => r.maxNew));
  let used = [...new Set(requests.map((r) => r.prompt))];
  let carried = settings.carry?.takeFor(used.map((p) => prompts[p]!)) ?? [];
  let joined: DecodeCache | undefined;
  if (carried.some(Boolean)) {
    // The joined cache picks the order of its rows (the host's: the last batch's stay where they lie); the prompts follow it.
    const rest = Math.max(...used.map((p, u) => prompts[p]!.length - (carried[u]?.tokens ?? 0)));
    const { cache, order } = await carried.find(Boolean)!.cache.join(carried, rest + maxNew + (settings.carry?.room ?? 0));
    [joined, used, carried] = [cache, order.map((u) => used[u]!), order.map((u) => carried[u])];
  }
  const padded = leftPadded(used.map((p, u) => prompts[p]!.slice(carried[u]?.tokens ?? 0)));
  const slotsAfter = padded.ids[0]!.length + maxNew;
  return { seqs, used, padded, cache: joined ?? empty(used.length, slotsAfter + (settings.carry?.room ?? 0)) };
}

/**
 * Keeps, for a later batch (`settings.carry`), the cache rows of sequences that have just ended
 * (not those stopped from outside) and that the carry wants: `ids` is what each row holds.
 * `last`: the cache is not used after this, so the host's rows are kept where they lie; else,
 * and always for the GPU's cache (which the batch disposes), each is copied out first.
 */
export async function carryEnded(settings: DecodeSettings, cache: DecodeCache, ended: { row: number; ids: number[]; out: GeneratedTokens }[], last: boolean): Promise<void> {
  const carry = settings.carry;
  if (!carry) return;
  for (const { row, ids, out } of ended) {
    if (!carry.wanted(out)) continue;
    const kept = await cache.carry(row, last);
    carry.keep(ids, kept.cache, kept.row);
  }
}

/** Token by token: `run` runs the generate graph (last_logprobs + the new tokens' keys and values). */
export const generateSequences: DecodeLoop = async (config, run, prompts, requests, settings, onToken) => {
  const newCache = settings.newCache ?? ((rows: number, reserve?: number) => KvCache.empty(config, rows, reserve));
  const start = await startBatch(config, prompts, requests, settings, newCache);
  const { seqs, used, padded: prefill } = start;
  /** One run over whole sequences and an empty cache (the check without the cache). */
  const runWhole = async (ids: number[][], mask: number[][]) => {
    const empty = newCache(ids.length);
    try {
      const result = await run(await empty.feeds(ids, mask));
      releaseDeviceOutputs(result);
      return result;
    } finally {
      empty.dispose();
    }
  };
  let cache = start.cache;
  try {
    let out = settings.useKvCache
      ? await prefillInPieces(run, cache, prefill, settings.prefillPiece, config.numHeads)
      : await runWhole(prefill.ids, prefill.mask);
    // Row of the current log-probs and cache for each sequence still running.
    let rows = requests.map((r) => used.indexOf(r.prompt));
    let active = seqs.map((_, i) => i);
    const V = config.vocabSize;
    for (;;) {
      const logprobs = out.last_logprobs!.data as Float32Array;
      const last = active.map((i, j) => {
        const token = seqs[i]!.take(logprobs.subarray(rows[j]! * V, (rows[j]! + 1) * V), settings);
        onToken?.(i, token, seqs[i]!.out.logprobs.at(-1)!);
        return token;
      });
      // Positions (in `active`) of the sequences that go on.
      const keep = active.map((_, j) => j).filter((j) => !seqs[active[j]!]!.done);
      if (settings.carry && settings.useKvCache) {
        const ended = active.flatMap((i, j) => {
          const s = seqs[i]!;
          return s.done ? [{ row: rows[j]!, ids: [...prompts[s.request.prompt]!, ...s.out.tokens.slice(0, -1)], out: s.out }] : [];
        });
        await carryEnded(settings, cache, ended, !keep.length);
      }
      if (!keep.length) break;
      if (settings.stopFlag && Atomics.load(settings.stopFlag, 0) !== 0) {
        for (const j of keep) seqs[active[j]!]!.cancel();
        break;
      }
      if (settings.useKvCache) {
        cache = await cache.select(keep.map((j) => rows[j]!));
        const mask = keep.map(() => [1]);
        out = await run(await cache.feeds(keep.map((j) => [last[j]!]), mask));
        await cache.append(out, mask);
      } else {
        const whole = leftPadded(keep.map((j) => {
          const s = seqs[active[j]!]!;
          return [...prompts[s.request.prompt]!, ...s.out.tokens];
        }));
        out = await runWhole(whole.ids, whole.mask);
      }
      active = keep.map((j) => active[j]!);
      rows = keep.map((_, j) => j);
    }
  } finally {
    cache.dispose();
  }
  return results(seqs, settings);
};

/** What each sequence generated, with its text decoded where asked (a stop string's cut text is already there). */
export function results(seqs: Sequence[], settings: DecodeSettings): GeneratedTokens[] {
  return seqs.map((s) => {
    if (settings.decodeText && s.out.finishReason !== 'stop') s.out.text = settings.decode(s.out.tokens);
    return s.out;
  });
}
