// What a judge run did and left undone, in the same words for the command line's summary and the
// app's toast (docs/design.md §Judges): the rewards it gave; samples too long for the judge's
// context, samples that failed on their own, and votes cut off before their answer; and a local
// judge's weights where they are not fp32 (why: fp32 did not fit the memory).
import type { RewardCounts } from './views.js';

/** What a judge run skipped or could not read, beside its JudgeSummary (src-main/judge/runner.ts). */
export interface JudgeRunSkips {
  /** Samples whose judge prompt could not fit the judge model's context (skipped, unlabelled). */
  skippedTooLong: number;
  /** The judge model's context in tokens, when a sample was too long for it. */
  judgeContext: number | null;
  /** Samples whose judging failed for a reason of their own (the run went on), and the first reason. */
  failed: number;
  failedReason: string | null;
  /** Votes stopped by the judge's token limit before their answer (counted unreadable). */
  cutOffVotes: number;
  /** Where a local judge answered with int8 or int4 weights (fp32 did not fit this machine's memory): why. */
  weightsNote: string | null;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The rewards a run gave, e.g. "7 good (+1), 3 bad (−1), 2 no signal (0)"; empty when it labelled nothing. */
export function rewardCountsText(r: RewardCounts | undefined): string {
  if (!r) return '';
  const parts: [number, string][] = [[r.good, 'good (+1)'], [r.bad, 'bad (−1)'], [r.neutral, 'no signal (0)']];
  return parts.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}`).join(', ');
}

/** One clause per thing the run skipped or could not read; empty when there is none. */
export function judgeRunNotes(s: Partial<JudgeRunSkips>): string[] {
  const notes: string[] = [];
  if (s.weightsNote) notes.push(`the judge's ${s.weightsNote}`);
  if (s.skippedTooLong) {
    const context = s.judgeContext ? `the judge's ${s.judgeContext}-token context` : "the judge's context";
    notes.push(`${plural(s.skippedTooLong, 'sample')} too long for ${context}; skipped`);
  }
  if (s.failed) notes.push(`${plural(s.failed, 'sample')} failed and ${s.failed === 1 ? 'was' : 'were'} skipped${s.failedReason ? ` (${s.failedReason})` : ''}`);
  if (s.cutOffVotes) {
    notes.push(`${plural(s.cutOffVotes, 'vote')} stopped at the judge's token limit before answering, counted as unreadable (a thinking judge needs more max tokens)`);
  }
  return notes;
}
