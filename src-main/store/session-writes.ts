// Writing and rewriting sessions: turns, alternatives, samples, and keeping labels across
// a newer export of the same conversation.
//
// A session's id is stable across exports: `${format}:${externalId}`, or
// `${format}:${sha256(turns)[:16]}` when the export gives the conversation no id. Its
// `content_hash` covers everything imported, so re-importing an unchanged conversation
// is recognised and touches nothing. When the content did change and every labelled reply
// stays where it was (a chat that went on), only the rows that differ change; otherwise the
// session's turns and samples are rebuilt and each label moves to the new sample whose reply
// text and full context (roles and texts of every earlier turn) are unchanged — matched by
// `match_hash`, so a label follows its reply even if turn indices shift. Labels whose
// reply or context changed are dropped, and the import reports how many.
//
// The store does not classify turns: the caller (the workspace, with pipeline/classify)
// hands it each session's classification and samples, so the store depends on nothing
// above it.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { ContextSpan } from '../../src-shared/context-span.js';
import type { ImportedConversation, ImportedTurn, SessionFormat, TurnClass } from '../../src-shared/types.js';
import type { NoSampleReason } from '../../src-shared/views.js';
import type { Store } from './database.js';

/** What classification decided for one session: each turn's class, the samples, or why there is none. */
export interface SessionSamples {
  turns: readonly { classification: TurnClass; sideReason: string | null }[];
  /** Per turn: whether it may be part of a context (neither metadata nor empty). */
  inContext: readonly boolean[];
  samples: readonly {
    responseTurn: number;
    feedbackTurn: number;
    nextStateRole: 'user' | 'tool';
    /** Which turns the (windowed) context is: a rule, never a copy (src-shared/context-span.ts). */
    context: ContextSpan;
  }[];
  noSampleReason: NoSampleReason | null;
}

/** A stored turn as classification reads it. */
export interface ClassifiableStoredTurn {
  role: ImportedTurn['role'];
  text: string;
  hidden: boolean;
  toolCalls: unknown[];
  attachments: unknown[];
}

/** Classifies one session's turns (pipeline/classify with the context window, given by the caller). */
export type ClassifySession = (turns: readonly ClassifiableStoredTurn[]) => SessionSamples;

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function sessionIdFor(format: SessionFormat, conv: ImportedConversation): string {
  if (conv.externalId !== undefined && conv.externalId !== '') return `${format}:${conv.externalId}`;
  const content = JSON.stringify(conv.turns.map((t) => [t.role, t.text]));
  return `${format}:${sha256(content).slice(0, 16)}`;
}

/**
 * What each sample's label is tied to: its reply text and the role and text of every context
 * turn before it (the whole, unwindowed context). A hash chain over the context turns makes
 * this one pass over the session, where hashing each context afresh was quadratic; `previous`,
 * the chain of an earlier version of the same session, is kept up to the first turn that differs
 * from it, so a session that grew (live capture's next turn) is hashed only where it grew.
 */
export function matchHashes(
  turns: readonly { role: string; text: string }[], inContext: readonly boolean[], responseTurns: readonly number[], previous?: MatchChain,
): MatchChain {
  let same = 0;
  const p = previous;
  if (p) while (same < turns.length && same < p.roles.length && turns[same]!.role === p.roles[same] && turns[same]!.text === p.texts[same] && !!inContext[same] === p.inContext[same]) same++;
  // before[i] is the chain over the in-context turns before turn i: the same as previous's up to `same`.
  const before = previous ? previous.before.slice(0, same + 1) : [''];
  for (let i = before.length - 1; i < turns.length; i++) before.push(inContext[i] ? sha256(before[i] + JSON.stringify([turns[i]!.role, turns[i]!.text])) : before[i]!);
  const hashes = new Map<number, string>();
  for (const r of responseTurns) hashes.set(r, (r < same && previous?.hashes.get(r)) || sha256(JSON.stringify([before[r], turns[r]!.text])));
  return { roles: turns.map((t) => t.role), texts: turns.map((t) => t.text), inContext: turns.map((_, i) => !!inContext[i]), before, hashes };
}

