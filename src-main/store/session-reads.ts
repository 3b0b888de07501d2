// Reading sessions back out of the store as plain records: one session with its turns,
// samples (with labels) and alternatives at a time, so exports and the training-set
// builder can walk a large database without loading it all.
import { contextTurnIndices, type ContextSpan } from '../../src-shared/context-span.js';
import type { Attachment, Citation, LabelSource, Reward, Role, SessionFormat, ToolCall, TurnClass, Vote } from '../../src-shared/types.js';
import type { CompositeScore } from '../../src-shared/composite.js';
import { offeredTools, type OfferedTool } from '../../src-shared/offered-tools.js';
import type { LabelView, NoSampleReason } from '../../src-shared/views.js';
import type { Store } from './database.js';

export interface TurnRecord {
  index: number;
  role: Role;
  text: string;
  reasoning: string | null;
  toolCalls: ToolCall[];
  toolCallId: string | null;
  toolName: string | null;
  attachments: Attachment[];
  citations: Citation[];
  timestamp: number | null;
  hidden: boolean;
  classification: TurnClass;
  sideReason: string | null;
  /** Whether the turn may be part of a context (neither metadata nor empty). */
  inContext: boolean;
}

export interface StoredLabel extends LabelView {
  judgeBackend: string | null;
  judgeModel: string | null;
  promptVersion: string | null;
}

export interface SampleRecord {
  responseTurn: number;
  feedbackTurn: number | null;
  nextStateRole: 'user' | 'tool' | null;
  /** Which turns the context is (sampleContextTurns lists them). */
  context: ContextSpan;
  label: StoredLabel;
}

export interface AlternativeRecord {
  atTurn: number;
  ord: number;
  role: Role;
  text: string;
  reasoning: string | null;
  toolCalls: ToolCall[];
  timestamp: number | null;
}

export interface SessionRecord {
  id: string;
  title: string;
  format: SessionFormat;
  createdAt: number | null;
  noSampleReason: NoSampleReason | null;
  /** The tools the conversation offered the model (its metadata's `tools`, read by src-shared/offered-tools.ts), or null. */
  tools: OfferedTool[] | null;
  /**
   * Replies written while the conversation offered other tools than `tools` (a live session whose
   * agent changed its list): that list by reply turn (null: none offered), from the metadata's
   * `toolsByTurn`. Read through {@link toolsOfferedAt}.
   */
  toolsByTurn?: ReadonlyMap<number, OfferedTool[] | null>;
}

/** The tools the model was offered when it wrote the reply at `turn`. */
export function toolsOfferedAt(session: Pick<SessionRecord, 'tools' | 'toolsByTurn'>, turn: number): OfferedTool[] | null {
  return session.toolsByTurn?.has(turn) ? session.toolsByTurn.get(turn)! : session.tools;
}

export interface SessionBundle extends SessionRecord {
  turns: TurnRecord[];
  samples: SampleRecord[];
  alternatives: AlternativeRecord[];
}

export const EMPTY_LABEL: StoredLabel = {
  reward: null, hint: null, source: null, votes: [], confidence: null, evidence: [], repair: null, notes: null, updatedAt: null,
  reviewedAt: null, composite: null, judgeBackend: null, judgeModel: null, promptVersion: null,
};

interface TurnRow {
  idx: number; role: Role; text: string; reasoning: string | null; tool_calls: string; tool_call_id: string | null;
  tool_name: string | null; attachments: string; citations: string; timestamp: number | null; hidden: number;
  classification: TurnClass; side_reason: string | null; in_context: number;
}

interface SampleRow {
  response_turn: number; feedback_turn: number | null; next_state_role: 'user' | 'tool' | null;
  context_head_end: number; context_tail_start: number;
  reward: number | null; hint: string | null; source: string | null; votes: string | null; confidence: number | null; evidence: string | null; repair: string | null;
  notes: string | null; updated_at: number | null; judge_backend: string | null; judge_model: string | null; prompt_version: string | null;
  reviewed_at: number | null; composite: string | null;
}

/** Stable order for everything that walks sessions (exports must be byte-identical). */
export const SESSION_ORDER = 'ORDER BY created_at IS NULL, created_at, id';

interface SessionRow { id: string; title: string; format: string; created_at: number | null; no_sample_reason: string | null; tools: string | null; tools_by_turn: string | null }

/**
 * The columns of a SessionRow; `tools` is only the metadata's list, not the whole metadata (a
 * metadata that is not JSON, which only a hand-edited database has, reads as no tools).
 */
const SESSION_COLUMNS = "id, title, format, created_at, no_sample_reason, CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.tools') END AS tools, "
  + "CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.toolsByTurn') END AS tools_by_turn";

function sessionRecord(row: SessionRow): SessionRecord {
  return {
    id: row.id, title: row.title, format: row.format as SessionFormat, createdAt: row.created_at,
    noSampleReason: row.no_sample_reason as NoSampleReason | null, tools: toolsOf(row.tools), ...toolsByTurnOf(row.tools_by_turn),
  };
}

/** The metadata's `toolsByTurn`, `{"<turn>": [tools…]}`; anything else there reads as none. */
function toolsByTurnOf(text: string | null): Pick<SessionRecord, 'toolsByTurn'> {
  let byTurn: unknown;
  try {
    byTurn = text === null ? null : JSON.parse(text);
  } catch {
    return {};
  }
  if (!byTurn || typeof byTurn !== 'object' || Array.isArray(byTurn)) return {};
  const entries = Object.entries(byTurn).filter(([turn]) => /^\d+$/.test(turn)).map(([turn, tools]) => [Number(turn), offeredTools(tools)] as const);
  return entries.length ? { toolsByTurn: new Map(entries) } : {};
}

