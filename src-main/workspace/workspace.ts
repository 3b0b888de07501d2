// The workspace: one Hindsight database and everything done to it — import, samples,
// labels, judge verdicts, checks, exports and the training set. The CLI, the app's API
// service and `serve` all go through this class (contract: src-shared/views.ts). It
// orchestrates only: SQL lives in src-main/store/, classification in src-main/pipeline/,
// judging in src-main/judge/ (runner.ts runs a judge against this class), and the export
// formats in src-main/export/.
//
// Persistence: label edits mark the store dirty and are saved, coalesced, a moment later;
// imports, judge runs and context-window changes save at once when they finish. Every
// save is atomic (store/atomic-file.ts). An import runs in one SQL transaction: if any
// input fails, everything it did is rolled back and the database file is not touched.
import { UserError, type ImportedConversation, type SourceFormat } from '../../src-shared/types.js';
import type {
  CheckReport, ContextWindowSetting, ExportFormat, ImportSummary, JudgeCandidate, LabelPatch, LabelView, ReviewItem,
  SampleView, SessionDetail, SessionFilter, SessionSplit, SessionSummary, SplitView, Stats, TrainingSample, VerdictProvenance,
} from '../../src-shared/views.js';
import type { WorkspaceApi } from './workspace-api.js';
import type { JudgeVerdict } from '../judge/verdicts.js';
import { exportCounts as countExportLines, exportToFile, previewLines } from '../export/database-export.js';
import type { ExportCounts, ExportFilter } from '../../src-shared/export-api.js';
import { replayPlan } from '../export/replay-plan.js';
import type { ReplayPlan, TrlHandoffOptions, TrlHandoffResult } from '../../src-shared/handoff.js';
import { writeTrlHandoff } from './handoff-trl.js';
import { analyseSession } from '../pipeline/classify.js';
import {
  findCapturedReply, readCaptureCounts, readCaptureExchanges, type CapturedReplyAt, type CapturedReplyRef, type CaptureExchangeRow,
} from '../store/capture-exchanges.js';
import { readContextWindow, writeContextWindow } from '../store/context-window-setting.js';
import { DEFAULT_PERSIST, Store, type Params, type PersistOptions, type StoreAccess } from '../store/database.js';
import { listSessionSummaries, readStats } from '../store/overview-reads.js';
import { rebuildAllSamples, samplesNeedRebuild } from '../store/session-writes.js';
import { clearFreePagesOnce } from '../store/free-pages.js';
import { applyCapture } from './capture-writes.js';
import { defaultOpenExport, importOneOpened, importPaths, type ImportOptions, type OpenedExportLike, type OpenExportFn } from './import-into-store.js';
import { judgeCandidates, recordVerdict, setManualLabel } from './label-edits.js';
import { deleteSessions, labelSessions } from './bulk-edits.js';
import type { BulkLabelResult } from '../../src-shared/sessions-api.js';
import { reviewQueue } from './review-queue.js';
import { sampleViews, sessionDetail } from './session-views.js';
import { checkReport, evaluationSamples, lessonHints, nothingToTrain, trainingSampleAt, trainingSamples, type TrainingSampleOptions } from './training-set.js';
import { readLessons, writeLessons } from '../store/lessons-setting.js';
import type { LessonHint, StoredLessons } from '../../src-shared/lessons.js';
import { clearSplitOverrides } from '../store/split-overrides.js';
import { SavedChats } from '../store/saved-chats.js';
import { computeSplit, placeSessions, setPercent, splitView, type ComputedSplit } from './stored-split.js';
import type { TrainMethod } from '../../src-shared/training.js';

export type { CapturedReplyAt, CapturedReplyRef, CaptureExchangeRow } from '../store/capture-exchanges.js';
export type { ImportOptions, OpenedExportLike, OpenExportFn } from './import-into-store.js';

export interface WorkspaceOptions {
  persist?: PersistOptions;
  /** The importer entry point; defaults to src-main/import's `openExport`. */
  openExport?: OpenExportFn;
  /**
   * 'write' (the default) holds the database's lock while open: one writer at a time
   * (store/db-lock.ts). 'read' needs an existing database, takes no lock, never saves.
   */
  access?: StoreAccess;
}

