// The review queue (docs/design.md §Review): the unreviewed judge labels a person should look
// at, most uncertain first, ordered by src-shared/review.ts. Whether the heuristic and an LLM
// judge disagree is computed here on the fly (the heuristic is instant and deterministic), so
// nothing has to be kept when an LLM judge's label replaces the heuristic's.
import type { Reward } from '../../src-shared/types.js';
import { reviewOrder, reviewReasonText, type ReviewFacts } from '../../src-shared/review.js';
import type { ReviewItem } from '../../src-shared/views.js';
import { heuristicReward } from '../judge/heuristic.js';
import type { Store } from '../store/database.js';
import { readPromptBefore, readReviewCandidates, type ReviewCandidate } from '../store/review-reads.js';
import { publicLabel } from './label-edits.js';
import { viewCalls } from './session-views.js';

/** At most this many items go to the UI at once; the total says how many more wait. */
export const DEFAULT_REVIEW_LIMIT = 200;

function heuristicFor(c: ReviewCandidate): Reward | null {
  if (!c.label.source?.startsWith('judge:') || c.feedback === null || c.nextStateRole === null) return null;
  return heuristicReward(c.response, { role: c.nextStateRole, text: c.feedback }).reward;
}

function factsOf(c: ReviewCandidate, heuristic: Reward | null): ReviewFacts {
  const l = c.label;
  return { reward: l.reward, source: l.source, votes: l.votes, confidence: l.confidence, evidence: l.evidence, reviewedAt: l.reviewedAt, heuristicReward: heuristic };
}

function rankedCandidates(store: Store) {
  const withHeuristic = readReviewCandidates(store).map((c) => ({ c, heuristic: heuristicFor(c) }));
  return reviewOrder(withHeuristic, ({ c, heuristic }) => factsOf(c, heuristic));
}

export function reviewQueue(store: Store, limit = DEFAULT_REVIEW_LIMIT): { total: number; items: ReviewItem[] } {
  const ranked = rankedCandidates(store);
  const items = ranked.slice(0, limit).map(({ item: { c, heuristic }, rank }): ReviewItem => ({
    sample: {
      sessionId: c.sessionId, responseTurn: c.responseTurn, feedbackTurn: c.feedbackTurn, nextStateRole: c.nextStateRole,
      response: c.response, responseCalls: viewCalls(c.responseToolCalls), feedback: c.feedback, label: publicLabel(c.label),
    },
    sessionTitle: c.sessionTitle,
    prompt: readPromptBefore(store, c.sessionId, c.responseTurn),
    uncertainty: rank.uncertainty,
    reasons: rank.reasons,
    reasonTexts: rank.reasons.map((r) => reviewReasonText(r, factsOf(c, heuristic))),
    heuristicReward: heuristic,
  }));
  return { total: ranked.length, items };
}

/** How many labels the review queue holds: Checks shows it. */
export function countUnreviewedUncertain(store: Store): number {
  return rankedCandidates(store).length;
}
