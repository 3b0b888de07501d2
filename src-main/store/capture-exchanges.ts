// The `capture_exchanges` table: every chat-completions exchange recorded by live capture
// (src-main/capture/), with the local model's rollout when it generated the reply.
import { LRUCache } from 'lru-cache';
import { sharedPrefixLength } from '../../src-shared/shared-prefix.js';
import type { ToolCall } from '../../src-shared/types.js';
import type { Store } from './database.js';

/** One captured chat-completions exchange as the database keeps it. */
export interface CaptureExchangeRow {
  /** The capture log's record id. */
  id: string;
  sessionId: string;
  seq: number;
  kind: 'main' | 'side';
  at: number;
  /** Where the reply sits among the session's turns (main exchanges): the request's message count. */
  replyTurn: number | null;
  messages: unknown[];
  reply: { content: string; reasoning?: string; toolCalls: unknown[]; finishReason: string };
  servedBy: 'local' | 'upstream';
  model: string | null;
  /** The local model folder that generated the reply (null when an upstream server did). */
  modelDir: string | null;
  rollout: { promptIds: number[]; tokens: number[]; logprobs: number[] } | null;
  /** The chat completion id the client got for this reply (null when not recorded). */
  completionId?: string | null;
}

export type Rollout = NonNullable<CaptureExchangeRow['rollout']>;

/**
 * Inserts an exchange by id; one already there (a replayed record) is left as it is. Its
 * messages are stored as what follows the part they share with the session's previous main
 * exchange (migration 8), since a client resends the whole conversation with each request.
 */
