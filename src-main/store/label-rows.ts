// Reading and writing one sample's label (manual, heuristic or an LLM judge's).
import type { Store } from './database.js';
import { EMPTY_LABEL, labelFromRow, type StoredLabel } from './session-reads.js';

export function readLabel(store: Store, sessionId: string, responseTurn: number): StoredLabel {
  const row = store.get<Parameters<typeof labelFromRow>[0]>('SELECT * FROM labels WHERE session_id = ? AND response_turn = ?', [sessionId, responseTurn]);
  return row ? labelFromRow(row) : { ...EMPTY_LABEL };
}

/** Replaces the sample's label; `updatedAt` defaults to `now`. */
export function writeLabel(store: Store, sessionId: string, responseTurn: number, label: StoredLabel, now: number): void {
  store.run(
    `INSERT OR REPLACE INTO labels (session_id, response_turn, reward, hint, source, votes, confidence, evidence, repair, notes, updated_at, judge_backend, judge_model, prompt_version,
       reviewed_at, composite)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      sessionId, responseTurn, label.reward, label.hint, label.source, JSON.stringify(label.votes), label.confidence, JSON.stringify(label.evidence), label.repair, label.notes,
      label.updatedAt ?? now, label.judgeBackend, label.judgeModel, label.promptVersion, label.reviewedAt, label.composite ? JSON.stringify(label.composite) : null,
    ],
  );
}

/** Labelled samples that carry a non-empty hint. */
export function countHints(store: Store): number {
  return store.get<{ n: number }>("SELECT COUNT(*) AS n FROM labels WHERE hint IS NOT NULL AND hint != ''")!.n;
}

/** Labels written by a judge run with hints: their prompt version has a '+' part. */
export function countHintRunLabels(store: Store): number {
  return store.get<{ n: number }>("SELECT COUNT(*) AS n FROM labels WHERE prompt_version LIKE '%+%'")!.n;
}
