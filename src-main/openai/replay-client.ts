// The replay client of the OpenClaw-RL hand-off (docs/design.md §Hand-off): drives recorded
// sessions (src-main/export/replay-plan.ts) through an OpenAI-compatible server turn by turn.
// The server writes its own replies; the next request carries them as the history, followed
// by the user's real next message, so each of its replies gets the recorded next state.
//
// Headers: X-Session-Id (the session's id), X-Turn-Type (main|side), X-Session-Done on the
// session's last request. Sessions run `concurrency` at a time, requests at least `paceMs`
// apart. A session's own requests are strictly sequential.
//
// Resume: the progress file (JSONL, one fsynced line per event) records `sent` before a
// request goes out and `done` with the server's reply after. A new run skips what is done and
// rebuilds each history from the recorded replies. A request that was sent but never
// answered (the process was killed meanwhile) is NEVER sent again: the server may have
// taken it, and without its reply the session cannot continue on-policy, so that session is
// counted abandoned. A failed request (an HTTP error) ends its session the same way.
import fs from 'node:fs';
import { PRIVATE_FILE_MODE } from '../store/atomic-file.js';
import { appendLineSync } from '../store/jsonl-file.js';
import type { ChatMessage } from '../pipeline/chat-messages.js';
import type { ReplaySession } from '../export/replay-plan.js';

export interface ReplayCounts {
  sent: number;
  total: number;
  sessionsDone: number;
  sessions: number;
  abandoned: number;
}

export interface ReplayClientOptions {
  endpoint: string;
  apiKey?: string;
  model?: string;
  maxTokens?: number;
  concurrency: number;
  paceMs: number;
  progressFile: string;
  onProgress?: (counts: ReplayCounts) => void;
  /** Aborting stops new requests; those in flight finish and are recorded. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ReplaySummary extends ReplayCounts {
  stopped: boolean;
  failures: { sessionId: string; index: number; error: string }[];
}

type ProgressLine =
  | { t: 'sent'; session: string; index: number }
  | { t: 'done'; session: string; index: number; reply: ChatMessage }
  | { t: 'failed'; session: string; index: number; error: string };

interface SessionState {
  done: Map<number, ChatMessage>;
  inFlight: boolean;
  failed: boolean;
}

export function readProgress(file: string): Map<string, SessionState> {
  const states = new Map<string, SessionState>();
  if (!fs.existsSync(file)) return states;
  const state = (id: string) => states.get(id) ?? states.set(id, { done: new Map(), inFlight: false, failed: false }).get(id)!;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let rec: ProgressLine;
    try {
      rec = JSON.parse(line);
    } catch {
      continue; // a line cut short by a kill: the request it began is treated as in flight below
    }
    const s = state(rec.session);
    if (rec.t === 'sent') s.inFlight = true;
    else if (rec.t === 'done') (s.done.set(rec.index, rec.reply), (s.inFlight = false));
    else if (rec.t === 'failed') s.failed = true;
  }
  return states;
}

class ProgressLog {
  private readonly fd: number;
  constructor(file: string) {
    this.fd = fs.openSync(file, 'a', PRIVATE_FILE_MODE); // it holds the replies: chat text
  }
  append(line: ProgressLine): void {
    appendLineSync(this.fd, JSON.stringify(line) + '\n');
  }
  close(): void {
    fs.closeSync(this.fd);
  }
}

/** The conversation a session's next request starts with: main requests so far, each with the server's reply. */
function historyOf(session: ReplaySession, done: Map<number, ChatMessage>, upTo: number): ChatMessage[] {
  const history: ChatMessage[] = [];
  for (const req of session.requests.slice(0, upTo)) {
    if (req.turnType === 'side') continue;
    history.push(...req.messages, done.get(req.index)!);
  }
  return history;
}

function replyMessage(body: any): ChatMessage {
  const message = body?.choices?.[0]?.message;
  if (!message || typeof message !== 'object') throw new Error('the answer has no choices[0].message');
  const reply: ChatMessage = { role: 'assistant', content: typeof message.content === 'string' ? message.content : '' };
  if (Array.isArray(message.tool_calls) && message.tool_calls.length) reply.tool_calls = message.tool_calls;
  return reply;
}

export async function runReplay(plan: ReplaySession[], options: ReplayClientOptions): Promise<ReplaySummary> {
  const states = readProgress(options.progressFile);
  const log = new ProgressLog(options.progressFile);
  const counts: ReplayCounts = { sent: 0, total: 0, sessionsDone: 0, sessions: plan.length, abandoned: 0 };
  const failures: ReplaySummary['failures'] = [];
  const queue: ReplaySession[] = [];
  for (const session of plan) {
    const st = states.get(session.sessionId);
    counts.total += session.requests.length;
    counts.sent += st?.done.size ?? 0;
    if (st && (st.inFlight || st.failed)) counts.abandoned++;
    else if ((st?.done.size ?? 0) >= session.requests.length) counts.sessionsDone++;
    else queue.push(session);
  }
  options.onProgress?.({ ...counts });
  let nextSlot = 0;
  const pace = async () => {
    const now = Date.now();
    const at = Math.max(now, nextSlot);
    nextSlot = at + options.paceMs;
    if (at > now) await new Promise((r) => setTimeout(r, at - now));
  };
  const url = `${options.endpoint.replace(/\/+$/, '')}/chat/completions`;

  const send = async (session: ReplaySession, index: number, done: Map<number, ChatMessage>): Promise<ChatMessage> => {
    const req = session.requests[index]!;
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-Session-Id': session.sessionId, 'X-Turn-Type': req.turnType };
    if (req.last) headers['X-Session-Done'] = 'true';
    if (options.apiKey) headers.Authorization = `Bearer ${options.apiKey}`;
    const body = { ...(options.model ? { model: options.model } : {}), ...(options.maxTokens ? { max_tokens: options.maxTokens } : {}), messages: [...historyOf(session, done, index), ...req.messages], stream: false };
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(options.timeoutMs ?? 600_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
    return replyMessage(JSON.parse(text));
  };

  const replaySession = async (session: ReplaySession) => {
    const done = states.get(session.sessionId)?.done ?? new Map<number, ChatMessage>();
    for (const req of session.requests) {
      if (done.has(req.index)) continue;
      if (options.signal?.aborted) return;
      await pace();
      if (options.signal?.aborted) return;
      log.append({ t: 'sent', session: session.sessionId, index: req.index });
      try {
        const reply = await send(session, req.index, done);
        done.set(req.index, reply);
        log.append({ t: 'done', session: session.sessionId, index: req.index, reply });
        counts.sent++;
      } catch (err) {
        const error = (err as Error).message;
        log.append({ t: 'failed', session: session.sessionId, index: req.index, error });
        failures.push({ sessionId: session.sessionId, index: req.index, error });
        counts.abandoned++;
        options.onProgress?.({ ...counts });
        return;
      }
      options.onProgress?.({ ...counts });
    }
    counts.sessionsDone++;
    options.onProgress?.({ ...counts });
  };

  const worker = async () => {
    for (let s = queue.shift(); s; s = queue.shift()) await replaySession(s);
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, worker));
  } finally {
    log.close();
  }
  return { ...counts, stopped: !!options.signal?.aborted, failures };
}
