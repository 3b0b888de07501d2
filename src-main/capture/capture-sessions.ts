/**
 * Live sessions: which conversation a captured request belongs to, and the conversation
 * each session stands for. Built by replaying the capture log's records, then kept up to
 * date as new ones are appended — the same `apply` both times, so a restart sees exactly the
 * state the running process had.
 *
 * Resolution of a request (choices of our own, documented in docs/design.md §Capture sessions):
 * - The key is the `X-Session-Id` header, else `user:<user field>`, else none.
 * - A key's latest segment takes the request when the segment is open and the request
 *   CONTINUES it: its messages start with the previous main request's messages plus that
 *   request's reply (role and trimmed text compared), and add at least one message; a
 *   segment whose records moved to the archive while open is compared by the hash its stub
 *   keeps of those messages (./log-archive.ts). Otherwise (a new chat under the same `user`,
 *   an edited or regenerated history, a closed session) the key starts a new segment
 *   `capture:<key>#<n>`, so nothing recorded before is ever rewritten away.
 * - Without a key, the request joins the most recently active keyless open segment (seen
 *   within RECENT_MS) that it continues; otherwise it starts a new one with a generated key.
 * - Side requests (`X-Turn-Type: side`) never start or extend a conversation: they are kept
 *   with the segment they name or continue, or alone (`capture:side-…`, no turns) if none.
 *
 * A segment's conversation is its latest main request's messages followed by that request's
 * reply (when it came). Its samples follow as for any import (docs/design.md §Samples and next states): the last user or
 * tool message of a request is the next state of the reply before it.
 */
import crypto from 'node:crypto';
import type { ImportedConversation, ImportedTurn, Role } from '../../src-shared/types.js';
import { capturedToolCalls } from '../store/capture-exchanges.js';
import type { CaptureExchangeRow } from '../workspace/workspace.js';
import type { ArchivedContinuation, CapturedMessage, CaptureRecord, ReplyRecord, RequestRecord } from './capture-records.js';

/** How long a keyless session stays open to prefix matching after its last request. */
export const RECENT_MS = 6 * 60 * 60 * 1000;
const ID_PREFIX = 'capture:';

interface Segment {
  id: string;
  key: string;
  keyed: boolean;
  closed: boolean;
  lastSeenMs: number;
  nextSeq: number;
  /** Main requests in order, each with its reply once delivered (its rollout left out). */
  mains: { request: RequestRecord; reply: ReplyRecord | null }[];
  /** Its requests' ids (main and side), to let go of them when it leaves memory. */
  requestIds: string[];
  /** The archive files holding its records (./log-archive.ts), once archived. */
  archiveFiles: string[];
  /** Whether its archived records include a conversation (a main request). */
  archivedConversation: boolean;
  /** Archived while open, and no main request since: what a request must begin with to continue it. */
  continuation: ArchivedContinuation | null;
  /** When the messages of its last archived main request were first sent (ms), one a message. */
  archivedStamps: number[];
}

export interface Resolution {
  sessionId: string;
  seq: number;
}

function sameMessage(a: CapturedMessage, b: CapturedMessage): boolean {
  return a.role === b.role && a.content.trim() === b.content.trim();
}

function replyMessage(reply: ReplyRecord): CapturedMessage {
  return { role: 'assistant', content: reply.reply.content };
}

/** What a continuing request must start with: the last main request plus its reply. */
function transcript(seg: Segment): CapturedMessage[] {
  const last = seg.mains.at(-1);
  if (!last) return [];
  return last.reply ? [...last.request.messages, replyMessage(last.reply)] : last.request.messages;
}

function continues(seg: Segment, messages: CapturedMessage[]): boolean {
  const base = transcript(seg);
  return base.length > 0 && messages.length > base.length && base.every((m, i) => sameMessage(m, messages[i]!));
}

/** What `continues` compares of a transcript (roles and trimmed texts), as one hash: an archived session keeps it in its stub. */
export function transcriptHash(messages: readonly CapturedMessage[]): string {
  return crypto.createHash('sha256').update(JSON.stringify(messages.map((m) => [m.role, m.content.trim()]))).digest('hex');
}

