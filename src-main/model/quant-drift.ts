/**
 * The cost of quantisation, measured where it is used (docs/design.md §Quantisation): the
 * log-probs of one fixed text under the quantised model and under fp32, compared token by
 * token. `score` prints it whenever it scores with quantised weights, since the numbers it
 * writes then differ from the fp32 ones training computes.
 */
import type { ChatTokenizer } from './tokenizer.js';

/** A fixed, plain text: everyday words, punctuation and digits, nothing model-specific. */
export const DRIFT_TEXT =
  'The library opens at nine in the morning and closes at six. On Saturdays it closes early, at two, ' +
  'because the staff hold a reading group for children in the afternoon. Last year more than 4,000 ' +
  'people borrowed at least one book, and the most popular shelf was travel: guides to Portugal, ' +
  'Japan and the coast of Norway. If you want to reserve a title, ask at the front desk or write to us.';

/** Tokens of the fixed text scored at most (fewer where the model has fewer positions). */
export const DRIFT_TOKENS = 96;

export interface QuantDrift {
  /** Tokens whose log-probs were compared. */
  tokens: number;
  /** max and mean |log p_quantised − log p_fp32| over them, in nats. */
  maxAbs: number;
  meanAbs: number;
}

/** |Δ| statistics of two log-prob lists of the same tokens. */
export function driftBetween(quantised: readonly number[], fp32: readonly number[]): QuantDrift {
  if (quantised.length !== fp32.length) throw new Error(`drift: ${quantised.length} vs ${fp32.length} log-probs`);
  let maxAbs = 0, sum = 0;
  quantised.forEach((q, i) => {
    const d = Math.abs(q - fp32[i]!);
    maxAbs = Math.max(maxAbs, d);
    sum += d;
  });
  return { tokens: fp32.length, maxAbs, meanAbs: fp32.length ? sum / fp32.length : 0 };
}

/** The fixed text's ids under a model's tokenizer (with its BOS, where it adds one). */
export function driftTextIds(tokenizer: ChatTokenizer): number[] {
  return tokenizer.encode(DRIFT_TEXT, true);
}

/** Scores the fixed text (`textIds`, from driftTextIds) with both sessions through `score` and compares. */
export async function measureDrift<S>(
  textIds: readonly number[],
  maxPositions: number,
  score: (row: { inputIds: number[]; responseStart: number }, session: S) => Promise<number[]>,
  quantised: S,
  fp32: S,
): Promise<QuantDrift> {
  const ids = textIds.slice(0, Math.min(DRIFT_TOKENS, maxPositions));
  const row = { inputIds: ids, responseStart: 1 };
  return driftBetween(await score(row, quantised), await score(row, fp32));
}

/** The stderr line `score` prints. */
export function driftNote(quantize: string, d: QuantDrift): string {
  return `note: --quantize ${quantize}: log-probs drift from fp32 by max ${d.maxAbs.toFixed(4)}, mean ${d.meanAbs.toFixed(4)} nats per token (measured on a fixed ${d.tokens}-token text)`;
}
