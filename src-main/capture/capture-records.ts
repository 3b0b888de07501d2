/**
 * The records of the capture log (./capture-log.ts), one JSON object a line, version 1:
 *
 *   request  a chat-completions request arrived: its session, main or side, the messages, the
 *            tools it offered
 *   reply    its reply was delivered: text, reasoning, tool calls, who served it, and for the
 *            local model the rollout (prompt ids, generated ids, their log-probs)
 *   close    `X-Session-Done`: the session takes no more turns
 *   trained  the background loop trained on these samples (`session/turn` keys)
 *   adapter  the served adapter changed (after a run, or a rollback): the new one, or null
 *   feedback a chat client's thumbs-up or -down on a reply (`POST /v1/feedback`): it becomes a
 *            manual label once the reply is a sample (docs/design.md §Feedback endpoint)
 *   archived a settled session's records were moved to an archive file (./log-archive.ts); this
 *            stub keeps its place: its id, its next sequence number, which file has it, and
 *            for a key's open latest segment what a request must begin with to continue it
 *
 * A request whose reply never came (the client or the server went away) still counts: the
 * user did say it, so its last message is the next state of the previous reply.
 */
import type { Reward } from '../../src-shared/types.js';
import type { CaptureExchangeRow } from '../workspace/workspace.js';

export interface CapturedMessage {
  role: string;
  content: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  name?: string;
}

export type CapturedReply = CaptureExchangeRow['reply'];
export type Rollout = NonNullable<CaptureExchangeRow['rollout']>;

export interface RequestRecord {
  v: 1;
  t: 'request';
  id: string;
  /** The database session id (`capture:<key>` or `capture:<key>#<segment>`). */
  session: string;
  seq: number;
  kind: 'main' | 'side';
  at: number;
  messages: CapturedMessage[];
  /** The tools the request offered (its `tools`, as sent), where it offered some. */
  tools?: unknown[];
}

export interface ReplyRecord {
  v: 1;
  t: 'reply';
  id: string;
  session: string;
  at: number;
  reply: CapturedReply;
  servedBy: 'local' | 'upstream';
  model: string | null;
  modelDir: string | null;
  rollout: Rollout | null;
  /** The chat completion id the client got (absent in records written before it was kept). */
  completionId?: string | null;
}

export interface FeedbackRecord {
  v: 1;
  t: 'feedback';
  at: number;
  session: string;
  /** The exchange (request record id) whose reply it rates. */
  exchange: string;
  /** The reply's turn in the session. */
  turn: number;
  reward: Reward;
  hint?: string | null;
}

export interface CloseRecord {
  v: 1;
  t: 'close';
  session: string;
  at: number;
}

export interface TrainedRecord {
  v: 1;
  t: 'trained';
  at: number;
  runId: string;
  samples: string[];
  adapterDir: string;
}

export interface AdapterRecord {
  v: 1;
  t: 'adapter';
  at: number;
  dir: string | null;
  reason: 'trained' | 'rollback';
}

/**
 * A settled session's records moved to `file` in the log's archive folder (./log-archive.ts).
 * Written where the session's first record was, so its key's segments keep their order.
 */
export interface ArchivedRecord {
  v: 1;
  t: 'archived';
  session: string;
  /** The session's last activity. */
  at: number;
  /** The archive file (a bare name in the archive folder) that holds the records. */
  file: string;
  /** The sequence number its next request would take: a later side request must not reuse one. */
  nextSeq: number;
  /** Whether the records include a main request (the session is a conversation in the database). */
  conversation: boolean;
  /**
   * Set when the session was its key's open latest segment, which a later request of its key
   * may still continue (docs/design.md §Capture log rotation).
   */
  open?: ArchivedContinuation;
}

/** What continuing an archived session needs, its records being out of the log. */
export interface ArchivedContinuation {
  /** How many messages a continuing request must begin with: its last main request's, then that one's reply. */
  messages: number;
  /** sha256 of those messages' roles and trimmed texts (capture-sessions.ts transcriptHash). */
  transcript: string;
  /** When its last main request's messages were first sent, in order: [time in ms, how many messages]. */
  stamps: [number, number][];
}

export type CaptureRecord = RequestRecord | ReplyRecord | CloseRecord | TrainedRecord | AdapterRecord | FeedbackRecord | ArchivedRecord;

/** What an archive file may be called: a bare name, so a hand-edited stub cannot point outside the folder. */
export const ARCHIVE_FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,100}\.jsonl$/;

/**
 * Version 2 lines (./log-prefixes.ts): a request or a reply's rollout written as the part it
 * shares with its session's previous one (its id and a length) and the rest. Read back whole.
 */
export interface SharedRequestLine extends Omit<RequestRecord, 'v'> {
  v: 2;
  /** The session's last main request before this one, whose first `kept` messages this one begins with. */
  base: string;
  kept: number;
  /** The request offered the very tools its base did (written instead of `tools`: an agent sends the same list every turn). */
  sameTools?: true;
}