/** Whether a new main request joins the segment: it continues it, or the segment has no conversation yet. */
function joins(seg: Segment, messages: CapturedMessage[]): boolean {
  const c = seg.continuation;
  if (c) return messages.length > c.messages && transcriptHash(messages.slice(0, c.messages)) === c.transcript;
  return seg.mains.length === 0 || continues(seg, messages);
}

/** When each message of the segment's last main request was first sent (ms). */
function stampsOf(seg: Segment): number[] {
  const n = seg.mains.at(-1)?.request.messages.length ?? 0;
  const stamps = seg.archivedStamps.slice(0, n);
  for (const { request } of seg.mains) for (let i = stamps.length; i < Math.min(request.messages.length, n); i++) stamps.push(request.at);
  return stamps;
}

function generatedKey(now: number): string {
  const stamp = new Date(now).toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return `live-${stamp}-${crypto.randomBytes(3).toString('hex')}`;
}

export class LiveSessions {
  private readonly segments = new Map<string, Segment>();
  /** key → its segments' ids, oldest first. */
  private readonly byKey = new Map<string, string[]>();
  private readonly requests = new Map<string, RequestRecord>();

  /** Folds one log record into the state (replay and live use this same path). */
  apply(record: CaptureRecord): void {
    if (record.t === 'request') {
      const seg = this.segmentFor(record.session);
      this.requests.set(record.id, record);
      seg.requestIds.push(record.id);
      seg.nextSeq = Math.max(seg.nextSeq, record.seq + 1);
      seg.lastSeenMs = Math.max(seg.lastSeenMs, record.at);
      if (record.kind === 'main') {
        seg.mains.push({ request: record, reply: null });
        seg.continuation = null; // continued: its transcript is in memory again
      }
    } else if (record.t === 'reply') {
      const seg = this.segmentFor(record.session);
      seg.lastSeenMs = Math.max(seg.lastSeenMs, record.at);
      const main = seg.mains.find((m) => m.request.id === record.id);
      // Without its rollout: the prompt's ids (as many as the conversation's tokens, each reply)
      // go to the database with exchangeRow, and held here for the process's life would make a
      // long local-model session's memory grow with the square of its length.
      if (main) main.reply = record.rollout ? { ...record, rollout: null } : record;
    } else if (record.t === 'close') {
      this.segmentFor(record.session).closed = true;
    } else if (record.t === 'archived') {
      // Its records are in the archive: memory keeps what resolving a request needs (its place
      // among its key's segments, its next sequence number, what continues it), not its conversation.
      const seg = this.segmentFor(record.session);
      if (record.open) {
        seg.continuation = record.open;
        seg.archivedStamps = record.open.stamps.flatMap(([at, n]) => Array<number>(n).fill(at));
      } else seg.closed = true;
      seg.nextSeq = Math.max(seg.nextSeq, record.nextSeq);
      seg.lastSeenMs = Math.max(seg.lastSeenMs, record.at);
      if (!seg.archiveFiles.includes(record.file)) seg.archiveFiles.push(record.file);
      seg.archivedConversation ||= record.conversation || seg.mains.length > 0;
      seg.mains = [];
      for (const id of seg.requestIds) this.requests.delete(id);
      seg.requestIds = [];
    }
  }

