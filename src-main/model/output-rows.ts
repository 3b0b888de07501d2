/**
 * The rows an inference graph's last layer computes (docs/design.md §Scoring, "The last layer's
 * rows"): keys and values need every row, but past them the last layer needs only the rows its
 * output reads, from the first of them on.
 */
import { int, type GraphBuilder } from '../graph/ir.js';

/**
 * The first of the rows [from, T) that an inference graph's output reads, int64 [1] (docs/design.md
 * §Scoring, "The last layer's rows"): the last row for last_logprobs; for an output gathered at
 * flat positions (target_logprobs, hidden with hiddenRows) the first row any of them reaches in
 * any batch row (never past T − 1, so no cut is empty). Other outputs read every row.
 */
export function firstOutputRow(b: GraphBuilder, lastOnly: boolean, seqLen: string, gathered: string | undefined): string | undefined {
  if (!lastOnly && !gathered) return undefined;
  const lastRow = b.unsqueeze(b.sub(seqLen, b.scalar(1, 'int64')), [0]);
  if (lastOnly) return lastRow;
  const rowInBatch = b.sub(gathered!, b.mul(b.div(gathered!, seqLen), seqLen));
  const candidates = b.concat([rowInBatch, lastRow], 0);
  return b.op('ReduceMin', [candidates, b.int64s([0])], { keepdims: int(1) }, 1, [{ dtype: 'int64', shape: [1] }])[0]!;
}

/** x's rows [from, end) along `axis` (from: int64 [1], run-time). */
export function rowsFrom(b: GraphBuilder, x: string, from: string, axis: number): string {
  const shape = b.shapeOf(x)!.map((d, i) => (i === axis ? 'output_rows' : d));
  return b.op('Slice', [x, from, b.int64s([Number.MAX_SAFE_INTEGER]), b.int64s([axis])], {}, 1, [{ dtype: b.dtypeOf(x) ?? 'float32', shape }])[0]!;
}

/** Flat positions into [B·T] as flat positions into the cut rows [B·(T − from)]: p − (⌊p / T⌋ + 1)·from. */
export function positionsFrom(b: GraphBuilder, positions: string, seqLen: string, from: string): string {
  const batchRow = b.div(positions, seqLen);
  return b.sub(positions, b.mul(b.add(batchRow, b.scalar(1, 'int64')), from));
}