export interface SharedReplyLine extends Omit<ReplyRecord, 'v' | 'rollout'> {
  v: 2;
  /** `promptIds` holds what follows the first `promptKept` of the base reply's prompt ids and tokens. */
  rollout: Rollout & { promptBase: string; promptKept: number };
}

export type LogLine = CaptureRecord | SharedRequestLine | SharedReplyLine;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function need(ok: boolean, what: string): void {
  if (!ok) throw new Error(`capture record: ${what}`);
}

/**
 * Checks one parsed line; throws naming what is wrong (the log reader skips such lines). A
 * version 2 line is checked here and made whole by ./log-prefixes.ts.
 */
export function parseRecord(value: unknown): LogLine {
  need(isObject(value), 'not a JSON object');
  const r = value as Record<string, unknown>;
  const shared = r.v === 2 && (r.t === 'request' || r.t === 'reply');
  need(r.v === 1 || shared, `unknown version ${JSON.stringify(r.v)}`);
  need(typeof r.at === 'number', 'no time');
  switch (r.t) {
    case 'request':
      need(typeof r.id === 'string' && typeof r.session === 'string' && typeof r.seq === 'number', 'request without id, session or seq');
      need(r.kind === 'main' || r.kind === 'side', 'request kind must be main or side');
      need(Array.isArray(r.messages) && r.messages.every((m) => isObject(m) && typeof m.role === 'string' && typeof m.content === 'string'), 'request messages malformed');
      need(!shared || (typeof r.base === 'string' && Number.isInteger(r.kept)), 'shared request without base or kept');
      need(r.tools === undefined || Array.isArray(r.tools), 'request tools must be a list');
      need(r.sameTools === undefined || (shared && r.sameTools === true && r.tools === undefined), 'request sameTools malformed');
      return r as unknown as RequestRecord | SharedRequestLine;
    case 'reply':
      need(typeof r.id === 'string' && typeof r.session === 'string', 'reply without id or session');
      need(isObject(r.reply) && typeof r.reply.content === 'string' && Array.isArray(r.reply.toolCalls), 'reply malformed');
      need(r.servedBy === 'local' || r.servedBy === 'upstream', 'reply servedBy must be local or upstream');
      need(r.rollout === null || r.rollout === undefined || (isObject(r.rollout) && [r.rollout.promptIds, r.rollout.tokens, r.rollout.logprobs].every(Array.isArray)), 'reply rollout malformed');
      need(!shared || (isObject(r.rollout) && typeof r.rollout.promptBase === 'string' && Number.isInteger(r.rollout.promptKept)), 'shared reply without promptBase or promptKept');
      return r as unknown as ReplyRecord | SharedReplyLine;
    case 'close':
      need(typeof r.session === 'string', 'close without session');
      return r as unknown as CloseRecord;
    case 'trained':
      need(typeof r.runId === 'string' && Array.isArray(r.samples) && typeof r.adapterDir === 'string', 'trained record malformed');
      return r as unknown as TrainedRecord;
    case 'feedback':
      need(typeof r.session === 'string' && typeof r.exchange === 'string' && Number.isInteger(r.turn), 'feedback without session, exchange or turn');
      need(r.reward === 1 || r.reward === -1 || r.reward === 0, 'feedback reward must be 1, -1 or 0');
      need(r.hint === undefined || r.hint === null || typeof r.hint === 'string', 'feedback hint must be text');
      return r as unknown as FeedbackRecord;
    case 'adapter':
      need(r.dir === null || typeof r.dir === 'string', 'adapter record malformed');
      return r as unknown as AdapterRecord;
    case 'archived':
      need(typeof r.session === 'string' && typeof r.file === 'string' && ARCHIVE_FILE_NAME.test(r.file), 'archived record without session or with a file name that is not a bare archive name');
      need(Number.isInteger(r.nextSeq) && (r.nextSeq as number) >= 0 && typeof r.conversation === 'boolean', 'archived record malformed');
      need(r.open === undefined || isContinuation(r.open), 'archived record with a malformed continuation');
      return r as unknown as ArchivedRecord;
    default:
      throw new Error(`capture record: unknown type ${JSON.stringify(r.t)}`);
  }
}

/** The session a record belongs to, if any (what per-session delete removes). */
export function recordSession(r: CaptureRecord): string | null {
  return r.t === 'request' || r.t === 'reply' || r.t === 'close' || r.t === 'feedback' || r.t === 'archived' ? r.session : null;
}

function isContinuation(v: unknown): v is ArchivedContinuation {
  const c = v as ArchivedContinuation;
  return typeof c === 'object' && c !== null && Number.isInteger(c.messages) && c.messages >= 0 && typeof c.transcript === 'string' && /^[0-9a-f]{64}$/.test(c.transcript)
    && Array.isArray(c.stamps) && c.stamps.every((p) => Array.isArray(p) && p.length === 2 && Number.isFinite(p[0]) && Number.isInteger(p[1]) && p[1] > 0);
}
