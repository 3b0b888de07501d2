/**
 * The LM head and the log-prob of each target token, without a [tokens, vocabulary] tensor
 * (docs/design.md §Memory). For N hidden states h (the rows the caller gathered, e.g. the
 * response positions) and the head's rows w_v (./decoder.ts `headRows`):
 *
 *   logp_n = h_n·w_{t_n} − lse_n,   lse_n = log Σ_v exp(h_n·w_v)
 *
 * The target logit is one gathered row per token. The log-sum-exp runs over vocabulary chunks
 * of C rows with the running max m and sum s of an online softmax:
 *
 *   l = h·W_cᵀ  [N, C];  m' = max(m, max_v l);  s' = s·e^(m−m') + Σ_v e^(l−m')
 *
 * Its gradient, d lse_n / d h_n = Σ_v p_{n,v} w_v = E_p[w], accumulates in the same pass
 * (q' = q·e^(m−m') + e^(l−m')·W_c, then q / s). The pass runs on h with its gradient
 * stopped, and the gradient enters through lse + (h·q − stopgrad(h·q)): zero in value, q in
 * gradient. So autodiff keeps no chunk for the backward pass, the loss part holds O(N·C)
 * values at a time instead of O(N·V), and the formulas of the loss do not change.
 *
 * Order: ONNX has no control edges, so each chunk's slice of the head takes its start from
 * the previous chunk's last result (`after`, an exact 0 that depends on it). That puts the
 * chunks one after another in ONNX Runtime's schedule, each chunk's tensors freed before the
 * next is made, and keeps it from folding the slices into a second copy of the head at load time.
 *
 * Gemma 2's logits are soft-capped, z = c·tanh(h·w / c) (./softcap.ts): the target's and the
 * columns' logits through autodiff, the log-sum-exp over z, and its gradient
 * Σ_v p_{n,v}·(1 − (z_v / c)²)·w_v accumulated as above with each e weighted by that slope.
 *
 * `chunk: 0` builds the unchunked reference instead: h·Wᵀ → LogSoftmax → the target's entry,
 * with autodiff's own backward (what the chunked form is tested against).
 */
import { int, type GraphBuilder, type Shape } from '../graph/ir.js';
import { stopGradient } from '../graph/autodiff.js';
import { zeroAfter } from '../graph/ops/shape.js';
import { softcap, softcapSlope } from './softcap.js';

/**
 * Rows of the LM head per chunk of the log-sum-exp. The chunk's [N, C] logits and
 * exponentials are the loss part's memory, and the matmuls must stay large enough to run at
 * full speed: bench/train-memory.ts measures the choice (docs/design.md §Memory).
 */
export const DEFAULT_VOCAB_CHUNK = 8192;

export interface HeadInputs {
  /** float32 [N, H]. */
  hidden: string;
  /** The head's rows, float32 [V, H], or float16 (a quantised training step's, cast to fp32 a chunk at a time). */
  rows: string;
  /** int64 [N]. */
  targets: string;
  vocabSize: number;
  /** Gemma 2's final_logit_softcapping: every logit z becomes c·tanh(z / c); absent: none. */
  softcap?: number;
}

export interface HeadOptions {
  /** Vocabulary rows per chunk; 0: one LogSoftmax over the whole vocabulary. */
  chunk: number;
  /** Build the gradient path (training); without it the pass is the forward log-sum-exp only. */
  withGradient: boolean;
}

/** float32 [N]: the log-prob of each target. */
export function appendTargetLogprobs(b: GraphBuilder, x: HeadInputs, options: HeadOptions): string {
  return appendHeadLogprobs(b, x, options).logprobs;
}

/**
 * The log-prob of each target [N] and, given `columns` (int64 [N, K]: K token ids per row,
 * the top-K OPD teacher's), the log-probs of those K tokens [N, K], from the same
 * log-sum-exp. The K columns are K gathered head rows per row ([N, K, H], K·H values a row,
 * never a row of the whole vocabulary) times the hidden state, less lse; their gradient is
 * autodiff's through that product and lse's own (E_p[w]), as for the targets.
 */