/** json_extract gives a list as its JSON text, and a string (ShareGPT's form) as the string itself. */
function toolsOf(text: string | null): OfferedTool[] | null {
  if (text === null) return null;
  try {
    return offeredTools(JSON.parse(text));
  } catch {
    return null;
  }
}

export function labelFromRow(row: Omit<SampleRow, 'response_turn' | 'feedback_turn' | 'next_state_role' | 'context_head_end' | 'context_tail_start'>): StoredLabel {
  if (row.source === null) return { ...EMPTY_LABEL };
  return {
    reward: row.reward as Reward | null,
    hint: row.hint,
    source: row.source as LabelSource,
    votes: JSON.parse(row.votes ?? '[]') as Vote[],
    confidence: row.confidence,
    evidence: JSON.parse(row.evidence ?? '[]') as string[],
    repair: row.repair,
    notes: row.notes,
    updatedAt: row.updated_at,
    reviewedAt: row.reviewed_at,
    composite: row.composite ? (JSON.parse(row.composite) as CompositeScore) : null,
    judgeBackend: row.judge_backend,
    judgeModel: row.judge_model,
    promptVersion: row.prompt_version,
  };
}

export function readTurns(store: Store, sessionId: string): TurnRecord[] {
  return store.all<TurnRow>('SELECT * FROM turns WHERE session_id = ? ORDER BY idx', [sessionId]).map((r) => ({
    index: r.idx, role: r.role, text: r.text, reasoning: r.reasoning, toolCalls: JSON.parse(r.tool_calls),
    toolCallId: r.tool_call_id, toolName: r.tool_name, attachments: JSON.parse(r.attachments), citations: JSON.parse(r.citations),
    timestamp: r.timestamp, hidden: !!r.hidden, classification: r.classification, sideReason: r.side_reason,
    inContext: !!r.in_context,
  }));
}

export function readSamples(store: Store, sessionId: string): SampleRecord[] {
  return store
    .all<SampleRow>(
      `SELECT s.response_turn, s.feedback_turn, s.next_state_role, s.context_head_end, s.context_tail_start, l.reward, l.hint, l.source, l.votes,
              l.confidence, l.evidence, l.repair, l.notes, l.updated_at, l.judge_backend, l.judge_model, l.prompt_version, l.reviewed_at, l.composite
       FROM samples s LEFT JOIN labels l USING (session_id, response_turn)
       WHERE s.session_id = ? ORDER BY s.response_turn`,
      [sessionId],
    )
    .map((r) => ({
      responseTurn: r.response_turn, feedbackTurn: r.feedback_turn, nextStateRole: r.next_state_role,
      context: { headEnd: r.context_head_end, tailStart: r.context_tail_start }, label: labelFromRow(r),
    }));
}

/** The indices of a sample's context turns, in order (computed from its span: O(turns)). */
export function sampleContextTurns(turns: readonly TurnRecord[], sample: SampleRecord): number[] {
  return contextTurnIndices((i) => turns[i].inContext, sample.context, sample.responseTurn);
}

export function readAlternatives(store: Store, sessionId: string): AlternativeRecord[] {
  return store
    .all<{ at_turn: number; ord: number; role: Role; text: string; reasoning: string | null; tool_calls: string; timestamp: number | null }>(
      'SELECT * FROM alternatives WHERE session_id = ? ORDER BY at_turn, ord',
      [sessionId],
    )
    .map((r) => ({ atTurn: r.at_turn, ord: r.ord, role: r.role, text: r.text, reasoning: r.reasoning, toolCalls: JSON.parse(r.tool_calls), timestamp: r.timestamp }));
}

export function readSessionRecord(store: Store, sessionId: string): SessionRecord | undefined {
  const row = store.get<SessionRow>(
    `SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`,
    [sessionId],
  );
  return row ? sessionRecord(row) : undefined;
}

export function hasSample(store: Store, sessionId: string, responseTurn: number): boolean {
  return !!store.get('SELECT 1 FROM samples WHERE session_id = ? AND response_turn = ?', [sessionId, responseTurn]);
}

/** The reply turns of a session's samples, in order. */
export function readSampleTurns(store: Store, sessionId: string): number[] {
  return store.all<{ t: number }>('SELECT response_turn AS t FROM samples WHERE session_id = ? ORDER BY response_turn', [sessionId]).map((r) => r.t);
}

/** How many turns and samples a session has. */
export function countTurnsAndSamples(store: Store, sessionId: string): { turns: number; samples: number } {
  return store.get<{ turns: number; samples: number }>(
    'SELECT (SELECT COUNT(*) FROM turns WHERE session_id = ?) AS turns, (SELECT COUNT(*) FROM samples WHERE session_id = ?) AS samples',
    [sessionId, sessionId],
  )!;
}

export function readBundle(store: Store, record: SessionRecord): SessionBundle {
  return { ...record, turns: readTurns(store, record.id), samples: readSamples(store, record.id), alternatives: readAlternatives(store, record.id) };
}

/** Every session (or one, or those of one format — live capture reads only its own) as a bundle. */
export function* iterateBundles(store: Store, sessionId?: string, format?: SessionFormat): Generator<SessionBundle> {
  const where = sessionId !== undefined ? 'WHERE id = ?' : format !== undefined ? 'WHERE format = ?' : '';
  const rows = store.all<SessionRow>(
    `SELECT ${SESSION_COLUMNS} FROM sessions ${where} ${SESSION_ORDER}`,
    sessionId !== undefined ? [sessionId] : format !== undefined ? [format] : undefined,
  );
  for (const row of rows) yield readBundle(store, sessionRecord(row));
}