  /** The segment of a session id, created (as the log names it) when first seen. */
  private segmentFor(sessionId: string): Segment {
    let seg = this.segments.get(sessionId);
    if (!seg) {
      const rest = sessionId.startsWith(ID_PREFIX) ? sessionId.slice(ID_PREFIX.length) : sessionId;
      const key = rest.replace(/#\d+$/, '');
      seg = {
        id: sessionId, key, keyed: !key.startsWith('live-') && !key.startsWith('side-'), closed: false, lastSeenMs: 0, nextSeq: 0, mains: [], requestIds: [],
        archiveFiles: [], archivedConversation: false, continuation: null, archivedStamps: [],
      };
      this.segments.set(sessionId, seg);
      const list = this.byKey.get(key) ?? [];
      list.push(sessionId);
      this.byKey.set(key, list);
    }
    return seg;
  }

  /** Which session a new request joins, and its sequence number there (see the module comment). */
  resolve(key: string | null, messages: CapturedMessage[], kind: 'main' | 'side', now: number): Resolution {
    let seg: Segment | undefined;
    if (key !== null) {
      const ids = this.byKey.get(key);
      const latest = ids ? this.segments.get(ids.at(-1)!) : undefined;
      if (latest && (kind === 'side' || (!latest.closed && joins(latest, messages)))) seg = latest;
      else if (kind === 'main') seg = this.segmentFor(ids ? `${ID_PREFIX}${key}#${ids.length + 1}` : `${ID_PREFIX}${key}`);
    } else {
      const candidates = [...this.segments.values()].filter((s) => !s.keyed && !s.closed && now - s.lastSeenMs <= RECENT_MS && continues(s, messages));
      seg = candidates.sort((a, b) => b.lastSeenMs - a.lastSeenMs)[0];
      if (!seg && kind === 'main') seg = this.segmentFor(`${ID_PREFIX}${generatedKey(now)}`);
    }
    if (!seg) seg = this.segmentFor(`${ID_PREFIX}side-${generatedKey(now).slice(5)}`);
    const seq = seg.nextSeq++;
    seg.lastSeenMs = Math.max(seg.lastSeenMs, now);
    return { sessionId: seg.id, seq };
  }

  has(sessionId: string): boolean {
    return this.segments.has(sessionId);
  }

  isClosed(sessionId: string): boolean {
    return this.segments.get(sessionId)?.closed ?? false;
  }

  /** Session ids that have a conversation in memory (at least one main request; archived ones have none). */
  conversationIds(): string[] {
    return [...this.segments.values()].filter((s) => s.mains.length > 0).map((s) => s.id);
  }

  /** The conversations in memory, as an importer would hand them to the store (archived ones are not). */
  conversations(): ImportedConversation[] {
    return this.conversationIds().map((id) => this.conversation(id)!);
  }

  /** The database rows of the delivered replies among `records` (applied first). */
  exchangeRows(records: readonly CaptureRecord[]): CaptureExchangeRow[] {
    return records.flatMap((r) => (r.t === 'reply' ? (this.exchangeRow(r) ?? []) : []));
  }

  /** Conversations recorded, the archived ones included. */
  get conversationCount(): number {
    return [...this.segments.values()].filter((s) => s.mains.length > 0 || s.archivedConversation).length;
  }

  get sessionCount(): number {
    return this.segments.size;
  }

  /**
   * Sessions whose records may move to the archive (docs/design.md §Capture log rotation), those
   * idle for RECENT_MS, each with what continuing it needs when a request may still join it
   * (its key's open latest segment; a keyless one is continued only within RECENT_MS), else
   * undefined. Archived ones stay settled: records logged for them since (feedback, a side
   * request) move too.
   */
  settled(now: number): Map<string, ArchivedContinuation | undefined> {
    const settled = new Map<string, ArchivedContinuation | undefined>();
    for (const seg of this.segments.values()) {
      if (now - seg.lastSeenMs <= RECENT_MS) continue;
      const open = !seg.closed && seg.keyed && this.byKey.get(seg.key)?.at(-1) === seg.id;
      settled.set(seg.id, open ? (seg.continuation ?? this.continuationOf(seg)) : undefined);
    }
    return settled;
  }

  private continuationOf(seg: Segment): ArchivedContinuation {
    const messages = transcript(seg);
    const stamps: [number, number][] = [];
    for (const at of stampsOf(seg)) {
      const run = stamps.at(-1);
      if (run?.[0] === at) run[1]++;
      else stamps.push([at, 1]);
    }
    return { messages: messages.length, transcript: transcriptHash(messages), stamps };
  }

  /** Archived sessions: the archive files that hold each one's records, and whether they include a conversation. */
  archived(): { id: string; files: readonly string[]; conversation: boolean }[] {
    return [...this.segments.values()].filter((s) => s.archiveFiles.length > 0).map((s) => ({ id: s.id, files: s.archiveFiles, conversation: s.archivedConversation }));
  }

  get openCount(): number {
    return [...this.segments.values()].filter((s) => !s.closed && s.mains.length > 0).length;
  }

  /** The conversation a session stands for, as an importer would hand it to the store. */
  conversation(sessionId: string): ImportedConversation | null {
    const seg = this.segments.get(sessionId);
    const last = seg?.mains.at(-1);
    if (!seg || !last) return null;
    const messages = last.request.messages;
    // Each message is stamped with the time of the first request that carried it.
    const stamps = stampsOf(seg);
    const turns: ImportedTurn[] = messages.map((m, i) => turnOf(m, (stamps[i] ?? last.request.at) / 1000));
    if (last.reply) {
      const r = last.reply.reply;
      turns.push({
        role: 'assistant',
        text: r.content,
        ...(r.reasoning ? { reasoning: r.reasoning } : {}),
        ...(r.toolCalls.length ? { toolCalls: capturedToolCalls(r.toolCalls) } : {}),
        timestamp: last.reply.at / 1000,
      });
    }
    const firstUser = messages.find((m) => m.role === 'user')?.content.trim().split('\n')[0] ?? '';
    return {
      externalId: seg.id.slice(ID_PREFIX.length),
      title: firstUser ? firstUser.slice(0, 80) : 'Live session',
      createdAt: seg.mains[0]!.request.at / 1000,
      turns,
      alternatives: [],
      // The tools of its latest request: what the model saw when it wrote the latest reply; and
      // where an earlier reply was written with another list, that one by its turn.
      metadata: { capture: { key: seg.key, keyed: seg.keyed }, ...(last.request.tools?.length ? { tools: last.request.tools } : {}), ...toolsByTurn(seg) },
      warnings: [],
    };
  }

  /** The database row of a delivered reply. */
  exchangeRow(reply: ReplyRecord): CaptureExchangeRow | null {
    const request = this.requests.get(reply.id);
    if (!request) return null;
    return {
      id: reply.id,
      sessionId: reply.session,
      seq: request.seq,
      kind: request.kind,
      at: reply.at / 1000,
      replyTurn: request.kind === 'main' ? request.messages.length : null,
      messages: request.messages,
      reply: reply.reply,
      servedBy: reply.servedBy,
      model: reply.model,
      modelDir: reply.modelDir,
      rollout: reply.rollout,
      completionId: reply.completionId ?? null,
    };
  }

  /** Forgets a session entirely (per-session delete). */
  forget(sessionId: string): void {
    const seg = this.segments.get(sessionId);
    if (!seg) return;
    this.segments.delete(sessionId);
    for (const id of seg.requestIds) this.requests.delete(id);
    // Keep the key's numbering: a later segment of the same key must not reuse this id.
  }
}

const ROLES = new Set<Role>(['system', 'user', 'assistant', 'tool']);

function turnOf(m: CapturedMessage, at: number): ImportedTurn {
  const role = (ROLES.has(m.role as Role) ? m.role : 'user') as Role;
  return {
    role,
    text: m.content,
    ...(m.tool_calls?.length ? { toolCalls: capturedToolCalls(m.tool_calls) } : {}),
    ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}),
    ...(role === 'tool' && m.name ? { toolName: m.name } : {}),
    timestamp: at,
  };
}

/**
 * The tools offered with each of a session's replies that its latest request does not offer
 * (SessionRecord.toolsByTurn), by the reply's turn (its request's message count): an agent that
 * changed its tool list mid-session. Only the main requests still in memory say it (an archived
 * part of a session keeps the latest list).
 */
function toolsByTurn(seg: Segment): { toolsByTurn?: Record<string, unknown[]> } {
  const latest = toolsText(seg.mains.at(-1)?.request.tools);
  const byTurn: Record<string, unknown[]> = {};
  for (const { request, reply } of seg.mains) {
    if (reply && toolsText(request.tools) !== latest) byTurn[String(request.messages.length)] = request.tools ?? [];
  }
  return Object.keys(byTurn).length ? { toolsByTurn: byTurn } : {};
}

/**
 * A request's tools as JSON text, made once a list: every request of a session compares all its
 * earlier requests' lists with the latest's (toolsByTurn), and an agent's list can run to tens of KB.
 */
const toolsTexts = new WeakMap<readonly unknown[], string>();
function toolsText(tools: readonly unknown[] | undefined): string {
  if (!tools) return '[]';
  let text = toolsTexts.get(tools);
  if (text === undefined) toolsTexts.set(tools, (text = JSON.stringify(tools)));
  return text;
}
