/**
 * Live capture as a service of `hindsight serve`: point any OpenAI-compatible chat client at
 * Hindsight's /v1 and its conversations become samples as they happen (issue 7).
 *
 *   client ──/v1/chat/completions──▶ endpoint (local model, or forwarded upstream)
 *                                      │ begin: request record (fsync) → session resolved,
 *                                      │        previous reply gets its next state → sample
 *                                      │ commit: reply record (fsync) → then the response ends
 *                                      ▼
 *                          capture log (JSONL, source of truth) ──replay──▶ database
 *                                      │
 *                          background loop: judge → train every N → hot-swap the adapter
 *
 * - Off until the user turns it on (Settings, or `serve --capture`). Proxying to an upstream
 *   works with capture off too; nothing is recorded then.
 * - The log lives beside the database under its name (`<db>.capture-log.jsonl`; a folder's
 *   shared `capture-log.jsonl` from earlier versions is adopted by the database it came from,
 *   ./capture-log.ts). On start (and when the app switches databases) it is replayed into
 *   that database: exchanges by id, sessions by content, so replaying twice changes nothing;
 *   captured sessions the log no longer has (deleted) are removed, unless the log was only
 *   just created (then the database is all there is of them, and they stay). The served
 *   adapter and the loop's queue come back from it too.
 * - The loop's adapters go to `<db>.capture-adapters/<run>/`, the database's own folder; the log
 *   names each by its full path, so those an earlier version wrote to the folder-wide
 *   `capture-adapters/` are still served from there.
 * - Per-session delete compacts the log (the session's records are rewritten away), then
 *   deletes from the database: the log is rewritten first, so a crash in between is healed
 *   by the next replay.
 * - Rotation (./log-archive.ts): once the log passes `rotateAtBytes`, at open or as it grows,
 *   settled sessions' records move to `<db>.capture-archive/`, a stub each left in the log. The
 *   replay reads the archive only for archived sessions the database lacks (it was lost).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import { UserError, type ImportedConversation } from '../../src-shared/types.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import type { CaptureStatus } from '../../src-shared/contract.js';
import type { CapturedReplyAt, CapturedReplyRef, CaptureExchangeRow } from '../workspace/workspace.js';
import type { EventHub } from '../workspace/event-hub.js';
import type { SettingsStore } from '../store/settings-file.js';
import type { CapturedReplyIn, CaptureHook, CaptureTicket } from '../openai/capture-hook.js';
import { RequestError, type ChatRequest } from '../openai/protocol.js';
import type { UpstreamTarget } from '../openai/upstream.js';
import { adoptFolderCaptureLog, CaptureLog, captureLogPathFor } from './capture-log.js';
import { apiKeyPathFor, captureAdaptersPathFor } from '../store/db-companions.js';
import { CaptureKeys } from './capture-key.js';
import { CaptureLoop, untrainedSamples, countWithSignal } from './capture-loop.js';
import { recordSession, type CapturedMessage, type CaptureRecord, type FeedbackRecord, type ReplyRecord, type RequestRecord } from './capture-records.js';
import { applyFeedback, feedbackTarget, foldFeedback, parseFeedback } from './feedback.js';
import { LiveSessions } from './capture-sessions.js';
import { CaptureArchive } from './log-archive.js';
import { queueRotationIfDue, recoverArchived, ROTATE_AT_BYTES, rotateIfDue, type ArchivingState } from './log-rotation.js';

/** What capture needs of the open workspace: the data facade, and mirroring the capture log into it. */
export interface CaptureWorkspace extends WorkspaceApi {
  /** Stores exchanges and captured conversations; returns the samples each session gained. */
  applyCapture(exchanges: readonly CaptureExchangeRow[], conversations: readonly ImportedConversation[], logPath: string): Map<string, number[]>;
  captureCounts(): { exchanges: number; pendingJudge: number; sessionIds: string[] };
  findCapturedReply(ref: CapturedReplyRef): CapturedReplyAt | undefined;
}

