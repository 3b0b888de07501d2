/**
 * Turning m judge votes into one label (docs/design.md §Votes).
 *
 * Reward: unparseable votes are dropped; no valid vote gives 0; a tie for the top count
 * gives 0; otherwise the most common value wins (`majorityVote` in verdicts.ts).
 *
 * Hint: among the hint-judge votes that answered 1, those whose hint is longer than 10
 * characters (after trimming) qualify; the longest that also gives a direction (the quality
 * filter, hint-rules.ts `isUsefulHint`, which training applies) wins, the first of equal
 * lengths. When none gives a direction the longest qualifying hint is kept (stored and shown,
 * though training will not use it); when none qualifies there is no hint. So a longest hint
 * that fails the direction filter no longer hides a shorter one that passes.
 */
import type { Reward, Vote } from '../../src-shared/types.js';
import { majorityVote } from './verdicts.js';
import { isUsefulHint } from './hint-rules.js';

/** A hint must be strictly longer than this many characters. */
export const MIN_HINT_LENGTH_EXCLUSIVE = 10;

export function rewardFromVotes(votes: readonly Vote[]): Reward {
  return majorityVote(votes);
}

/**
 * An LLM judge's confidence: its vote agreement, the share of all votes cast (unparseable ones
 * included) that gave the winning reward. A tie gives reward 0, usually with few votes for 0.
 */
export function confidenceFromVotes(votes: readonly Vote[], reward: Reward): number {
  if (!votes.length) return 0;
  return Math.round((votes.filter((v) => v.reward === reward).length / votes.length) * 100) / 100;
}

/** The vote count behind an LLM judge's reward, as evidence for the annotator. */
export function voteEvidence(votes: readonly Vote[]): string[] {
  const count = (r: Reward) => votes.filter((v) => v.reward === r).length;
  const unparsed = votes.filter((v) => v.reward === undefined).length;
  return [`votes: ${count(1)}× +1, ${count(0)}× 0, ${count(-1)}× −1${unparsed ? `, ${unparsed} unparseable` : ''}`];
}

export function hintFromVotes(votes: readonly Vote[]): string | null {
  let longest: string | null = null;
  let useful: string | null = null;
  for (const v of votes) {
    if (v.hintAnswer !== 1 || !v.hint) continue;
    const hint = v.hint.trim();
    if (hint.length <= MIN_HINT_LENGTH_EXCLUSIVE) continue;
    if (longest === null || hint.length > longest.length) longest = hint;
    if (isUsefulHint(hint) && (useful === null || hint.length > useful.length)) useful = hint;
  }
  return useful ?? longest;
}