export function appendHeadLogprobs(b: GraphBuilder, x: HeadInputs, options: HeadOptions, columns?: string): { logprobs: string; columns?: string } {
  if (options.chunk <= 0) return unchunked(b, x, columns);
  const targetLogit = targetLogits(b, x);
  const lse = logSumExp(b, x, options);
  if (!columns) return { logprobs: b.sub(targetLogit, lse) };
  // [N, K, H]·[N, H, 1] → [N, K]
  const columnLogits = softcap(b, b.squeeze(b.matmul(fp32(b, b.gather(x.rows, columns, 0)), b.unsqueeze(x.hidden, [-1])), [-1]), x.softcap);
  return { logprobs: b.sub(targetLogit, lse), columns: b.sub(columnLogits, b.unsqueeze(lse, [-1])) };
}

/** [N]: each target's logit, h·w_t (capped). */
function targetLogits(b: GraphBuilder, x: HeadInputs): string {
  return softcap(b, b.reduceSum(b.mul(x.hidden, fp32(b, b.gather(x.rows, x.targets, 0))), [-1], false), x.softcap);
}

function unchunked(b: GraphBuilder, x: HeadInputs, columns?: string): { logprobs: string; columns?: string } {
  const logits = softcap(b, b.matmul(x.hidden, b.transpose(fp32(b, x.rows), [1, 0])), x.softcap);
  const logprobs = b.logSoftmax(logits, -1);
  const target = b.squeeze(b.gatherElements(logprobs, b.unsqueeze(x.targets, [-1]), -1), [-1]);
  return { logprobs: target, ...(columns ? { columns: b.gatherElements(logprobs, columns, -1) } : {}) };
}

/**
 * The K most likely tokens of each row and their log-probs (float32 [N, K], descending; int64
 * [N, K]), and each target's log-prob [N], without a [N, V] tensor: each vocabulary chunk's
 * own top K joins the running top K (at most 2K candidates, TopK again), beside the chunk's
 * part of the log-sum-exp. Forward only (the top-K OPD teacher's pass). K ≤ the vocabulary.
 */
export function appendHeadTopK(b: GraphBuilder, x: HeadInputs, options: { chunk: number }, k: number): { logprobs: string; topLogprobs: string; topIndices: string } {
  if (k < 1 || k > x.vocabSize) throw new Error(`top-K: K must be in [1, ${x.vocabSize}] (the vocabulary), got ${k}`);
  const [n] = b.shapeOf(x.hidden) ?? ['N'];
  const topK = (values: string, count: number) => {
    const [v, i] = b.op('TopK', [values, b.int64s([count])], { axis: int(-1), largest: int(1), sorted: int(1) }, 2, [
      { dtype: 'float32', shape: [n!, count] }, { dtype: 'int64', shape: [n!, count] },
    ]);
    return { values: v!, indices: i! };
  };
  if (options.chunk <= 0) {
    const logprobs = b.logSoftmax(softcap(b, b.matmul(x.hidden, b.transpose(fp32(b, x.rows), [1, 0])), x.softcap), -1);
    const top = topK(logprobs, k);
    return { logprobs: b.squeeze(b.gatherElements(logprobs, b.unsqueeze(x.targets, [-1]), -1), [-1]), topLogprobs: top.values, topIndices: top.indices };
  }
  const [, width] = b.shapeOf(x.hidden) ?? ['N', 'H'];
  let best: { values: string; indices: string; count: number } | undefined;
  const { lse } = foldVocabularyChunks(b, x.vocabSize, options.chunk, x.hidden, (start, end, after) => {
    const rows = fp32(b, b.op('Slice', [x.rows, b.add(b.int64s([start]), after), b.int64s([end]), b.int64s([0])], {}, 1, [{ dtype: b.dtypeOf(x.rows), shape: [end - start, width!] }])[0]!);
    const logits = softcap(b, b.op('Gemm', [x.hidden, rows], { transB: int(1) }, 1, [{ dtype: 'float32', shape: [n!, end - start] }])[0]!, x.softcap);
    const own = topK(logits, Math.min(k, end - start));
    const ownIds = b.add(own.indices, b.scalar(start, 'int64'));
    if (!best) best = { values: own.values, indices: ownIds, count: Math.min(k, end - start) };
    else {
      const count = best.count + Math.min(k, end - start);
      const merged = topK(b.concat([best.values, own.values], -1), Math.min(k, count));
      const ids = b.gatherElements(b.concat([best.indices, ownIds], -1), merged.indices, -1);
      best = { values: merged.values, indices: ids, count: Math.min(k, count) };
    }
    return { logits };
  });
  return { logprobs: b.sub(targetLogits(b, x), lse), topLogprobs: b.sub(best!.values, b.unsqueeze(lse, [-1])), topIndices: best!.indices };
}