export function insertCaptureExchange(store: Store, x: CaptureExchangeRow): void {
  if (store.get('SELECT 1 FROM capture_exchanges WHERE id = ?', [x.id])) return;
  const base = previousMain(store, x.sessionId, x.seq);
  if (x.kind === 'main') rememberMain(store, x);
  const kept = base ? sharedPrefixLength(base.messages, x.messages, (a, b) => a === b || JSON.stringify(a) === JSON.stringify(b)) : 0;
  store.run(
    `INSERT INTO capture_exchanges (id, session_id, seq, kind, at, reply_turn, messages, messages_base, messages_kept, reply, served_by, model, model_dir,
       prompt_ids, token_ids, logprobs, completion_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      x.id, x.sessionId, x.seq, x.kind, x.at, x.replyTurn, JSON.stringify(x.messages.slice(kept)), kept ? base!.id : null, kept, JSON.stringify(x.reply),
      x.servedBy, x.model, x.modelDir, x.rollout ? JSON.stringify(x.rollout.promptIds) : null, x.rollout ? JSON.stringify(x.rollout.tokens) : null,
      x.rollout ? JSON.stringify(x.rollout.logprobs) : null, x.completionId ?? null,
    ],
  );
}

interface StoredRow {
  id: string; session_id: string; seq: number; kind: 'main' | 'side'; at: number; reply_turn: number | null; messages: string; messages_base: string | null;
  messages_kept: number; reply: string; served_by: 'local' | 'upstream'; model: string | null; model_dir: string | null; prompt_ids: string | null;
  token_ids: string | null; logprobs: string | null; completion_id: string | null;
}

/** Every captured exchange of a session (or all), oldest first, each with all its messages. */
export function readCaptureExchanges(store: Store, sessionId?: string): CaptureExchangeRow[] {
  const rows = store.all<StoredRow>(`SELECT * FROM capture_exchanges ${sessionId !== undefined ? 'WHERE session_id = ?' : ''} ORDER BY at, session_id, seq`, sessionId !== undefined ? [sessionId] : []);
  const messages = wholeMessages(rows);
  return rows.map((r) => ({
    id: r.id, sessionId: r.session_id, seq: r.seq, kind: r.kind, at: r.at, replyTurn: r.reply_turn, messages: messages.get(r.id)!,
    reply: JSON.parse(r.reply), servedBy: r.served_by, model: r.model, modelDir: r.model_dir,
    rollout: r.token_ids ? { promptIds: JSON.parse(r.prompt_ids!), tokens: JSON.parse(r.token_ids), logprobs: JSON.parse(r.logprobs!) } : null,
    completionId: r.completion_id,
  }));
}

/**
 * The main exchange each session inserted last in this process, with all its messages, per store
 * (at most LAST_MAINS_KEPT sessions, the least recent dropped first). Rebuilding it from the
 * database took reading and parsing every row of the session, then comparing every message as
 * JSON: at each turn, time in proportion to the whole session (docs/design.md §Capture log
 * size). Its messages are live capture's own objects, which the next request shares (the capture
 * log's prefixes, ../capture/log-prefixes.ts), so the shared part compares by identity. A row
 * never changes once inserted, so an entry holds while it is still the session's latest main
 * exchange before the next one in the database; a rolled-back or deleted one is not.
 */
const lastMains = new WeakMap<Store, LRUCache<string, { id: string; messages: unknown[] }>>();
const LAST_MAINS_KEPT = 16;

function rememberMain(store: Store, x: CaptureExchangeRow): void {
  let sessions = lastMains.get(store);
  if (!sessions) lastMains.set(store, (sessions = new LRUCache({ max: LAST_MAINS_KEPT })));
  sessions.set(x.sessionId, { id: x.id, messages: x.messages });
}

/** The session's main exchange stored last before `seq`, with all its messages. */
function previousMain(store: Store, sessionId: string, seq: number): { id: string; messages: unknown[] } | undefined {
  const latest = store.get<{ id: string; seq: number }>("SELECT id, seq FROM capture_exchanges WHERE session_id = ? AND seq < ? AND kind = 'main' ORDER BY seq DESC LIMIT 1", [sessionId, seq]);
  if (!latest) return undefined;
  const remembered = lastMains.get(store)?.get(sessionId);
  if (remembered?.id === latest.id) return remembered;
  const rows = store.all<Pick<StoredRow, 'id' | 'seq' | 'messages' | 'messages_base' | 'messages_kept'>>(
    'SELECT id, seq, messages, messages_base, messages_kept FROM capture_exchanges WHERE session_id = ? AND seq <= ? ORDER BY seq',
    [sessionId, latest.seq],
  );
  return { id: latest.id, messages: wholeMessages(rows).get(latest.id)! };
}

/** Each row's messages, its base's shared ones first (bases are earlier rows of the same session; the arrays share their objects). */
function wholeMessages(rows: readonly Pick<StoredRow, 'id' | 'seq' | 'messages' | 'messages_base' | 'messages_kept'>[]): Map<string, unknown[]> {
  const whole = new Map<string, unknown[]>();
  for (const r of [...rows].sort((a, b) => a.seq - b.seq)) {
    const own = JSON.parse(r.messages) as unknown[];
    if (r.messages_base === null) {
      whole.set(r.id, own);
      continue;
    }
    const base = whole.get(r.messages_base);
    if (!base) throw new Error(`capture exchange ${r.id}: its base exchange ${r.messages_base} is not in the database`);
    whole.set(r.id, [...base.slice(0, r.messages_kept), ...own]);
  }
  return whole;
}

/** A captured reply as feedback names it: by its completion id, or by session and reply turn. */
export type CapturedReplyRef = { completionId: string } | { session: string; turn: number };

export interface CapturedReplyAt {
  /** The exchange (capture log request id). */
  id: string;
  sessionId: string;
  kind: 'main' | 'side';
  replyTurn: number | null;
  completionId: string | null;
}

/**
 * The captured reply a reference names, or undefined. A session is the database's id
 * (`capture:<key>` or `capture:<key>#<n>`) or the client's own key (its X-Session-Id), which
 * stands for the latest of its segments that has a reply at that turn.
 */
export function findCapturedReply(store: Store, ref: CapturedReplyRef): CapturedReplyAt | undefined {
  type Row = { id: string; session_id: string; kind: 'main' | 'side'; reply_turn: number | null; completion_id: string | null };
  const row =
    'completionId' in ref
      ? store.get<Row>('SELECT id, session_id, kind, reply_turn, completion_id FROM capture_exchanges WHERE completion_id = ? ORDER BY at DESC LIMIT 1', [ref.completionId])
      : store.get<Row>(
          `SELECT id, session_id, kind, reply_turn, completion_id FROM capture_exchanges
            WHERE kind = 'main' AND reply_turn = ?
              AND (session_id = ? OR session_id = ? OR substr(session_id, 1, length(?)) = ?)
            ORDER BY at DESC, seq DESC LIMIT 1`,
          [ref.turn, ref.session, `capture:${ref.session}`, `capture:${ref.session}#`, `capture:${ref.session}#`],
        );
  return row ? { id: row.id, sessionId: row.session_id, kind: row.kind, replyTurn: row.reply_turn, completionId: row.completion_id } : undefined;
}

/** Exchanges recorded, captured samples with a next state but no label, and the captured session ids. */
export function readCaptureCounts(store: Store): { exchanges: number; pendingJudge: number; sessionIds: string[] } {
  const exchanges = store.get<{ n: number }>('SELECT COUNT(*) AS n FROM capture_exchanges')!.n;
  const pendingJudge = store.get<{ n: number }>(
    `SELECT COUNT(*) AS n FROM samples p JOIN sessions s ON s.id = p.session_id
       LEFT JOIN labels l ON l.session_id = p.session_id AND l.response_turn = p.response_turn
       WHERE s.format = 'capture' AND p.feedback_turn IS NOT NULL AND (l.session_id IS NULL OR (l.reward IS NULL AND l.hint IS NULL))`,
  )!.n;
  const sessionIds = store
    .all<{ id: string }>("SELECT id FROM sessions WHERE format = 'capture' UNION SELECT DISTINCT session_id AS id FROM capture_exchanges")
    .map((r) => r.id);
  return { exchanges, pendingJudge, sessionIds };
}

export function hasCaptureExchanges(store: Store, sessionId: string): boolean {
  return !!store.get('SELECT 1 FROM capture_exchanges WHERE session_id = ?', [sessionId]);
}

/**
 * The latest rollout of the local model `modelDir` for the reply at `responseTurn`, with the
 * reply it produced (the caller checks that the reply is still the session's).
 */
export function latestRollout(store: Store, sessionId: string, responseTurn: number, modelDir: string): { reply: { text: string; toolCalls: ToolCall[] }; rollout: Rollout } | undefined {
  const row = store.get<{ reply: string; prompt_ids: string; token_ids: string; logprobs: string }>(
    `SELECT reply, prompt_ids, token_ids, logprobs FROM capture_exchanges
       WHERE session_id = ? AND reply_turn = ? AND kind = 'main' AND token_ids IS NOT NULL AND model_dir = ?
       ORDER BY seq DESC LIMIT 1`,
    [sessionId, responseTurn, modelDir],
  );
  if (!row) return undefined;
  const reply = JSON.parse(row.reply) as CaptureExchangeRow['reply'];
  return {
    reply: { text: reply.content, toolCalls: capturedToolCalls(reply.toolCalls ?? []) },
    rollout: { promptIds: JSON.parse(row.prompt_ids), tokens: JSON.parse(row.token_ids), logprobs: JSON.parse(row.logprobs) },
  };
}

/** A captured reply's tool calls (OpenAI's form, as the endpoint returned them) as a turn keeps them. */
export function capturedToolCalls(calls: unknown[]): ToolCall[] {
  return calls.map((c) => {
    const call = (c ?? {}) as { id?: unknown; function?: { name?: unknown; arguments?: unknown } };
    const args = call.function?.arguments;
    return {
      ...(typeof call.id === 'string' ? { id: call.id } : {}),
      name: typeof call.function?.name === 'string' ? call.function.name : 'unknown',
      arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}),
    };
  });
}
