// The review queue's ordering (src-shared/review.ts, docs/design.md §Review) on crafted labels:
// who is in the queue, why, and in which order.
import { describe, expect, it } from 'vitest';
import { reviewOrder, reviewRank, WEAK_CONFIDENCE, type ReviewFacts } from '../../src-shared/review.js';
import type { Vote } from '../../src-shared/types.js';

const votes = (...rewards: (1 | -1 | 0 | undefined)[]): Vote[] => rewards.map((reward, i) => ({ raw: `v${i}`, ...(reward === undefined ? {} : { reward }) }));

function label(over: Partial<ReviewFacts>): ReviewFacts {
  return { reward: 1, source: 'judge:m', votes: votes(1, 1, 1), confidence: 1, evidence: ['votes: 3× +1'], reviewedAt: null, heuristicReward: null, ...over };
}

describe('reviewRank', () => {
  it('leaves out sure, reviewed, manual and unlabelled samples', () => {
    expect(reviewRank(label({}))).toBeNull();
    expect(reviewRank(label({ confidence: 0.2, reviewedAt: 123 }))).toBeNull();
    expect(reviewRank(label({ source: 'manual', confidence: null, evidence: [] }))).toBeNull();
    expect(reviewRank(label({ source: null, reward: null }))).toBeNull();
    expect(reviewRank(label({ source: 'heuristic', votes: votes(1), confidence: 0.9, evidence: ['+2 "thanks"'] }))).toBeNull();
  });

  it('names each reason', () => {
    expect(reviewRank(label({ votes: votes(1, 1, -1), confidence: 0.67 }))).toEqual({ uncertainty: 0.33, reasons: ['split'] });
    expect(reviewRank(label({ votes: votes(1, 1, undefined), confidence: 0.67 }))!.reasons).toEqual(['split']);
    expect(reviewRank(label({ source: 'heuristic', votes: votes(1), confidence: 0.5 }))).toEqual({ uncertainty: 0.5, reasons: ['weak'] });
    expect(reviewRank(label({ confidence: null }))!.reasons).toEqual(['weak']);
    expect(reviewRank(label({ evidence: [] }))).toEqual({ uncertainty: 1, reasons: ['no-evidence'] });
    expect(reviewRank(label({ heuristicReward: -1 }))).toEqual({ uncertainty: 1, reasons: ['disagree'] });
    expect(reviewRank(label({ reward: 0, votes: votes(0, 0, 0), heuristicReward: 1 }))!.reasons).toEqual(['disagree']);
  });

  it('a neutral heuristic, or an agreeing one, is no disagreement; only LLM judges are compared', () => {
    expect(reviewRank(label({ heuristicReward: 0 }))).toBeNull();
    expect(reviewRank(label({ heuristicReward: 1 }))).toBeNull();
    expect(reviewRank(label({ source: 'heuristic', votes: votes(1), heuristicReward: -1 }))).toBeNull();
  });

  it('the weak line sits at WEAK_CONFIDENCE', () => {
    expect(reviewRank(label({ votes: votes(1), confidence: WEAK_CONFIDENCE }))).toBeNull();
    expect(reviewRank(label({ votes: votes(1), confidence: WEAK_CONFIDENCE - 0.01 }))!.reasons).toEqual(['weak']);
  });
});

describe('reviewOrder', () => {
  it('most uncertain first: disagreement, then no evidence, then lower confidence; ±1 before 0 on a tie; otherwise input order', () => {
    const items: [string, ReviewFacts][] = [
      ['sure', label({})],
      ['split 2-1', label({ votes: votes(1, 1, -1), confidence: 0.67 })],
      ['weak heuristic 0', label({ source: 'heuristic', reward: 0, votes: votes(0), confidence: 0.5 })],
      ['weak heuristic +1', label({ source: 'heuristic', votes: votes(1), confidence: 0.5 })],
      ['no evidence', label({ evidence: [], confidence: 0.9 })],
      ['disagree, split', label({ votes: votes(-1, -1, 1), reward: -1, confidence: 0.67, heuristicReward: 1 })],
      ['disagree, sure', label({ heuristicReward: -1 })],
      ['reviewed', label({ confidence: 0, reviewedAt: 1 })],
      ['tie at 0.5, later', label({ source: 'heuristic', votes: votes(-1), reward: -1, confidence: 0.5 })],
    ];
    const order = reviewOrder(items, ([, f]) => f);
    expect(order.map(({ item: [name] }) => name)).toEqual([
      'disagree, split', // 1.33
      'disagree, sure', // 1
      'no evidence', // 1
      'weak heuristic +1', // 0.5, ±1
      'tie at 0.5, later', // 0.5, ±1, later in the input
      'weak heuristic 0', // 0.5, a 0
      'split 2-1', // 0.33
    ]);
    expect(order[0]!.rank).toEqual({ uncertainty: 1.33, reasons: ['disagree', 'split'] });
  });
});
