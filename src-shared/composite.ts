/**
 * The composite score (docs/design.md §Composite score): an optional reward-judge mode in
 * which the LLM judge rates a reply 0–100 on named dimensions, with a short reason for each,
 * and an overall score that thresholds map to +1, −1 or 0. Node-free: the annotator shows
 * the mapping, Settings edits the thresholds, the CLI and the judge read the defaults here.
 */
export const COMPOSITE_DIMENSIONS = ['correctness', 'instruction', 'tone', 'length'] as const;
export type CompositeDimension = (typeof COMPOSITE_DIMENSIONS)[number];

/** How each dimension reads in the prompt and in the annotator. */
export const COMPOSITE_DIMENSION_TITLES: Readonly<Record<CompositeDimension, string>> = {
  correctness: 'correctness',
  instruction: 'followed the instruction',
  tone: 'tone',
  length: 'length',
};

/** Overall score ≥ pos → +1; ≤ neg → −1; in between → 0. */
export interface CompositeThresholds {
  pos: number;
  neg: number;
}

export const DEFAULT_COMPOSITE_THRESHOLDS: Readonly<CompositeThresholds> = { pos: 70, neg: 30 };

export interface CompositeDimensionScore {
  name: CompositeDimension;
  /** 0–100, or null when the judge gave a reason without a number. */
  score: number | null;
  reason: string;
}

/** What a composite judge stores with its label. */
export interface CompositeScore {
  /** The overall score, 0–100: the median of the votes that gave one. */
  score: number;
  /** The reasons of the vote whose score is nearest that median. */
  dimensions: CompositeDimensionScore[];
  /** The thresholds that turned the score into the label's reward. */
  thresholds: CompositeThresholds;
}

/** A threshold pair is usable when 0 ≤ neg < pos ≤ 100. */
export function thresholdProblem(t: CompositeThresholds): string | null {
  const whole = (n: number) => Number.isFinite(n) && n >= 0 && n <= 100;
  if (!whole(t.pos) || !whole(t.neg)) return 'composite thresholds must be numbers from 0 to 100';
  if (t.neg >= t.pos) return `the −1 threshold (${t.neg}) must be below the +1 threshold (${t.pos})`;
  return null;
}

/** The reward (a `Reward` of ./types.ts, written out: types.ts imports this file) a score maps to. */
export function rewardFromScore(score: number, t: CompositeThresholds): 1 | -1 | 0 {
  if (score >= t.pos) return 1;
  if (score <= t.neg) return -1;
  return 0;
}