export interface CaptureServiceOptions {
  workspace(): CaptureWorkspace;
  settings(): SettingsStore;
  events: EventHub;
  /** The model folder the endpoint serves. */
  modelDir(): string;
  /** The adapter to serve while the loop has trained none (`serve --adapter`), or null. */
  baseAdapter(): string | null;
  /** The endpoint's base URL, for the status (known once the server listens). */
  endpoint(): string | null;
  log(line: string): void;
  /** `serve --upstream`: forward there for this launch, whatever Settings say. */
  launchUpstream?: UpstreamTarget | null;
  /** The capture log's size at which settled sessions move to its archive (default ROTATE_AT_BYTES). */
  rotateAtBytes?: number;
}

interface DbState extends ArchivingState {
  dbPath: string;
  /** Adapters the loop swapped in, oldest first; the last is served. */
  adapters: string[];
  trained: Set<string>;
  deleted: Set<string>;
}

const MAX_SESSION_ID = 200;

function headerValue(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function toCaptured(request: ChatRequest): CapturedMessage[] {
  return request.messages.map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' ? m.content : '',
    ...(Array.isArray(m.tool_calls) && m.tool_calls.length ? { tool_calls: m.tool_calls as unknown[] } : {}),
    ...(typeof m.tool_call_id === 'string' ? { tool_call_id: m.tool_call_id } : {}),
    ...(typeof m.name === 'string' ? { name: m.name } : {}),
  }));
}

export class CaptureService {
  private state: DbState | null = null;
  private preloadFn: ((modelDir: string, adapterDir: string | null) => Promise<void>) | null = null;
  readonly loop: CaptureLoop;
  /** The API key of capture clients: the open database's `<db>.api-key` (./capture-key.ts). */
  readonly keys = new CaptureKeys(() => apiKeyPathFor(this.options.workspace().dbPath));
  readonly hook: CaptureHook = { begin: (headers, body, request, options) => this.begin(headers, body, request, options?.defer ?? false) };

  constructor(private readonly options: CaptureServiceOptions) {
    this.loop = new CaptureLoop({
      workspace: () => this.options.workspace(),
      settings: () => this.options.settings(),
      modelDir: () => this.options.modelDir(),
      servedAdapter: () => this.activeAdapter(),
      trainedKeys: () => this.ensure().trained,
      adapterRoot: () => captureAdaptersPathFor(this.ensure().dbPath),
      recordTrained: (runId, keys, adapterDir) => {
        const st = this.ensure();
        this.append(st, { v: 1, t: 'trained', at: Date.now(), runId, samples: keys, adapterDir });
        for (const k of keys) st.trained.add(k);
      },
      swapTo: (dir) => this.swapTo(dir, 'trained'),
      onState: () => this.emitStatus(),
      log: (line) => this.options.log(line),
    });
  }

  /** The endpoint's preload (set once the handler exists): a swap loads before it serves. */
  attachPreload(fn: (modelDir: string, adapterDir: string | null) => Promise<void>): void {
    this.preloadFn = fn;
  }

  /** Opens the log of the current database and replays it (again when the database changed). */
  ensure(): DbState {
    const ws = this.workspace();
    if (this.state?.dbPath === ws.dbPath) return this.state;
    this.state?.log.close();
    const logPath = captureLogPathFor(ws.dbPath);
    if (adoptFolderCaptureLog(ws.dbPath, ws.captureCounts().sessionIds)) this.options.log(`capture: the folder's capture log is now this database's: ${logPath}`);
    const created = !fs.existsSync(logPath);
    const log = CaptureLog.open(logPath);
    const rotateAtLeast = this.options.rotateAtBytes ?? ROTATE_AT_BYTES;
    const st: DbState = {
      dbPath: ws.dbPath, log, archive: CaptureArchive.forDatabase(ws.dbPath), rotateAt: rotateAtLeast, rotateAtLeast, rotationQueued: false,
      sessions: new LiveSessions(), adapters: [], trained: new Set(), deleted: new Set(), pendingFeedback: [],
    };
    this.state = st;
    this.replay(st, ws, created);
    rotateIfDue(st, Date.now(), (line) => this.options.log(line));
    this.loop.kick();
    return st;
  }

  private workspace(): CaptureWorkspace {
    return this.options.workspace();
  }