export class Workspace implements WorkspaceApi {
  /** The held-out split, recomputed after any change to the sessions or the user's choices. */
  private splitCache: ComputedSplit | null = null;

  private constructor(
    private readonly store: Store,
    private readonly openExportFn: OpenExportFn,
  ) {}

  static async open(dbPath: string, options: WorkspaceOptions = {}): Promise<Workspace> {
    const store = await Store.open(dbPath, options.persist ?? DEFAULT_PERSIST, options.access ?? 'write');
    try {
      upgradeSamples(store);
      clearFreePagesOnce(store);
    } catch (err) {
      store.closeAfterFailure();
      throw err;
    }
    return new Workspace(store, options.openExport ?? defaultOpenExport);
  }

  get dbPath(): string {
    return this.store.path;
  }

  /** The Chat page's saved chats (store/saved-chats.ts). */
  get savedChats(): SavedChats {
    return new SavedChats(this.store);
  }

  /** The underlying store, for benchmarks and tests of persistence. */
  get storage(): Store {
    return this.store;
  }

  // ── import ────────────────────────────────────────────────────────────────────────

  /**
   * Imports every input in one transaction: all of them land, or (on any error) none
   * does and the database file is left exactly as it was.
   */
  async importFiles(paths: string[], format: SourceFormat | 'auto' = 'auto', options: ImportOptions = {}): Promise<ImportSummary> {
    const { summary, changed } = await importPaths(this.store, this.openExportFn, paths, format, this.contextWindow(), options);
    if (changed) this.saveNow();
    return summary;
  }

  /** Imports one opened export (or hand-made conversations, in tests) in one transaction. */
  async importExport(opened: OpenedExportLike): Promise<ImportSummary> {
    const { summary, changed } = await importOneOpened(this.store, opened, this.contextWindow());
    if (changed) this.saveNow();
    return summary;
  }

  // ── reading ───────────────────────────────────────────────────────────────────────

  stats(): Stats {
    return readStats(this.store);
  }

  listSessions(filter: SessionFilter = {}): { total: number; sessions: SessionSummary[] } {
    const { total, sessions } = listSessionSummaries(this.store, filter);
    return { total, sessions: sessions.map((s) => ({ ...s, split: this.sessionSplit(s.id) })) };
  }

  getSession(id: string): SessionDetail {
    return { ...sessionDetail(this.store, id), split: this.sessionSplit(id) };
  }

  listSamples(sessionId?: string): SampleView[] {
    return sampleViews(this.store, sessionId);
  }

  // ── labels and judge verdicts (the judge runner: src-main/judge/runner.ts) ─────────

  /** A manual label: fields in the patch replace the stored ones, the rest are kept. */
  setLabel(sessionId: string, responseTurn: number, patch: LabelPatch): LabelView {
    return setManualLabel(this.store, sessionId, responseTurn, patch);
  }

  judgeCandidates(): JudgeCandidate[] {
    return judgeCandidates(this.store);
  }

  recordJudgeVerdicts(verdicts: readonly { sample: { sessionId: string; responseTurn: number }; verdict: JudgeVerdict }[], provenance: VerdictProvenance): boolean[] {
    return this.store.transaction(() => verdicts.map(({ sample, verdict }) => recordVerdict(this.store, sample, verdict, provenance)));
  }

  // ── checks, training set, window ──────────────────────────────────────────────────

  checks(): CheckReport {
    return checkReport(this.store);
  }

  reviewQueue(limit?: number): { total: number; items: ReviewItem[] } {
    return reviewQueue(this.store, limit);
  }

  trainingSamples(options: TrainingSampleOptions = {}): TrainingSample[] {
    return trainingSamples(this.store, this.computedSplit().heldOut, options);
  }

  trainingSampleAt(sessionId: string, responseTurn: number): TrainingSample | null {
    return trainingSampleAt(this.store, sessionId, responseTurn);
  }

  nothingToTrain(method: TrainMethod): string | null {
    return nothingToTrain(this.store, method, this.computedSplit().heldOut);
  }

