// Writing and rewriting sessions: turns, alternatives, samples, and keeping labels across
// a newer export of the same conversation.
//
// A session's id is stable across exports: `${format}:${externalId}`, or
// `${format}:${sha256(turns)[:16]}` when the export gives the conversation no id. Its
// `content_hash` covers everything imported, so re-importing an unchanged conversation
// is recognised and touches nothing. When the content did change, the session's turns
// and samples are rebuilt and each label moves to the new sample whose reply text and
// full context (roles and texts of every earlier turn) are unchanged — matched by
// `match_hash`, so a label follows its reply even if turn indices shift. Labels whose
// reply or context changed are dropped, and the import reports how many.
import { createHash } from 'node:crypto';
import type { ImportedConversation, ImportedTurn, SessionFormat } from '../../src-shared/types.js';
import { analyseSession, type ContextWindow, type SessionAnalysis } from '../pipeline/classify.js';
import type { Store } from './database.js';

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function sessionIdFor(format: SessionFormat, conv: ImportedConversation): string {
  if (conv.externalId !== undefined && conv.externalId !== '') return `${format}:${conv.externalId}`;
  const content = JSON.stringify(conv.turns.map((t) => [t.role, t.text]));
  return `${format}:${sha256(content).slice(0, 16)}`;
}

function contentHash(conv: ImportedConversation): string {
  return sha256(JSON.stringify([conv.title ?? null, conv.createdAt ?? null, conv.turns, conv.alternatives, conv.metadata]));
}

/** What the sample's label is tied to: the reply text and every earlier turn's role and text. */
export function matchHash(turns: readonly { role: string; text: string }[], contextTurns: readonly number[], responseTurn: number): string {
  const context = contextTurns.map((i) => [turns[i].role, turns[i].text]);
  return sha256(JSON.stringify([context, turns[responseTurn].text]));
}

const json = (value: unknown) => JSON.stringify(value ?? []);