  private replay(st: DbState, ws: CaptureWorkspace, logCreated: boolean): void {
    const { records, skipped } = st.log.read();
    for (const line of skipped) this.options.log(`capture log: skipped ${line}`);
    for (const r of records) {
      st.sessions.apply(r);
      if (r.t === 'feedback') st.pendingFeedback.push(r);
      if (r.t === 'trained') for (const k of r.samples) st.trained.add(k);
      if (r.t === 'adapter') {
        if (r.reason === 'trained' && r.dir) st.adapters.push(r.dir);
        else st.adapters.pop();
      }
    }
    const swept = st.archive.sweep(new Set(st.sessions.archived().flatMap((a) => a.files)));
    if (swept.length) this.options.log(`capture: removed ${swept.length} archive files no log line names (a rotation cut short): ${swept.join(', ')}`);
    // The archive before the log: a session archived while open and continued since has its
    // first exchanges there and the later ones here, and a database that lost it needs both.
    recoverArchived(st, ws, (line) => this.options.log(line));
    ws.applyCapture(st.sessions.exchangeRows(records), st.sessions.conversations(), st.log.filePath);
    // The log is the truth: captured sessions it no longer has were deleted. A log created just
    // now never had them (e.g. a neighbour adopted the folder's old shared log): they stay.
    const missing = ws.captureCounts().sessionIds.filter((id) => !st.sessions.has(id));
    if (logCreated && missing.length) this.options.log(`capture: ${missing.length} captured sessions of this database are not in its new log ${st.log.filePath}; kept`);
    else for (const id of missing) ws.deleteSession(id);
    this.applyPendingFeedback(st, ws);
    ws.flush();
    if (records.length) this.options.events.emit('workspace.changed', { reason: 'capture' });
  }

  private append(st: DbState, record: CaptureRecord): void {
    st.sessions.apply(st.log.append(record)); // the logged record shares its messages with the session's last request
    queueRotationIfDue(st, () => this.state === st, (line) => this.options.log(line));
  }

  enabled(): boolean {
    return this.options.settings().raw.captureEnabled;
  }

  /** Proxy mode's target, or null when the local model answers. */
  upstream(): UpstreamTarget | null {
    if (this.options.launchUpstream) return this.options.launchUpstream;
    const s = this.options.settings().raw;
    const baseUrl = s.captureUpstreamUrl.trim();
    if (!baseUrl) return null;
    return { baseUrl, ...(s.captureUpstreamModel.trim() ? { model: s.captureUpstreamModel.trim() } : {}), ...(s.captureUpstreamApiKey ? { apiKey: s.captureUpstreamApiKey } : {}) };
  }

  /** The adapter the endpoint serves: the loop's latest, else `serve --adapter`'s, else none. */
  activeAdapter(): string | null {
    const st = this.state;
    return st?.adapters.at(-1) ?? this.options.baseAdapter();
  }

