// What the review queue reads (docs/design.md §Review): every judge label nobody reviewed,
// with the texts the heuristic needs to give its own verdict beside an LLM judge's.
import type { ToolCall } from '../../src-shared/types.js';
import type { Store } from './database.js';
import { labelFromRow, type StoredLabel } from './session-reads.js';

export interface ReviewCandidate {
  sessionId: string;
  sessionTitle: string;
  responseTurn: number;
  feedbackTurn: number | null;
  nextStateRole: 'user' | 'tool' | null;
  response: string;
  responseToolCalls: ToolCall[];
  feedback: string | null;
  label: StoredLabel;
}

/** Unreviewed judge labels with a reward, in the stable session order. */
export function readReviewCandidates(store: Store): ReviewCandidate[] {
  const rows = store.all<Parameters<typeof labelFromRow>[0] & {
    session_id: string; title: string; response_turn: number; feedback_turn: number | null; next_state_role: 'user' | 'tool' | null;
    response: string; response_tool_calls: string; feedback: string | null;
  }>(
    `SELECT l.*, se.title, s.feedback_turn, s.next_state_role, r.text AS response, r.tool_calls AS response_tool_calls, f.text AS feedback
       FROM labels l
       JOIN samples s USING (session_id, response_turn)
       JOIN sessions se ON se.id = l.session_id
       JOIN turns r ON r.session_id = l.session_id AND r.idx = l.response_turn
       LEFT JOIN turns f ON f.session_id = l.session_id AND f.idx = s.feedback_turn
      WHERE l.source != 'manual' AND l.reviewed_at IS NULL AND l.reward IS NOT NULL
      ORDER BY se.created_at IS NULL, se.created_at, se.id, l.response_turn`,
  );
  return rows.map((r) => ({
    sessionId: r.session_id, sessionTitle: r.title, responseTurn: r.response_turn, feedbackTurn: r.feedback_turn, nextStateRole: r.next_state_role,
    response: r.response, responseToolCalls: JSON.parse(r.response_tool_calls) as ToolCall[], feedback: r.feedback, label: labelFromRow(r),
  }));
}

/** The last user message before a reply: the request it answered. */
export function readPromptBefore(store: Store, sessionId: string, responseTurn: number): string | null {
  return store.get<{ text: string }>("SELECT text FROM turns WHERE session_id = ? AND idx < ? AND role = 'user' ORDER BY idx DESC LIMIT 1", [sessionId, responseTurn])?.text ?? null;
}
