/**
 * The score graph's inputs for a batch of rows, and the way back from its flat output to one
 * log-prob list per row.
 *
 * Only the positions whose next token is a response token go through the LM head: the graph
 * gathers those rows of the final hidden state (`target_positions`, flat indices into the
 * padded [B, T] batch) before the head, so a row's prompt costs no [V]-wide logits, and no
 * [B, T, V] tensor is made (docs/design.md §Scoring).
 */
import type { ort } from './ort-session.js';
import { int64Tensor } from './ort-session.js';

/** One sequence to score: log-probs of `inputIds[responseStart..]` given what precedes. */
export interface ScoreRow {
  inputIds: number[];
  /** Index of the first response token; 1 ≤ responseStart ≤ inputIds.length. */
  responseStart: number;
}

export interface ScoreFeeds {
  feeds: Record<string, ort.Tensor>;
  /** Row b's log-probs are `logprobs[starts[b] .. starts[b] + counts[b])` of the flat output. */
  starts: number[];
  counts: number[];
}

/** Rows padded to the longest, on the right (the default) or the left (to test padding). */
export function scoreFeeds(rows: readonly ScoreRow[], padding: 'left' | 'right' = 'right'): ScoreFeeds {
  const B = rows.length;
  const T = Math.max(...rows.map((r) => r.inputIds.length));
  const ids = new Array<number>(B * T).fill(0);
  const mask = new Array<number>(B * T).fill(0);
  const pos = new Array<number>(B * T).fill(0);
  const targetPositions: number[] = [], targetIds: number[] = [];
  const starts: number[] = [], counts: number[] = [];
  rows.forEach((r, b) => {
    const first = b * T + (padding === 'left' ? T - r.inputIds.length : 0);
    r.inputIds.forEach((id, t) => {
      ids[first + t] = id;
      mask[first + t] = 1;
      pos[first + t] = t;
    });
    starts.push(targetIds.length);
    // The log-prob of token t is read at position t − 1.
    for (let t = r.responseStart; t < r.inputIds.length; t++) {
      targetPositions.push(first + t - 1);
      targetIds.push(r.inputIds[t]!);
    }
    counts.push(targetIds.length - starts[b]!);
  });
  const feeds = {
    input_ids: int64Tensor(ids, [B, T]),
    attention_mask: int64Tensor(mask, [B, T]),
    position_ids: int64Tensor(pos, [B, T]),
    target_positions: int64Tensor(targetPositions, [targetPositions.length]),
    target_ids: int64Tensor(targetIds, [targetIds.length]),
  };
  return { feeds, starts, counts };
}

/** The flat `logprobs` output split back into one list per row. */
export function rowLogprobs(logprobs: Float32Array, scored: ScoreFeeds): number[][] {
  return scored.starts.map((s, b) => Array.from(logprobs.subarray(s, s + scored.counts[b]!)));
}

/** Scores `rows` in one run of a score graph; a batch with no response token runs nothing. */
export async function scoreRows(
  run: (feeds: Record<string, ort.Tensor>) => Promise<Record<string, ort.Tensor>>,
  rows: readonly ScoreRow[],
  padding: 'left' | 'right' = 'right',
): Promise<number[][]> {
  const scored = scoreFeeds(rows, padding);
  if (scored.counts.every((n) => n === 0)) return rows.map(() => []);
  return rowLogprobs((await run(scored.feeds)).logprobs!.data as Float32Array, scored);
}