/** The match hashes of a session's samples by reply turn, and what they were computed from (matchHashes). */
export interface MatchChain {
  roles: string[];
  texts: string[];
  inContext: boolean[];
  before: string[];
  hashes: Map<number, string>;
}

const json = (value: unknown) => JSON.stringify(value ?? []);

/** A turn row's columns, in the order `turnValues` gives them (updateConversationInPlace reads them back in it). */
const TURN_COLUMNS = [
  'session_id', 'idx', 'role', 'text', 'reasoning', 'tool_calls', 'tool_call_id', 'tool_name', 'attachments', 'citations',
  'timestamp', 'hidden', 'external_id', 'classification', 'side_reason', 'in_context',
] as const;
const INSERT_TURN = `INSERT INTO turns (${TURN_COLUMNS.join(', ')}) VALUES (${TURN_COLUMNS.map(() => '?').join(', ')})`;

/** Turn `i`'s row values, in TURN_COLUMNS' order. */
function turnValues(sessionId: string, i: number, t: ImportedTurn, analysis: SessionSamples): (string | number | null)[] {
  const cls = analysis.turns[i]!;
  return [
    sessionId, i, t.role, t.text, t.reasoning ?? null, json(t.toolCalls), t.toolCallId ?? null, t.toolName ?? null,
    json(t.attachments), json(t.citations), t.timestamp ?? null, t.hidden ? 1 : 0, t.externalId ?? null,
    cls.classification, cls.sideReason, analysis.inContext[i] ? 1 : 0,
  ];
}

function insertTurns(store: Store, sessionId: string, turns: readonly ImportedTurn[], analysis: SessionSamples): void {
  turns.forEach((t, i) => store.run(INSERT_TURN, turnValues(sessionId, i, t, analysis)));
  writeSamples(store, sessionId, turns, analysis);
}

/** A sample row's columns after its key (session, response turn), in the order `sampleValues` gives them. */
const SAMPLE_COLUMNS = ['feedback_turn', 'next_state_role', 'context_head_end', 'context_tail_start', 'match_hash'] as const;
const INSERT_SAMPLE = `INSERT INTO samples (session_id, response_turn, ${SAMPLE_COLUMNS.join(', ')}) VALUES (?, ?, ${SAMPLE_COLUMNS.map(() => '?').join(', ')})`;

/** A sample row's values after its key, in SAMPLE_COLUMNS' order. */
function sampleValues(s: SessionSamples['samples'][number], matchHash: string): (string | number | null)[] {
  return [s.feedbackTurn, s.nextStateRole, s.context.headEnd, s.context.tailStart, matchHash];
}

/** Writes a session's samples and its no-sample reason; returns the sample count. */
function writeSamples(store: Store, sessionId: string, turns: readonly { role: string; text: string }[], analysis: SessionSamples): number {
  const { hashes } = matchHashes(turns, analysis.inContext, analysis.samples.map((s) => s.responseTurn));
  for (const s of analysis.samples) store.run(INSERT_SAMPLE, [sessionId, s.responseTurn, ...sampleValues(s, hashes.get(s.responseTurn)!)]);
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
  confidence: number | null;
  evidence: string;
  repair: string | null;
  notes: string | null;
  updated_at: number;
  judge_backend: string | null;
  judge_model: string | null;
  prompt_version: string | null;
  reviewed_at: number | null;
  composite: string | null;
}

export type UpsertOutcome = 'added' | 'updated' | 'unchanged';

export interface UpsertResult {
  id: string;
  outcome: UpsertOutcome;
  labelsKept: number;
  labelsDropped: number;
}

