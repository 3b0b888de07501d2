/**
 * Turning m judge votes into one label (docs/design.md §Votes).
 *
 * Reward: unparseable votes are dropped; no valid vote gives 0; a tie for the top count
 * gives 0; otherwise the most common value wins (`majorityVote` in verdicts.ts).
 *
 * Hint: among the hint-judge votes that answered 1, those whose hint is longer than 10
 * characters (after trimming) qualify; the longest wins (the first of equal lengths). If
 * none qualifies there is no hint. Only the length filter applies to an LLM's hint: the
 * "gives a direction" filter belongs to the rule-based hints (hint-rules.ts).
 */
import type { Reward, Vote } from '../../src-shared/types.js';
import { majorityVote } from './verdicts.js';

/** A hint must be strictly longer than this many characters. */
export const MIN_HINT_LENGTH_EXCLUSIVE = 10;

export function rewardFromVotes(votes: readonly Vote[]): Reward {
  return majorityVote(votes);
}

export function hintFromVotes(votes: readonly Vote[]): string | null {
  let best: string | null = null;
  for (const v of votes) {
    if (v.hintAnswer !== 1 || !v.hint) continue;
    const hint = v.hint.trim();
    if (hint.length > MIN_HINT_LENGTH_EXCLUSIVE && (best === null || hint.length > best.length)) best = hint;
  }
  return best;
}