  private begin(headers: http.IncomingHttpHeaders, body: Record<string, unknown>, request: ChatRequest, defer: boolean): CaptureTicket | null {
    if (!this.enabled()) return null;
    const turnType = (headerValue(headers, 'x-turn-type') ?? 'main').trim().toLowerCase();
    if (turnType !== 'main' && turnType !== 'side') throw new RequestError(`X-Turn-Type must be main or side (got '${turnType}')`, null, 400);
    const explicit = headerValue(headers, 'x-session-id')?.trim();
    if (explicit !== undefined && (explicit === '' || explicit.length > MAX_SESSION_ID)) {
      throw new RequestError(`X-Session-Id must be 1 to ${MAX_SESSION_ID} characters`, null, 400);
    }
    const user = typeof body.user === 'string' && body.user.trim() ? `user:${body.user.trim().slice(0, MAX_SESSION_ID)}` : null;
    const doneHeader = headerValue(headers, 'x-session-done');
    const done = doneHeader !== undefined && !['0', 'false', 'no'].includes(doneHeader.trim().toLowerCase());
    const kind = turnType as 'main' | 'side';
    const messages = toCaptured(request);
    let started: { st: DbState; ws: CaptureWorkspace; record: RequestRecord; sessionId: string } | null = null;
    const start = () => {
      if (started) return started;
      const st = this.ensure();
      const ws = this.workspace();
      const now = Date.now();
      const { sessionId, seq } = st.sessions.resolve(explicit ?? user, messages, kind, now);
      const record: RequestRecord = { v: 1, t: 'request', id: crypto.randomUUID(), session: sessionId, seq, kind, at: now, messages, ...(request.tools?.length ? { tools: request.tools } : {}) };
      this.append(st, record);
      if (kind === 'main') this.applyToDb(st, ws, [], sessionId);
      return (started = { st, ws, record, sessionId });
    };
    if (!defer) start();
    return {
      start: () => void start(),
      commit: (reply: CapturedReplyIn) => {
        const { st, ws, record, sessionId } = start();
        if (st.deleted.has(sessionId) || this.state !== st) return; // deleted (or database switched) meanwhile
        const { servedBy, model, modelDir, rollout, completionId, ...text } = reply;
        const replyRecord: ReplyRecord = { v: 1, t: 'reply', id: record.id, session: sessionId, at: Date.now(), reply: text, servedBy, model, modelDir, rollout, completionId };
        this.append(st, replyRecord); // fsync: from here on the exchange survives a crash
        if (done) this.append(st, { v: 1, t: 'close', session: sessionId, at: Date.now() });
        const row = st.sessions.exchangeRow(replyRecord);
        this.applyToDb(st, ws, row ? [row] : [], kind === 'main' ? sessionId : null);
      },
    };
  }

  /** Mirrors the log into the database; a failure here is logged, never the client's problem (replay heals it). */
  private applyToDb(st: DbState, ws: CaptureWorkspace, rows: readonly CaptureExchangeRow[], sessionId: string | null): void {
    try {
      const conv = sessionId ? st.sessions.conversation(sessionId) : null;
      const fresh = ws.applyCapture(rows, conv ? [conv] : [], st.log.filePath);
      for (const [id, responseTurns] of fresh) this.options.events.emit('capture.sample', { sessionId: id, responseTurns });
      if (fresh.size) this.applyPendingFeedback(st, ws);
      this.options.events.emit('workspace.changed', { reason: 'capture' });
      if (fresh.size) this.loop.kick();
    } catch (err) {
      this.options.log(`capture: could not update the database (the log has it; the next start replays it): ${(err as Error).message}`);
    }
  }

  /**
   * `POST /v1/feedback` (./feedback.ts): logged first (fsync), then a manual label on the reply,
   * at once when it is a sample (200), else as soon as the next message makes it one (202).
   */
  feedback(body: unknown): { status: number; body: object } {
    const request = parseFeedback(body);
    const st = this.ensure();
    const ws = this.workspace();
    const target = feedbackTarget(ws, request.ref);
    const record: FeedbackRecord = {
      v: 1, t: 'feedback', at: Date.now(), session: target.sessionId, exchange: target.id, turn: target.replyTurn, reward: request.reward,
      ...(request.hint !== undefined ? { hint: request.hint } : {}),
    };
    this.append(st, record);
    const outcome = applyFeedback(ws, record);
    if (outcome.status === 'pending') st.pendingFeedback.push(record);
    else this.options.events.emit('workspace.changed', { reason: 'label' });
    const reply = { id: target.completionId, session: target.sessionId, turn: target.replyTurn, reward: request.reward };
    return outcome.status === 'applied' ? { status: 200, body: { ...reply, status: 'applied', label: outcome.label } } : { status: 202, body: { ...reply, status: 'pending', label: null } };
  }

  /** Applies the waiting feedback whose replies have become samples. */
  private applyPendingFeedback(st: DbState, ws: CaptureWorkspace): void {
    if (!st.pendingFeedback.length) return;
    const waiting = foldFeedback(st.pendingFeedback); // the acknowledged order, not one by one (./feedback.ts)
    st.pendingFeedback = waiting.filter((f) => applyFeedback(ws, f).status === 'pending');
    if (st.pendingFeedback.length < waiting.length) this.options.events.emit('workspace.changed', { reason: 'label' });
  }

  /** Deletes a session everywhere; a captured one first leaves the log (compaction). */
  deleteSession(id: string): { deleted: boolean } {
    return { deleted: this.deleteSessions([id]).deleted > 0 };
  }