/** The content hash stored for a session, or undefined when there is no such session. */
export function storedContentHash(store: Store, sessionId: string): string | undefined {
  return store.get<{ content_hash: string }>('SELECT content_hash FROM sessions WHERE id = ?', [sessionId])?.content_hash;
}

export interface ConversationWrite {
  id: string;
  /** `contentHash(conv)` (./content-hash.ts). */
  hash: string;
  format: SessionFormat;
  sourceId: number;
  /** The classification of `conv.turns`. */
  analysis: SessionSamples;
  now: number;
}

/**
 * Adds a conversation, or replaces a stored one with the same id (its labels follow their
 * replies). The caller has checked that the content changed (`storedContentHash`).
 */
export function writeConversation(store: Store, conv: ImportedConversation, write: ConversationWrite): UpsertResult {
  const { id } = write;
  const storedHash = storedContentHash(store, id);
  const existed = storedHash !== undefined;
  // A conversation that grew (live capture's next turn, a later export of a chat that went on)
  // changes in place when every labelled reply stays where it was: a few rows, not all of them.
  const inPlace = existed ? updateConversationInPlace(store, conv, write, storedHash) : null;
  if (inPlace) return inPlace;
  writtenInPlace.get(store)?.delete(id);
  let saved: SavedLabel[] = [];
  if (existed) {
    saved = store.all<SavedLabel>(
      `SELECT s.match_hash, l.reward, l.hint, l.source, l.votes, l.confidence, l.evidence, l.repair, l.notes, l.updated_at, l.judge_backend, l.judge_model, l.prompt_version,
              l.reviewed_at, l.composite
       FROM labels l JOIN samples s USING (session_id, response_turn) WHERE l.session_id = ?`,
      [id],
    );
    store.run('DELETE FROM sessions WHERE id = ?', [id]); // cascades to turns, samples, labels, alternatives
  }
  store.run(
    `INSERT INTO sessions (id, source_id, format, external_id, title, created_at, metadata, content_hash, no_sample_reason, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
    [id, write.sourceId, write.format, conv.externalId ?? null, conv.title?.trim() || 'Untitled conversation', conv.createdAt ?? null, JSON.stringify(conv.metadata ?? {}), write.hash, write.now],
  );
  insertTurns(store, id, conv.turns, write.analysis);
  insertAlternatives(store, id, conv);
  const labelsKept = saved.length ? restoreLabels(store, id, saved) : 0;
  return { id, outcome: existed ? 'updated' : 'added', labelsKept, labelsDropped: saved.length - labelsKept };
}

type RowValues = (string | number | null)[];

/** A session's rows as updateConversationInPlace wrote them: turns and samples in TURN_COLUMNS' / SAMPLE_COLUMNS' order. */
interface WrittenRows {
  /** The session's content hash with these rows: they are the database's while it still has it. */
  hash: string;
  turns: RowValues[];
  samples: Map<number, RowValues>;
  chain: MatchChain;
}

/**
 * The sessions updated in place last in this process, per store (at most WRITTEN_KEPT, the least
 * recent dropped first): each next update compares the conversation with these rows instead of
 * reading the session's back and hashing its every turn again, which made live capture's turn
 * cost grow with the whole session (docs/design.md §Capture log size). Only this file writes
 * turns and samples: a rewrite drops the entry, rebuildAllSamples all of them, and a rolled-back
 * or deleted write leaves the database without the entry's hash, so it is not used.
 */
const writtenInPlace = new WeakMap<Store, LRUCache<string, WrittenRows>>();
const WRITTEN_KEPT = 16;

function rememberWritten(store: Store, id: string, rows: WrittenRows): void {
  let sessions = writtenInPlace.get(store);
  if (!sessions) writtenInPlace.set(store, (sessions = new LRUCache({ max: WRITTEN_KEPT })));
  sessions.set(id, rows);
}

/** The session's stored turn and sample rows, as values in TURN_COLUMNS' / SAMPLE_COLUMNS' order. */
function readRows(store: Store, id: string): Pick<WrittenRows, 'turns' | 'samples'> {
  const turns = store.all<Record<string, string | number | null>>(`SELECT ${TURN_COLUMNS.join(', ')} FROM turns WHERE session_id = ? ORDER BY idx`, [id]);
  const samples = store.all<Record<string, string | number | null>>(`SELECT response_turn, ${SAMPLE_COLUMNS.join(', ')} FROM samples WHERE session_id = ?`, [id]);
  return {
    turns: turns.map((r) => TURN_COLUMNS.map((c) => r[c]!)),
    samples: new Map(samples.map((r) => [r.response_turn as number, SAMPLE_COLUMNS.map((c) => r[c]!)])),
  };
}

const MATCH_HASH = SAMPLE_COLUMNS.indexOf('match_hash');

/**
 * Brings a stored session to `conv` by changing only the rows that differ, when no labelled
 * reply would move: every stored sample is still a sample at the same turn with the same match
 * hash (so its label stays on its row). Otherwise returns null and the caller rewrites the
 * session. This is live capture's every request (the conversation plus a turn or two) and a
 * re-import of a chat that went on; rewriting all of a 400-turn session's rows there cost tens of
 * milliseconds and as many journal lines a request (docs/design.md §Capture log size).
 */
function updateConversationInPlace(store: Store, conv: ImportedConversation, write: ConversationWrite, storedHash: string): UpsertResult | null {
  const { id, analysis } = write;
  const written = writtenInPlace.get(store)?.get(id);
  const known = written?.hash === storedHash ? written : undefined;
  const stored = known ?? readRows(store, id);
  const chain = matchHashes(conv.turns, analysis.inContext, analysis.samples.map((s) => s.responseTurn), known?.chain);
  for (const [turn, row] of stored.samples) if (chain.hashes.get(turn) !== row[MATCH_HASH]) return null;

  store.run('UPDATE sessions SET source_id = ?, format = ?, external_id = ?, title = ?, created_at = ?, metadata = ?, content_hash = ?, no_sample_reason = ?, updated_at = ? WHERE id = ?', [
    write.sourceId, write.format, conv.externalId ?? null, conv.title?.trim() || 'Untitled conversation', conv.createdAt ?? null, JSON.stringify(conv.metadata ?? {}),
    write.hash, analysis.noSampleReason, write.now, id,
  ]);
  const turns = conv.turns.map((t, i) => turnValues(id, i, t, analysis));
  turns.forEach((values, i) => {
    const before = stored.turns[i];
    if (!before) store.run(INSERT_TURN, values);
    else if (values.some((v, k) => before[k] !== v)) store.run(`UPDATE turns SET ${TURN_COLUMNS.slice(2).map((c) => `${c} = ?`).join(', ')} WHERE session_id = ? AND idx = ?`, [...values.slice(2), id, i]);
  });
  if (stored.turns.length > conv.turns.length) store.run('DELETE FROM turns WHERE session_id = ? AND idx >= ?', [id, conv.turns.length]);
  const samples = new Map(analysis.samples.map((s) => [s.responseTurn, sampleValues(s, chain.hashes.get(s.responseTurn)!)]));
  for (const [turn, values] of samples) {
    const before = stored.samples.get(turn);
    if (!before) store.run(INSERT_SAMPLE, [id, turn, ...values]);
    else if (values.some((v, k) => before[k] !== v)) {
      store.run(`UPDATE samples SET ${SAMPLE_COLUMNS.map((c) => `${c} = ?`).join(', ')} WHERE session_id = ? AND response_turn = ?`, [...values, id, turn]);
    }
  }
  if (conv.alternatives.length || store.get('SELECT 1 FROM alternatives WHERE session_id = ?', [id])) {
    store.run('DELETE FROM alternatives WHERE session_id = ?', [id]);
    insertAlternatives(store, id, conv);
  }
  rememberWritten(store, id, { hash: write.hash, turns, samples, chain });
  const labels = store.get<{ n: number }>('SELECT COUNT(*) AS n FROM labels WHERE session_id = ?', [id])!.n;
  return { id, outcome: 'updated', labelsKept: labels, labelsDropped: 0 };
}

/** Puts each saved label on the new sample with the same match hash; returns how many found one. */
function restoreLabels(store: Store, id: string, saved: readonly SavedLabel[]): number {
  const byHash = new Map(store.all<{ match_hash: string; response_turn: number }>('SELECT match_hash, response_turn FROM samples WHERE session_id = ?', [id]).map((r) => [r.match_hash, r.response_turn]));
  let kept = 0;
  for (const l of saved) {
    const turn = byHash.get(l.match_hash);
    if (turn === undefined) continue;
    store.run(
      `INSERT INTO labels (session_id, response_turn, reward, hint, source, votes, confidence, evidence, repair, notes, updated_at, judge_backend, judge_model, prompt_version,
         reviewed_at, composite)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [id, turn, l.reward, l.hint, l.source, l.votes, l.confidence, l.evidence, l.repair, l.notes, l.updated_at, l.judge_backend, l.judge_model, l.prompt_version, l.reviewed_at, l.composite],
    );
    kept++;
  }
  return kept;
}