function insertTurns(store: Store, sessionId: string, turns: readonly ImportedTurn[], window: ContextWindow | undefined): void {
  const analysis = analyseSession(turns, window);
  turns.forEach((t, i) => {
    const cls = analysis.turns[i];
    store.run(
      `INSERT INTO turns (session_id, idx, role, text, reasoning, tool_calls, tool_call_id, tool_name, attachments, citations,
         timestamp, hidden, external_id, classification, side_reason)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        sessionId, i, t.role, t.text, t.reasoning ?? null, json(t.toolCalls), t.toolCallId ?? null, t.toolName ?? null,
        json(t.attachments), json(t.citations), t.timestamp ?? null, t.hidden ? 1 : 0, t.externalId ?? null,
        cls.classification, cls.sideReason,
      ],
    );
  });
  writeSamples(store, sessionId, turns, analysis);
}

type AnalysedTurn = { role: ImportedTurn['role']; text: string; hidden?: boolean; toolCalls?: unknown[]; attachments?: unknown[] };

/** Writes a session's samples and its no-sample reason; returns the sample count. */
function writeSamples(store: Store, sessionId: string, turns: readonly AnalysedTurn[], analysis: SessionAnalysis): number {
  for (const s of analysis.samples) {
    store.run(
      `INSERT INTO samples (session_id, response_turn, feedback_turn, next_state_role, context_turns, context_full, match_hash)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
      [
        sessionId, s.responseTurn, s.feedbackTurn, s.nextStateRole, JSON.stringify(s.contextTurns),
        s.contextTurns.length === s.fullContextTurns.length ? 1 : 0, matchHash(turns, s.fullContextTurns, s.responseTurn),
      ],
    );
  }
  store.run('UPDATE sessions SET no_sample_reason = ? WHERE id = ?', [analysis.noSampleReason, sessionId]);
  return analysis.samples.length;
}

function insertAlternatives(store: Store, sessionId: string, conv: ImportedConversation): void {
  const ord = new Map<number, number>();
  for (const alt of conv.alternatives) {
    const n = ord.get(alt.atTurn) ?? 0;
    ord.set(alt.atTurn, n + 1);
    store.run(
      `INSERT INTO alternatives (session_id, at_turn, ord, role, text, reasoning, tool_calls, timestamp, external_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [sessionId, alt.atTurn, n, alt.turn.role, alt.turn.text, alt.turn.reasoning ?? null, json(alt.turn.toolCalls), alt.turn.timestamp ?? null, alt.turn.externalId ?? null],
    );
  }
}

interface SavedLabel {
  match_hash: string;
  reward: number | null;
  hint: string | null;
  source: string;
  votes: string;
  repair: string | null;
  notes: string | null;
  updated_at: number;
  judge_backend: string | null;
  judge_model: string | null;
  prompt_version: string | null;
}

export type UpsertOutcome = 'added' | 'updated' | 'unchanged';

export interface UpsertResult {
  id: string;
  outcome: UpsertOutcome;
  labelsKept: number;
  labelsDropped: number;
}

/** Adds a conversation, updates it if its content changed, or leaves it alone. */
export function upsertConversation(
  store: Store,
  conv: ImportedConversation,
  format: SessionFormat,
  sourceId: number,
  window: ContextWindow | undefined,
  now: number,
): UpsertResult {
  const id = sessionIdFor(format, conv);
  const hash = contentHash(conv);
  const existing = store.get<{ content_hash: string }>('SELECT content_hash FROM sessions WHERE id = ?', [id]);
  if (existing && existing.content_hash === hash) return { id, outcome: 'unchanged', labelsKept: 0, labelsDropped: 0 };

  let saved: SavedLabel[] = [];
  if (existing) {
    saved = store.all<SavedLabel>(
      `SELECT s.match_hash, l.reward, l.hint, l.source, l.votes, l.repair, l.notes, l.updated_at, l.judge_backend, l.judge_model, l.prompt_version
       FROM labels l JOIN samples s USING (session_id, response_turn) WHERE l.session_id = ?`,
      [id],
    );
    store.run('DELETE FROM sessions WHERE id = ?', [id]); // cascades to turns, samples, labels, alternatives
  }
  store.run(
    `INSERT INTO sessions (id, source_id, format, external_id, title, created_at, metadata, content_hash, no_sample_reason, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
    [id, sourceId, format, conv.externalId ?? null, conv.title?.trim() || 'Untitled conversation', conv.createdAt ?? null, JSON.stringify(conv.metadata ?? {}), hash, now],
  );
  insertTurns(store, id, conv.turns, window);
  insertAlternatives(store, id, conv);

  let labelsKept = 0;
  if (saved.length) {
    const byHash = new Map(store.all<{ match_hash: string; response_turn: number }>('SELECT match_hash, response_turn FROM samples WHERE session_id = ?', [id]).map((r) => [r.match_hash, r.response_turn]));
    for (const l of saved) {
      const turn = byHash.get(l.match_hash);
      if (turn === undefined) continue;
      store.run(
        `INSERT INTO labels (session_id, response_turn, reward, hint, source, votes, repair, notes, updated_at, judge_backend, judge_model, prompt_version)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [id, turn, l.reward, l.hint, l.source, l.votes, l.repair, l.notes, l.updated_at, l.judge_backend, l.judge_model, l.prompt_version],
      );
      labelsKept++;
    }
  }
  return { id, outcome: existing ? 'updated' : 'added', labelsKept, labelsDropped: saved.length - labelsKept };
}

/**
 * Recomputes every session's samples (after the context window changed). Labels stay:
 * the reply turns of a session do not depend on the window.
 */
export function rebuildAllSamples(store: Store, window: ContextWindow | undefined): void {
  const labels = store.all('SELECT * FROM labels');
  store.run('DELETE FROM samples');
  const sessionIds = store.all<{ id: string }>('SELECT id FROM sessions').map((r) => r.id);
  for (const id of sessionIds) {
    const turns = store.all<{ role: ImportedTurn['role']; text: string; hidden: number; tool_calls: string; attachments: string }>(
      'SELECT role, text, hidden, tool_calls, attachments FROM turns WHERE session_id = ? ORDER BY idx',
      [id],
    );
    const analysed = turns.map((t) => ({ role: t.role, text: t.text, hidden: !!t.hidden, toolCalls: JSON.parse(t.tool_calls), attachments: JSON.parse(t.attachments) }));
    writeSamples(store, id, analysed, analyseSession(analysed, window));
  }
  for (const l of labels) {
    const cols = Object.keys(l);
    store.run(`INSERT INTO labels (${cols.join(',')}) VALUES (${cols.map(() => '?').join(',')})`, cols.map((c) => l[c]));
  }
}
