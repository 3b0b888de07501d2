/**
 * The composite reward judge's answers (docs/design.md §Composite score): reading one vote,
 * and turning m votes into a label.
 *
 * One vote: after the reasoning (./parse.ts's rules), the last \boxed{} must hold a number
 * from 0 to 100 ("72", "72.5", "72/100", "72%"); anything else — no box, a word, a number out
 * of range, a box cut off by the token limit — is no vote. The dimension lines
 * ("correctness: 80 | reason") are read where present; a missing or garbled line only loses
 * that reason, never the vote.
 *
 * m votes: the overall score is the median of the valid votes' scores; the thresholds map it
 * to +1 (≥ pos), −1 (≤ neg) or 0. Each vote's own reward is its score mapped the same way, so
 * the votes can be shown and counted like any judge's; the confidence is the share of all votes
 * (unreadable ones included) whose reward is the label's. No valid vote: reward 0, no score.
 */
import { COMPOSITE_DIMENSIONS, rewardFromScore, type CompositeDimensionScore, type CompositeScore, type CompositeThresholds } from '../../src-shared/composite.js';
import type { Reward, Vote } from '../../src-shared/types.js';
import { lastBoxed, stripReasoning } from './parse.js';
import { confidenceFromVotes } from './votes.js';

/** A reason longer than this is cut: the annotator shows one line per dimension. */
export const MAX_REASON_CHARS = 240;

export interface CompositeAnswer {
  /** The overall score, or undefined when the answer is malformed (no vote). */
  score?: number;
  dimensions: CompositeDimensionScore[];
}

function scoreOf(text: string): number | null {
  const clean = text
    .replace(/\\text\s*\{([^}]*)\}/g, '$1')
    .replace(/[\s$]/g, '')
    .replace(/(?:\/100|%|\\%)$/, '');
  if (!/^\d{1,3}(?:\.\d+)?$/.test(clean)) return null;
  const n = Number(clean);
  return n <= 100 ? n : null;
}

/** "correctness: 80 | reason", also "- **Correctness**: 80/100 — reason"; the last such line wins. */
function dimensionLine(answer: string, name: string): CompositeDimensionScore | null {
  const re = new RegExp(`^[\\s>*_-]*${name}[*_\\s]*[:=]\\s*(?:(\\d{1,3}(?:\\.\\d+)?)\\s*(?:/\\s*100|%)?)?\\s*[|:—–-]?\\s*(.*)$`, 'gim');
  let found: CompositeDimensionScore | null = null;
  for (const m of answer.matchAll(re)) {
    const score = m[1] === undefined ? null : Number(m[1]) <= 100 ? Number(m[1]) : null;
    const reason = m[2]!.replace(/\\boxed\s*\{[^}]*\}/g, '').trim().slice(0, MAX_REASON_CHARS);
    if (score === null && !reason) continue;
    found = { name: name as CompositeDimensionScore['name'], score, reason };
  }
  return found;
}

export function parseCompositeAnswer(raw: string): CompositeAnswer {
  const answer = stripReasoning(raw);
  const boxed = lastBoxed(answer);
  const score = boxed === null ? null : scoreOf(boxed);
  const dimensions = COMPOSITE_DIMENSIONS.map((d) => dimensionLine(answer, d)).filter((d): d is CompositeDimensionScore => d !== null);
  return score === null ? { dimensions } : { score, dimensions };
}

/** One composite vote as stored: its score, its mapped reward, its raw text. */
export function compositeVote(raw: string, t: CompositeThresholds): Vote & { dimensions: CompositeDimensionScore[] } {
  const parsed = parseCompositeAnswer(raw);
  return parsed.score === undefined
    ? { raw, dimensions: parsed.dimensions }
    : { raw, score: parsed.score, reward: rewardFromScore(parsed.score, t), dimensions: parsed.dimensions };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export interface CompositeVerdictPart {
  reward: Reward;
  composite: CompositeScore | undefined;
  confidence: number;
  evidence: string[];
}

/** The label m composite votes give (see the module comment). */
export function compositeFromVotes(votes: readonly (Vote & { dimensions?: CompositeDimensionScore[] })[], t: CompositeThresholds): CompositeVerdictPart {
  const valid = votes.filter((v) => v.score !== undefined);
  const unread = votes.length - valid.length;
  const unreadNote = unread ? `, ${unread} unreadable` : '';
  if (!valid.length) return { reward: 0, composite: undefined, confidence: 0, evidence: [`no readable composite score (${votes.length} vote${votes.length === 1 ? '' : 's'}) → 0`] };
  const score = Math.round(median(valid.map((v) => v.score!)) * 10) / 10;
  const reward = rewardFromScore(score, t);
  const nearest = valid.reduce((best, v) => (Math.abs(v.score! - score) < Math.abs(best.score! - score) ? v : best));
  const rule = reward === 1 ? `≥ ${t.pos} → +1` : reward === -1 ? `≤ ${t.neg} → −1` : `between ${t.neg} and ${t.pos} → 0`;
  return {
    reward,
    composite: { score, dimensions: nearest.dimensions ?? [], thresholds: { ...t } },
    confidence: confidenceFromVotes(votes, reward),
    evidence: [`composite score ${score} (votes ${valid.map((v) => v.score).join(', ')}${unreadNote}) ${rule}`],
  };
}
