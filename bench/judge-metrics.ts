/**
 * Scoring the heuristic judge against the hand-labelled feedback corpus
 * (test/fixtures/feedback/corpus.jsonl): agreement, the confusion matrix and the wrong-sign
 * rate, overall and per language, for one split. Shared by `npm run bench:judge` and
 * test/judge/corpus.test.ts so that the README's figures and the test's are the same numbers.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Reward } from '../src-shared/types.js';
import { heuristicReward } from '../src-main/judge/heuristic.js';

export type Split = 'tune' | 'heldout';

export interface CorpusRow {
  id: string;
  lang: string;
  role?: 'user' | 'tool';
  reply: string;
  reaction: string;
  label: Reward;
  reason: string;
  split: Split;
}

export const CORPUS_URL = new URL('../test/fixtures/feedback/corpus.jsonl', import.meta.url);

/** The split rule, fixed before tuning: a held-out third by the first byte of sha256(id). */
export function splitOf(id: string): Split {
  return createHash('sha256').update(id).digest()[0]! % 3 === 0 ? 'heldout' : 'tune';
}

export function readCorpus(url: URL = CORPUS_URL): CorpusRow[] {
  return readFileSync(url, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as CorpusRow);
}

const REWARDS: Reward[] = [1, 0, -1];

export interface Scores {
  n: number;
  agree: number;
  /** +1 given where -1 is right, or the reverse. */
  wrongSign: number;
  /** confusion[truth][predicted], keyed by '1' | '0' | '-1'. */
  confusion: Record<string, Record<string, number>>;
  agreement: number;
  wrongSignRate: number;
}

export interface Prediction {
  row: CorpusRow;
  predicted: Reward;
  confidence: number;
  evidence: string[];
}

export function predict(rows: readonly CorpusRow[]): Prediction[] {
  return rows.map((row) => {
    const v = heuristicReward(row.reply, { role: row.role ?? 'user', text: row.reaction });
    return { row, predicted: v.reward, confidence: v.confidence, evidence: v.evidence };
  });
}

export function score(predictions: readonly Prediction[]): Scores {
  const confusion: Record<string, Record<string, number>> = {};
  for (const t of REWARDS) confusion[t] = Object.fromEntries(REWARDS.map((p) => [String(p), 0]));
  let agree = 0;
  let wrongSign = 0;
  for (const { row, predicted } of predictions) {
    confusion[row.label]![predicted]!++;
    if (predicted === row.label) agree++;
    else if (predicted !== 0 && row.label !== 0) wrongSign++;
  }
  const n = predictions.length;
  return { n, agree, wrongSign, confusion, agreement: n ? agree / n : 0, wrongSignRate: n ? wrongSign / n : 0 };
}

/** Scores for one split: overall, then per language (in first-seen order). */
export function scoreSplit(rows: readonly CorpusRow[], split: Split): { overall: Scores; byLang: Map<string, Scores>; predictions: Prediction[] } {
  const predictions = predict(rows.filter((r) => r.split === split));
  const byLang = new Map<string, Scores>();
  for (const lang of [...new Set(predictions.map((p) => p.row.lang))]) byLang.set(lang, score(predictions.filter((p) => p.row.lang === lang)));
  return { overall: score(predictions), byLang, predictions };
}
