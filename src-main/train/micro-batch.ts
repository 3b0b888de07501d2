/**
 * Gradient accumulation (docs/design.md §Micro-batches): the rows of a step's batch cut into
 * micro-batches that go through the step's graphs one at a time, so that the memory a pass
 * needs is that of its micro-batch, not of the batch. The batch stays the optimizer's: the
 * training step (./step-engine.ts) feeds every micro-batch the weight of each of its tokens in
 * the whole batch's mean (./step-feeds.ts lossWeightGrid), so each pass gives its share of the
 * batch's loss, metrics and gradients, and their sums are the one-pass step's; then one update.
 *
 * A micro-batch is rows [start, start + rows) of the batch, cut to its own longest row (padding
 * is on the right, ./batches.ts padBatch), every per-token grid of the batch carried along. The
 * answers of a pass (log-probs, values, a teacher's top K) go back to the batch's grid with
 * {@link placeRows}. How many rows a pass takes is the run's choice (src-shared/memory-verdict.ts
 * memoryVerdict: the most the memory estimate fits, or --micro-batch); it is no part of the math.
 */
import type { StepBatch, TeacherTopK } from './training-step.js';

/** One micro-batch: its rows' place in the batch, the rows as a batch of their own, and the extra grids asked for, cut alike. */
export interface MicroBatch {
  /** The batch's row this micro-batch starts at. */
  start: number;
  batch: StepBatch;
  /** The grids handed to {@link microBatches} besides the batch's own, cut the same way. */
  grids: Float32Array[];
}

/** The per-token [B, T] grids a StepBatch may carry, besides the teacher's top K (K per cell). */
const GRIDS = ['inputIds', 'attentionMask', 'positionIds', 'responseMask', 'oldLogprobs', 'advantages', 'refLogprobs', 'oldFromPolicy', 'teacherLogprobs', 'opdWeights', 'distillWeights', 'returns', 'valuesOld'] as const;

type Grid = Float32Array | BigInt64Array | Int32Array;

/**
 * The batch as micro-batches of `rows` rows (the last may have fewer); the batch itself, uncut,
 * when `rows` holds all of it. `extra`: more [B, T] grids to cut with it (the loss weights).
 * The batch's arrays must have their sizes (the step checks them first).
 */
export function microBatches(batch: StepBatch, rows: number | undefined, extra: Float32Array[] = []): MicroBatch[] {
  if (rows === undefined || rows >= batch.batch) return [{ start: 0, batch, grids: extra }];
  const parts: MicroBatch[] = [];
  for (let start = 0; start < batch.batch; start += rows) {
    const end = Math.min(batch.batch, start + rows);
    const T = usedLength(batch, start, end);
    const part = { batch: end - start, seqLen: T } as StepBatch;
    for (const key of GRIDS) {
      const from = batch[key] as Grid | undefined;
      if (from) (part as unknown as Record<string, Grid>)[key] = cutRows(from, batch.seqLen, start, end, T);
    }
    if (batch.teacherTopK) {
      const { k, logprobs, indices } = batch.teacherTopK;
      part.teacherTopK = { k, logprobs: cutRows(logprobs, batch.seqLen, start, end, T, k), indices: cutRows(indices, batch.seqLen, start, end, T, k) } satisfies TeacherTopK;
    }
    parts.push({ start, batch: part, grids: extra.map((g) => cutRows(g, batch.seqLen, start, end, T)) });
  }
  return parts;
}

/** The longest row of rows [start, end): one past its last real or trained token; at least 2 (a step's smallest row). */
function usedLength(batch: StepBatch, start: number, end: number): number {
  const T = batch.seqLen;
  let used = 2;
  for (let r = start; r < end; r++) {
    for (let t = T - 1; t >= used; t--) {
      const k = r * T + t;
      if (batch.attentionMask[k] !== 0n || batch.responseMask[k] !== 0) {
        used = t + 1;
        break;
      }
    }
  }
  return Math.min(used, T);
}

/** Rows [start, end) of a [B, T·stride] grid, each cut to its first `T` cells (of `stride` values). */
function cutRows<A extends Grid>(grid: A, seqLen: number, start: number, end: number, T: number, stride = 1): A {
  const out = new (grid.constructor as new (n: number) => A)((end - start) * T * stride);
  for (let r = start; r < end; r++) out.set(grid.subarray(r * seqLen * stride, (r * seqLen + T) * stride) as never, (r - start) * T * stride);
  return out;
}

/** A micro-batch's answer on its [b, t·stride] grid, laid on the batch's [B, T·stride] grid at its rows (the cells past t stay as they are). */
export function placeRows<A extends Float32Array | Int32Array>(into: A, intoT: number, from: A, part: MicroBatch, stride = 1): void {
  const { batch: b, seqLen: t } = part.batch;
  for (let r = 0; r < b; r++) into.set(from.subarray(r * t * stride, (r + 1) * t * stride) as never, (part.start + r) * intoT * stride);
}