  /** Deletes sessions everywhere: the captured ones leave the log in one compaction, then the database's rows go in one transaction. */
  deleteSessions(ids: readonly string[]): { deleted: number } {
    const ws = this.workspace();
    const st = this.ensure();
    const inLog = new Set(ids.filter((id) => st.sessions.has(id)));
    if (inLog.size) {
      // The archive first, then the log's stubs: a crash between leaves a stub whose records are gone, which deleting again clears.
      const files = new Set(st.sessions.archived().filter((a) => inLog.has(a.id)).flatMap((a) => a.files));
      for (const file of files) st.archive.removeSessions(file, inLog);
      st.log.compact((r) => !inLog.has(recordSession(r) as string));
      for (const id of inLog) {
        st.sessions.forget(id);
        st.deleted.add(id);
      }
      st.pendingFeedback = st.pendingFeedback.filter((f) => !inLog.has(f.session));
    }
    const inDb = ws.deleteSessions(ids);
    this.options.events.emit('workspace.changed', { reason: 'delete' });
    return { deleted: Math.max(inDb, inLog.size) };
  }

  private async swapTo(dir: string | null, reason: 'trained' | 'rollback'): Promise<void> {
    const st = this.ensure();
    // Load first: until the new model is ready, requests keep getting the current one.
    await this.preloadFn?.(this.options.modelDir(), dir ?? this.options.baseAdapter());
    this.append(st, { v: 1, t: 'adapter', at: Date.now(), dir, reason });
    if (reason === 'trained' && dir) st.adapters.push(dir);
    else st.adapters.pop();
    this.options.log(`capture: now serving ${this.activeAdapter() ?? 'the base model'}`);
    this.emitStatus();
  }

  /** Serves the adapter before the current one again. */
  async rollback(): Promise<CaptureStatus> {
    const st = this.ensure();
    if (st.adapters.length === 0) throw new UserError('There is no earlier adapter to roll back to: the background loop has not swapped one in.');
    const previous = st.adapters.at(-2) ?? null;
    if (previous && !fs.existsSync(previous)) throw new UserError(`The previous adapter folder ${previous} is gone; cannot roll back to it.`);
    await this.swapTo(previous, 'rollback');
    return this.status();
  }

  status(): CaptureStatus {
    const s = this.options.settings().raw;
    const st = this.ensure();
    const ws = this.workspace();
    const counts = ws.captureCounts();
    const loopOn = s.captureAutoJudge || s.captureAutoTrain;
    return {
      available: true,
      reason: null,
      enabled: s.captureEnabled,
      logPath: st.log.filePath,
      adaptersDir: captureAdaptersPathFor(st.dbPath),
      endpoint: this.options.endpoint(),
      upstream: this.upstream()?.baseUrl ?? null,
      sessions: st.sessions.conversationCount,
      openSessions: st.sessions.openCount,
      exchanges: counts.exchanges,
      pendingJudge: counts.pendingJudge,
      pendingTrain: countWithSignal(untrainedSamples(ws, this.options.modelDir(), st.trained, s.captureTrainMethod)),
      loop: {
        autoJudge: s.captureAutoJudge,
        autoTrain: s.captureAutoTrain,
        trainEvery: s.captureTrainEvery,
        state: !loopOn && this.loop.state === 'idle' ? 'off' : this.loop.state,
        lastError: this.loop.lastError,
        lastRun: this.loop.lastRun,
      },
      adapter: { active: this.activeAdapter(), previous: st.adapters.length ? (st.adapters.at(-2) ?? this.options.baseAdapter()) : null, history: [...st.adapters] },
    };
  }

  /** Settings changed: the loop may have been switched on, the status shown changed. */
  settingsChanged(): void {
    this.loop.kick();
    this.emitStatus();
  }

  private emitStatus(): void {
    try {
      this.options.events.emit('capture.status', this.status());
    } catch (err) {
      this.options.log(`capture: status unavailable: ${(err as Error).message}`);
    }
  }

  async close(): Promise<void> {
    await this.loop.close();
    this.state?.log.close();
    this.state = null;
  }
}