  // ── the held-out split (docs/design.md §Evaluation) ───────────────────────────────

  split(): SplitView {
    return splitView(this.computedSplit());
  }

  /** The ids of the held-out sessions (with or without samples). */
  heldOutSessionIds(): string[] {
    return [...this.computedSplit().heldOut].sort();
  }

  setHeldOut(sessionIds: string[], heldOut: boolean | null): SplitView {
    placeSessions(this.store, this.computedSplit(), sessionIds, heldOut);
    return this.splitChanged();
  }

  /** Forgets every choice the user made: the rule decides again. Returns how many there were. */
  resetSplit(): number {
    const n = clearSplitOverrides(this.store);
    this.splitChanged();
    return n;
  }

  setHeldOutPercent(percent: number): SplitView {
    setPercent(this.store, percent);
    return this.splitChanged();
  }

  evaluationSamples(split: 'heldout' | 'all'): TrainingSample[] {
    const heldOut = this.computedSplit().heldOut;
    return evaluationSamples(this.store, (id) => split === 'all' || heldOut.has(id));
  }

  private computedSplit(): ComputedSplit {
    this.splitCache ??= computeSplit(this.store);
    return this.splitCache;
  }

  private sessionSplit(id: string): SessionSplit {
    return this.computedSplit().bySession.get(id) ?? { heldOut: false, why: 'rule' };
  }

  private splitChanged(): SplitView {
    if (this.store.readOnly) this.splitCache = null;
    else this.saveNow();
    return this.split();
  }

  contextWindow(): ContextWindowSetting {
    return readContextWindow(this.store);
  }

