/**
 * The review queue's ordering (docs/design.md §Review): which labels a person should look
 * at, most uncertain first. One pure function over plain label facts, so the workspace, the
 * Checks count and the tests all agree on it.
 *
 * A label needs review when it is not reviewed yet (a manual label counts as reviewed) and
 * at least one of these holds:
 *   - disagree:    the heuristic and an LLM judge gave different non-neutral verdicts, or the
 *                  heuristic gave ±1 where the LLM judge gave another reward;
 *   - no-evidence: the judge left no evidence at all;
 *   - split:       its votes were not unanimous (or some could not be read);
 *   - weak:        its confidence is below WEAK_CONFIDENCE (or unknown).
 * Uncertainty = 1 − confidence (no evidence or unknown confidence: 1), plus 1 when the judges
 * disagree, so a disagreement comes first (on a tie too). Other ties go to ±1 labels before 0
 * ones (a wrong sign trains the wrong thing; a wrong 0 only loses a sample), then to the input
 * order.
 */
import type { LabelSource, Reward, Vote } from './types.js';

/** Below this confidence a judge's label is weak evidence. */
export const WEAK_CONFIDENCE = 0.6;

export type ReviewReason = 'disagree' | 'no-evidence' | 'split' | 'weak';

export interface ReviewFacts {
  reward: Reward | null;
  source: LabelSource | null;
  votes: readonly Vote[];
  confidence: number | null;
  evidence: readonly string[];
  reviewedAt: number | null;
  /** What the heuristic says of the same sample, when an LLM judge made the label (else null). */
  heuristicReward: Reward | null;
}

export interface ReviewRank {
  uncertainty: number;
  reasons: ReviewReason[];
}

function isSplit(votes: readonly Vote[]): boolean {
  if (votes.length < 2) return false;
  return votes.some((v) => v.reward === undefined) || new Set(votes.map((v) => v.reward)).size > 1;
}

function judgesDisagree(f: ReviewFacts): boolean {
  if (f.heuristicReward === null || !f.source?.startsWith('judge:')) return false;
  return f.heuristicReward !== 0 && f.heuristicReward !== f.reward;
}

/** Why a label needs review and how uncertain it is; null when it does not (or is not a judge's). */
export function reviewRank(f: ReviewFacts): ReviewRank | null {
  if (f.source === null || f.source === 'manual' || f.reward === null || f.reviewedAt !== null) return null;
  const reasons: ReviewReason[] = [];
  const disagree = judgesDisagree(f);
  if (disagree) reasons.push('disagree');
  const noEvidence = f.evidence.length === 0;
  if (noEvidence) reasons.push('no-evidence');
  if (isSplit(f.votes)) reasons.push('split');
  if (f.confidence === null || f.confidence < WEAK_CONFIDENCE) reasons.push('weak');
  if (!reasons.length) return null;
  const confidence = noEvidence ? 0 : (f.confidence ?? 0);
  return { uncertainty: Math.round((1 - confidence + (disagree ? 1 : 0)) * 100) / 100, reasons };
}

/** The labels that need review, most uncertain first (stable for equal ranks). */
export function reviewOrder<T>(items: readonly T[], facts: (item: T) => ReviewFacts): { item: T; rank: ReviewRank }[] {
  const ranked: { item: T; rank: ReviewRank; disagree: boolean; signed: boolean; at: number }[] = [];
  items.forEach((item, at) => {
    const f = facts(item);
    const rank = reviewRank(f);
    if (rank) ranked.push({ item, rank, disagree: rank.reasons.includes('disagree'), signed: f.reward !== 0, at });
  });
  const first = (a: boolean, b: boolean) => Number(b) - Number(a);
  ranked.sort((a, b) => b.rank.uncertainty - a.rank.uncertainty || first(a.disagree, b.disagree) || first(a.signed, b.signed) || a.at - b.at);
  return ranked.map(({ item, rank }) => ({ item, rank }));
}

/** The reasons in the app's words, for the review list and the CLI. */
export function reviewReasonText(reason: ReviewReason, f: Pick<ReviewFacts, 'confidence' | 'heuristicReward' | 'votes'>): string {
  const sign = (r: Reward | null | undefined) => (r === 1 ? '+1' : r === -1 ? '−1' : r === 0 ? '0' : '?');
  switch (reason) {
    case 'disagree':
      return `the heuristic says ${sign(f.heuristicReward)}`;
    case 'no-evidence':
      return 'no evidence';
    case 'split':
      return `split votes (${f.votes.map((v) => sign(v.reward)).join(' ')})`;
    case 'weak':
      return f.confidence === null ? 'confidence unknown' : `weak evidence (confidence ${Math.round(f.confidence * 100)}%)`;
  }
}