/**
 * Recomputes every session's samples (after the context window changed, or after a schema
 * upgrade: see samplesNeedRebuild). Labels stay: the reply turns of a session do not depend
 * on the window. A label whose reply is no longer a sample (the classification rules
 * changed since the import) is dropped.
 */
export function rebuildAllSamples(store: Store, classify: ClassifySession): void {
  writtenInPlace.delete(store);
  const labels = store.all('SELECT * FROM labels');
  store.run('DELETE FROM samples');
  const sessionIds = store.all<{ id: string }>('SELECT id FROM sessions').map((r) => r.id);
  for (const id of sessionIds) {
    const turns = store.all<{ role: ImportedTurn['role']; text: string; hidden: number; tool_calls: string; attachments: string; in_context: number }>(
      'SELECT role, text, hidden, tool_calls, attachments, in_context FROM turns WHERE session_id = ? ORDER BY idx',
      [id],
    );
    const analysed = turns.map((t) => ({ role: t.role, text: t.text, hidden: !!t.hidden, toolCalls: JSON.parse(t.tool_calls), attachments: JSON.parse(t.attachments) }));
    const analysis = classify(analysed);
    analysis.inContext.forEach((inContext, idx) => {
      if (!!turns[idx].in_context !== inContext) store.run('UPDATE turns SET in_context = ? WHERE session_id = ? AND idx = ?', [inContext ? 1 : 0, id, idx]);
    });
    writeSamples(store, id, analysed, analysis);
  }
  for (const l of labels) {
    if (!store.get('SELECT 1 FROM samples WHERE session_id = ? AND response_turn = ?', [l.session_id, l.response_turn])) continue;
    const cols = Object.keys(l);
    store.run(`INSERT INTO labels (${cols.join(',')}) VALUES (${cols.map(() => '?').join(',')})`, cols.map((c) => l[c]));
  }
  store.run("DELETE FROM settings WHERE key = 'samples_need_rebuild'");
}

/** Whether a schema upgrade left the samples to be recomputed by the classifier (migration 3). */
export function samplesNeedRebuild(store: Store): boolean {
  return !!store.get("SELECT 1 FROM settings WHERE key = 'samples_need_rebuild'");
}

/** Removes a session with its turns, samples, labels and captured exchanges. */
export function deleteSessionRows(store: Store, id: string): void {
  store.transaction(() => {
    store.run('DELETE FROM labels WHERE session_id = ?', [id]);
    store.run('DELETE FROM sessions WHERE id = ?', [id]);
    store.run('DELETE FROM capture_exchanges WHERE session_id = ?', [id]);
    store.run('DELETE FROM split_overrides WHERE session_id = ?', [id]);
  });
}