/** [N]: lse_n, with the gradient E_p[w] (capped: E_p[(1 − (z / c)²)·w]) when options.withGradient. */
function logSumExp(b: GraphBuilder, x: HeadInputs, options: HeadOptions): string {
  const h = stopGradient(b, x.hidden);
  const [n, width] = b.shapeOf(x.hidden) ?? ['N', 'H'];
  const f32 = (shape: Shape) => [{ dtype: 'float32' as const, shape }];
  const { lse, q, s } = foldVocabularyChunks(b, x.vocabSize, options.chunk, h, (start, end, after) => {
    const sliced = b.op('Slice', [x.rows, b.add(b.int64s([start]), after), b.int64s([end]), b.int64s([0])], {}, 1, [{ dtype: b.dtypeOf(x.rows), shape: [end - start, width!] }])[0]!;
    const rows = fp32(b, sliced);
    const logits = softcap(b, b.op('Gemm', [h, rows], { transB: int(1) }, 1, f32([n!, end - start]))[0]!, x.softcap);
    // d lse / d h: each row's probability times the cap's slope at its logit.
    const slope = (e: string) => (x.softcap ? b.mul(e, softcapSlope(b, logits, x.softcap)) : e);
    return { logits, weighted: options.withGradient ? (e) => b.matmul(slope(e), rows) : undefined };
  });
  if (!options.withGradient) return lse;
  const expected = b.div(q!, s); // E_p[w], [N, H]
  const hq = b.reduceSum(b.mul(x.hidden, expected), [-1], false);
  return b.add(lse, b.sub(hq, stopGradient(b, hq)));
}

/** x as float32: cast when it is a half-precision table's rows. */
const fp32 = (b: GraphBuilder, x: string) => (b.dtypeOf(x) === 'float32' ? x : b.cast(x, 'float32'));

/** One vocabulary chunk's part of the online softmax. */
export interface VocabularyChunk {
  /** float32 [N, end − start]: the chunk's logits. */
  logits: string;
  /** Σ_v e_v·w_v of the chunk, given its e = exp(logits − m) [N, C]; kept as the running q. */
  weighted?: (e: string) => string;
}

/**
 * Runs the online softmax over vocabulary chunks [start, end) of `chunk` rows: the running max
 * m, the sum s of exp(l − m) and, when chunks give `weighted`, q = Σ e·w, each chunk rescaling
 * the previous ones. `chunkOf` builds chunk [start, end)'s logits so that they run after
 * `after`, an int64 [1] zero made after the previous chunk's results (the first chunk's after
 * `first`; ../graph/ops/shape.ts zeroAfter), which keeps the chunks one after another in ONNX
 * Runtime's schedule.
 * Returns lse = m + log s [N], and s and q as [N, 1] and [N, H].
 */
export function foldVocabularyChunks(
  b: GraphBuilder, vocabSize: number, chunk: number, first: string,
  chunkOf: (start: number, end: number, after: string) => VocabularyChunk,
): { lse: string; s: string; q?: string } {
  let m: string | undefined, s: string | undefined, q: string | undefined;
  let after = zeroAfter(b, [first]);
  for (let start = 0; start < vocabSize; start += chunk) {
    const end = Math.min(vocabSize, start + chunk);
    const { logits, weighted } = chunkOf(start, end, after);
    const n = b.shapeOf(logits)?.[0] ?? 'N';
    const chunkMax = b.op('ReduceMax', [logits, b.int64s([1])], { keepdims: int(1) }, 1, [{ dtype: 'float32', shape: [n, 1] }])[0]!;
    const mNext = m ? b.max(m, chunkMax) : chunkMax;
    const e = b.exp(b.sub(logits, mNext));
    const sChunk = b.reduceSum(e, [1], true);
    const qChunk = weighted?.(e);
    if (m) {
      const rescale = b.exp(b.sub(m, mNext));
      s = b.add(b.mul(s!, rescale), sChunk);
      q = qChunk && b.add(b.mul(q!, rescale), qChunk);
    } else {
      s = sChunk;
      q = qChunk;
    }
    m = mNext;
    // The next chunk starts once this one's results are made: q, and s too, for with s left out
    // ONNX Runtime ran every chunk's Σ e at the end, keeping each chunk's [N, C] exponentials
    // alive to there, N × V floats in all (docs/design.md §Memory).
    after = zeroAfter(b, q ? [q, s!] : [s!]);
  }
  return { lse: b.squeeze(b.add(m!, b.log(s!)), [1]), s: s!, q };
}