  setContextWindow(window: ContextWindowSetting): void {
    for (const [key, value] of Object.entries(window)) {
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) throw new UserError(`context window ${key} must be a whole number ≥ 1, got ${value}`);
    }
    const clean: ContextWindowSetting = {};
    if (window.lastTurns !== undefined) clean.lastTurns = window.lastTurns;
    if (window.tokenBudget !== undefined) clean.tokenBudget = window.tokenBudget;
    this.store.transaction(() => {
      writeContextWindow(this.store, clean);
      rebuildAllSamples(this.store, (turns) => analyseSession(turns, clean));
    });
    this.saveNow();
  }

  // ── lessons (docs/design.md §Lessons): in the settings table, saved at once ─────────
  lessons(): StoredLessons | null {
    return readLessons(this.store);
  }
  setLessons(lessons: StoredLessons | null): void {
    writeLessons(this.store, lessons);
    this.store.markDirty();
    this.store.flush();
  }
  lessonHints(): { hints: LessonHint[]; heldOut: number } {
    return lessonHints(this.store, this.computedSplit().heldOut);
  }

  // ── live capture (src-main/capture/) ──────────────────────────────────────────────

  /** See capture-writes.ts: returns, per session, the response turns of new samples. */
  applyCapture(exchanges: readonly CaptureExchangeRow[], conversations: readonly ImportedConversation[], logPath: string): Map<string, number[]> {
    this.splitCache = null;
    return applyCapture(this.store, exchanges, conversations, logPath, this.contextWindow());
  }

  /** Every captured exchange of a session (or all), oldest first: for the capture status, tests and replay checks. */
  captureExchanges(sessionId?: string): CaptureExchangeRow[] {
    return readCaptureExchanges(this.store, sessionId);
  }

  /** Counts for the capture status: exchanges recorded, and captured samples with a next state but no label. */
  captureCounts(): { exchanges: number; pendingJudge: number; sessionIds: string[] } {
    return readCaptureCounts(this.store);
  }

  /** The captured reply that feedback names (docs/design.md §Feedback endpoint), or undefined. */
  findCapturedReply(ref: CapturedReplyRef): CapturedReplyAt | undefined {
    return findCapturedReply(this.store, ref);
  }

  /** Removes a session with its turns, samples, labels and captured exchanges; false when there was none. */
  deleteSession(id: string): boolean {
    return this.deleteSessions([id]) > 0;
  }

  /** Removes sessions in one transaction (./bulk-edits.ts); returns how many there were. */
  deleteSessions(ids: readonly string[]): number {
    const deleted = deleteSessions(this.store, ids);
    this.saveNow();
    return deleted;
  }

  /** One manual reward on every sample of the sessions, in one transaction (./bulk-edits.ts). */
  labelSessions(ids: readonly string[], reward: 1 | -1 | null): BulkLabelResult {
    const result = labelSessions(this.store, ids, reward);
    this.saveNow();
    return result;
  }

  // ── exports ───────────────────────────────────────────────────────────────────────

  async exportJsonl(format: ExportFormat, outPath: string, filter: ExportFilter = {}): Promise<{ lines: number; path: string }> {
    return exportToFile(this.store, format, outPath, this.exportKeep(filter));
  }

  previewExport(format: ExportFormat, lines: number, filter: ExportFilter = {}): string[] {
    return previewLines(this.store, format, lines, this.exportKeep(filter));
  }

  exportCounts(filter: ExportFilter = {}): ExportCounts {
    const { lines, sessions, leftOut } = countExportLines(this.store, this.exportKeep(filter));
    return { lines, sessions, heldOutLeftOut: leftOut };
  }

  /** Which sessions an export with `filter` takes (undefined: all). */
  private exportKeep(filter: ExportFilter): ((sessionId: string) => boolean) | undefined {
    const heldOut = filter.leaveOutHeldOut ? this.computedSplit().heldOut : null;
    return heldOut ? (id) => !heldOut.has(id) : undefined;
  }

  /** `hindsight handoff --to trl`: datasets, train.py and configs for a GPU cluster (./handoff-trl.ts). */
  handoffTrl(options: TrlHandoffOptions): TrlHandoffResult {
    const split = this.computedSplit();
    return writeTrlHandoff(this.store, options, { ids: split.heldOut, ...splitView(split).heldOut });
  }

  /**
   * The requests a replay to OpenClaw-RL sends (src-main/export/replay-plan.ts). Held-out
   * sessions are training data there too, so they are skipped unless included (docs/design.md §Hand-off).
   */
  replayPlan(options: { includeHeldOut?: boolean } = {}): ReplayPlan {
    const split = this.computedSplit();
    const all = replayPlan(this.store);
    const included = options.includeHeldOut === true;
    const sessions = included ? all : all.filter((s) => !split.heldOut.has(s.sessionId));
    const heldOut = { sessions: all.filter((s) => split.heldOut.has(s.sessionId)).length, samples: splitView(split).heldOut.samples, included };
    return { sessions, heldOut };
  }

  /** Runs a raw query: for tests and diagnostics only. */
  query<T = Record<string, unknown>>(sql: string, params?: Params): T[] {
    return this.store.all<T>(sql, params);
  }

  private saveNow(): void {
    this.splitCache = null; // every caller changed sessions or samples
    this.store.markDirty();
    this.store.flush();
  }

  flush(): void {
    this.store.flush();
  }

  close(): void {
    this.store.close();
  }

  /** Closes after a failed command: see Store.closeAfterFailure. */
  closeAfterFailure(): void {
    this.store.closeAfterFailure();
  }
}

/**
 * Recomputes the samples of a database whose schema upgrade asked for it (migration 3:
 * contexts became spans), with the database's own context window, and drops the space the
 * old context lists took. A reader does it in memory only.
 */
function upgradeSamples(store: Store): void {
  if (!samplesNeedRebuild(store)) return;
  const window = readContextWindow(store);
  store.transaction(() => rebuildAllSamples(store, (turns) => analyseSession(turns, window)));
  if (!store.readOnly) store.compact();
}

/**
 * Opens the workspace at `dbPath`, runs `fn`, and closes (and so saves) it. When `fn`
 * fails, a database this call would have created is not created.
 */
export async function withWorkspace<T>(dbPath: string, fn: (ws: Workspace) => Promise<T> | T, options: { access?: StoreAccess } = {}): Promise<T> {
  const ws = await Workspace.open(dbPath, options);
  let result: T;
  try {
    result = await fn(ws);
  } catch (err) {
    ws.closeAfterFailure();
    throw err;
  }
  ws.close();
  return result;
}
