/**
 * Batched generation in chunks of tokens through the decode chunk graph
 * (./decode-chunk-graph.ts; docs/design.md §Devices, "Decoding in chunks on CUDA"): the graph
 * samples, so one run decodes several tokens and the cache crosses to the device once a run,
 * not once a token. What it gives is what ./batch-decode.ts's token-by-token loop gives: every
 * sequence draws from its own PRNG stream the draws the host sampler would make, and the host
 * applies the same stop ids, stop strings and budgets to the tokens that come back.
 *
 * - The prompts' prefill (all but each prompt's last token) runs once per prompt, in pieces,
 *   through the same graph with one step whose token is not used. A prompt's n sequences then
 *   take copies of its cache rows and each feeds the prompt's last token in its first run, so
 *   each samples its first token with its own draw.
 * - A run's length grows 1, 4, 16, … up to {@link CHUNK_TOKENS}: the first token shows at once,
 *   and streaming later comes in bursts of at most that many tokens.
 * - A row that ends inside a chunk has sampled on until the chunk ended (the graph stops early
 *   only once every row has ended); the host reads its tokens up to its end and drops the row.
 */
import type { ModelConfig } from './hf-checkpoint.js';
import { KvCache } from './kv-cache.js';
import { int64Tensor, ort } from './ort-session.js';
import { carryEnded, prefillInPieces, results, startBatch, type DecodeLoop, type DecodeSettings } from './batch-decode.js';

/** The most tokens one run decodes: each run sends the whole cache to the device, so this divides that cost. */
export const CHUNK_TOKENS = 16;

type Feeds = Record<string, ort.Tensor>;

/** The decode chunk graph's sampling inputs for a run of `steps` over rows with these draws and budgets. */
function samplingFeeds(steps: number, draws: number[][], budgets: number[], settings: DecodeSettings): Feeds {
  const uniforms = new Float64Array(steps * draws.length);
  draws.forEach((row, r) => row.forEach((u, t) => (uniforms[t * draws.length + r] = u)));
  const stops = settings.stopIds.size ? [...settings.stopIds] : [-1];
  return {
    steps: int64Tensor([steps], []),
    uniforms: new ort.Tensor('float64', uniforms, [steps, draws.length]),
    temperature: new ort.Tensor('float64', Float64Array.of(settings.temperature), []),
    top_p: new ort.Tensor('float64', Float64Array.of(settings.topP), []),
    stop_ids: int64Tensor(stops, [stops.length]),
    budget: int64Tensor(budgets, [budgets.length]),
  };
}

/**
 * Generates every sequence of `requests` over `prompts` with the decode chunk graph (`run`);
 * results in request order, as {@link generateSequences} gives them.
 */
export const generateInChunks: DecodeLoop = async (config, run, prompts, requests, settings, onToken) => {
  const start = await startBatch(config, prompts, requests, settings, (rows, reserve) => KvCache.empty(config, rows, reserve));
  const { seqs, used, padded: prompt } = start;
  let cache = start.cache as KvCache;
  if (prompt.ids[0]!.length > 1) {
    // All but the last token, through the token-by-token loop's prefill; a step of one sample, unread.
    const unread = samplingFeeds(1, used.map(() => [0]), used.map(() => 1), settings);
    const allButLast = (rows: number[][]) => rows.map((row) => row.slice(0, -1));
    await prefillInPieces((feeds) => run({ ...feeds, ...unread }), cache, { ids: allButLast(prompt.ids), mask: allButLast(prompt.mask) }, settings.prefillPiece, config.numHeads);
  }
  cache = cache.select(requests.map((r) => used.indexOf(r.prompt)));
  // Per row of the cache: its sequence, and the token it feeds next (not yet in the cache).
  let active = seqs.map((_, i) => i);
  let pending = requests.map((r) => prompt.ids[used.indexOf(r.prompt)]!.at(-1)!);
  for (let chunk = 1; ; chunk = Math.min(CHUNK_TOKENS, chunk * 4)) {
    // Tokens each row had before this chunk: its cache holds its prompt and those but the last (the pending one).
    const before = active.map((i) => seqs[i]!.out.tokens.length);
    const left = active.map((i) => seqs[i]!.request.maxNew - seqs[i]!.out.tokens.length);
    const steps = Math.min(chunk, Math.max(...left));
    const mask = active.map(() => [1]);
    const out = await run({
      ...cache.feeds(pending.map((t) => [t]), mask),
      ...samplingFeeds(steps, active.map((i) => seqs[i]!.draws(steps, settings)), left, settings),
    });
    const taken = out.tokens!.dims[1]!;
    const tokens = out.tokens!.data as BigInt64Array, logprobs = out.token_logprobs!.data as Float32Array;
    active.forEach((i, row) => {
      const seq = seqs[i]!;
      for (let t = 0; t < taken && !seq.done; t++) {
        const token = seq.accept(Number(tokens[row * taken + t]!), logprobs[row * taken + t]!, settings);
        onToken?.(i, token, logprobs[row * taken + t]!);
      }
    });
    const keep = active.map((_, row) => row).filter((row) => !seqs[active[row]!]!.done);
    // An ended row is carried as it was before this chunk: its tokens from the chunk are fed again.
    if (settings.carry) {
      const held = (i: number, row: number) => [...prompts[seqs[i]!.request.prompt]!, ...seqs[i]!.out.tokens.slice(0, before[row])].slice(0, -1);
      await carryEnded(settings, cache, active.flatMap((i, row) => (seqs[i]!.done ? [{ row, ids: held(i, row), out: seqs[i]!.out }] : [])), !keep.length);
    }
    if (!keep.length) break;
    if (settings.stopFlag && Atomics.load(settings.stopFlag, 0) !== 0) {
      for (const row of keep) seqs[active[row]!]!.cancel();
      break;
    }
    cache.append(out, active.map(() => new Array<number>(taken).fill(1)));
    cache = cache.select(keep);
    pending = keep.map((row) => seqs[active[row]!]!.out.tokens.at(-1)!);
    active = keep.map((row) => active[row]!);
  }
  return results(seqs, settings);
};
