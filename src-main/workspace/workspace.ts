// The workspace: one Hindsight database and everything done to it — import, samples,
// labels, judging, checks, exports and the training set. The CLI, the app's API service
// and `serve` all go through this class (contract: workspace-api.ts).
//
// Persistence: label edits mark the store dirty and are saved, coalesced, a moment later;
// imports, judge runs and context-window changes save at once when they finish. Every
// save is atomic (store/atomic-file.ts). An import runs in one SQL transaction: if any
// input fails, everything it did is rolled back and the database file is not touched.
import path from 'node:path';
import { UserError, type ImportedConversation, type LabelSource, type Reward, type SessionFormat, type SourceFormat, type Vote } from '../../src-shared/types.js';
import type {
  CheckReport, ContextWindowSetting, ExportFormat, HeuristicJudgeOptions, ImportSummary, JudgeCandidate, JudgeSummary, LabelPatch, LabelView,
  NoSampleReason, RunJudgeOptions, SampleView, SessionDetail, SessionFilter, SessionSummary, Stats, TrainingSample, VerdictProvenance, WorkspaceApi,
} from '../../src-shared/views.js';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { DEFAULT_PERSIST, Store, type Params, type PersistOptions } from '../store/database.js';
import { rebuildAllSamples, sessionIdFor, upsertConversation } from '../store/session-writes.js';
import {
  EMPTY_LABEL, iterateBundles, labelFromRow, readAlternatives, readSamples, readSessionRecord, readTurns,
  type SampleRecord, type SessionBundle, type StoredLabel,
} from '../store/session-reads.js';
import { HeuristicJudge, type JudgeBackend, type JudgeInput, type JudgeVerdict } from '../judge/verdicts.js';
import { hintForTraining, isUsefulHint } from '../judge/hint-rules.js';
import { sessionSamplesFor, whyNothingToTrain, type SampleSignal } from '../pipeline/training-signal.js';
import type { TrainMethod } from '../../src-shared/training.js';
import { contextMessages, responseMessage, sessionLines } from '../export/formats.js';
import { writeJsonl } from '../export/writer.js';

/** A stored sample with what training sees of it: its reward and the hint training uses. */
function signalOf(s: SampleRecord): SampleRecord & { reward: Reward; hint: string | null; hinted: boolean } {
  const hint = hintForTraining(s.label);
  return { ...s, reward: s.label.reward ?? 0, hint, hinted: hint !== null };
}

/** What an importer hands over for one input (src-main/import/index.ts: OpenedExport). */
export interface OpenedExportLike {
  path: string;
  format: SourceFormat;
  sha256: string;
  conversations(): AsyncIterable<ImportedConversation> | Iterable<ImportedConversation>;
  /**
   * File-level and per-conversation warnings (the importer copies each conversation's own
   * warnings here, naming it); complete once `conversations()` is exhausted.
   */
  warnings: string[];
}

/** One captured chat-completions exchange as the database keeps it (src-main/capture/). */
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
}

export type OpenExportFn = (inputPath: string, format?: SourceFormat | 'auto') => Promise<OpenedExportLike>;

export interface WorkspaceOptions {
  persist?: PersistOptions;
  /** The importer entry point; defaults to src-main/import's `openExport`. */
  openExport?: OpenExportFn;
}

async function defaultOpenExport(inputPath: string, format?: SourceFormat | 'auto'): Promise<OpenedExportLike> {
  const { openExport } = await import('../import/importer.js');
  return openExport(inputPath, format);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

function likePattern(text: string): string {
  return '%' + text.replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

function validReward(value: unknown): value is Reward | null {
  return value === null || value === 1 || value === -1 || value === 0;
}

/** Turns any error from reading an input into a one-line UserError that names the input. */
function importError(inputPath: string, err: unknown): UserError {
  const message = (err as Error)?.message ?? String(err);
  const firstLine = message.split('\n')[0];
  const named = firstLine.includes(inputPath) || firstLine.includes(path.basename(inputPath));
  return new UserError(named ? firstLine : `${inputPath}: ${firstLine}`);
}

export class Workspace implements WorkspaceApi {
  private readonly heuristic = new HeuristicJudge();

  private constructor(
    private readonly store: Store,
    private readonly openExportFn: OpenExportFn,
  ) {}

  static async open(dbPath: string, options: WorkspaceOptions = {}): Promise<Workspace> {
    const store = await Store.open(dbPath, options.persist ?? DEFAULT_PERSIST);
    return new Workspace(store, options.openExport ?? defaultOpenExport);
  }

  get dbPath(): string {
    return this.store.path;
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
  async importFiles(paths: string[], format: SourceFormat | 'auto' = 'auto'): Promise<ImportSummary> {
    if (paths.length === 0) throw new UserError('nothing to import: give at least one file, folder or zip');
    const summary = this.emptySummary();
    const changed = await this.store.transactionAsync(async () => {
      let any = false;
      for (const inputPath of paths) {
        let opened: OpenedExportLike;
        try {
          opened = await this.openExportFn(inputPath, format);
        } catch (err) {
          throw importError(inputPath, err);
        }
        try {
          any = (await this.importInto(opened, summary)) || any;
        } catch (err) {
          throw importError(inputPath, err);
        }
      }
      return any;
    });
    if (changed) {
      this.store.markDirty();
      this.store.flush();
    }
    return summary;
  }

  /** Imports one opened export (or hand-made conversations, in tests) in one transaction. */
  async importExport(opened: OpenedExportLike): Promise<ImportSummary> {
    const summary = this.emptySummary();
    const changed = await this.store.transactionAsync(async () => {
      try {
        return await this.importInto(opened, summary);
      } catch (err) {
        throw importError(opened.path, err);
      }
    });
    if (changed) {
      this.store.markDirty();
      this.store.flush();
    }
    return summary;
  }

  private emptySummary(): ImportSummary {
    return { sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0, warnings: [] };
  }

  /** Writes one export's conversations; returns whether the database changed. */
  private async importInto(opened: OpenedExportLike, summary: ImportSummary): Promise<boolean> {
    const now = nowSeconds();
    const window = this.contextWindow();
    let source = this.store.get<{ id: number }>('SELECT id FROM sources WHERE sha256 = ?', [opened.sha256]);
    const newSource = !source;
    if (!source) {
      this.store.run('INSERT INTO sources (path, format, sha256, imported_at, sessions, turns) VALUES (?, ?, ?, ?, 0, 0)', [
        path.resolve(opened.path), opened.format, opened.sha256, now,
      ]);
      source = this.store.get<{ id: number }>('SELECT last_insert_rowid() AS id')!;
    }
    let changed = newSource;
    let sessions = 0;
    let turns = 0;
    const seen = new Set<string>();
    for await (const conv of opened.conversations()) {
      const result = upsertConversation(this.store, conv, opened.format, source.id, window, now);
      if (result.outcome === 'added') summary.sessions_added++;
      else if (result.outcome === 'updated') summary.sessions_updated++;
      else summary.sessions_unchanged++;
      if (result.outcome !== 'unchanged') changed = true;
      if (result.labelsDropped > 0) {
        summary.warnings.push(`${result.id}: ${result.labelsDropped} label(s) dropped because their reply or its context changed in the newer export`);
      }
      if (seen.has(result.id)) continue;
      seen.add(result.id);
      sessions++;
      const counts = this.store.get<{ turns: number; samples: number }>(
        'SELECT (SELECT COUNT(*) FROM turns WHERE session_id = ?) AS turns, (SELECT COUNT(*) FROM samples WHERE session_id = ?) AS samples',
        [result.id, result.id],
      )!;
      turns += counts.turns;
      summary.turns += counts.turns;
      summary.samples += counts.samples;
    }
    summary.warnings.push(...opened.warnings);
    if (newSource) {
      this.store.run('UPDATE sources SET sessions = ?, turns = ?, warnings = ? WHERE id = ?', [
        sessions, turns, JSON.stringify(opened.warnings), source.id,
      ]);
    }
    return changed;
  }

  // ── reading ───────────────────────────────────────────────────────────────────────

  stats(): Stats {
    const row = this.store.get<Record<string, number>>(`
      SELECT
        (SELECT COUNT(*) FROM sessions) AS sessions,
        (SELECT COUNT(*) FROM turns) AS turns,
        (SELECT COUNT(*) FROM samples) AS samples,
        (SELECT COUNT(*) FROM labels WHERE reward = 1) AS pos,
        (SELECT COUNT(*) FROM labels WHERE reward = -1) AS neg,
        (SELECT COUNT(*) FROM labels WHERE reward = 0) AS neutral,
        (SELECT COUNT(*) FROM sessions WHERE no_sample_reason IS NOT NULL) AS without`)!;
    return {
      sessions: row.sessions,
      turns: row.turns,
      samples: row.samples,
      labeled: { pos: row.pos, neg: row.neg, neutral: row.neutral, unlabeled: row.samples - row.pos - row.neg - row.neutral },
      sessions_without_samples: row.without,
    };
  }

  listSessions(filter: SessionFilter = {}): { total: number; sessions: SessionSummary[] } {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (filter.search?.trim()) {
      const like = likePattern(filter.search.trim());
      where.push(`(s.title LIKE ? ESCAPE '\\' OR s.id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.text LIKE ? ESCAPE '\\'))`);
      params.push(like, like, like);
    }
    if (filter.source) {
      where.push('s.format = ?');
      params.push(filter.source);
    }
    if (filter.hasSamples !== undefined) where.push(filter.hasSamples ? 'c.sample_count > 0' : 'c.sample_count = 0');
    if (filter.labelStatus === 'labeled') where.push('c.sample_count > 0 AND c.labeled_count = c.sample_count');
    if (filter.labelStatus === 'unlabeled') where.push('c.sample_count > 0 AND c.labeled_count = 0');
    if (filter.labelStatus === 'partial') where.push('c.labeled_count > 0 AND c.labeled_count < c.sample_count');
    const base = `
      FROM sessions s JOIN (
        SELECT s2.id,
          (SELECT COUNT(*) FROM turns t WHERE t.session_id = s2.id) AS turn_count,
          (SELECT COUNT(*) FROM samples p WHERE p.session_id = s2.id) AS sample_count,
          (SELECT COUNT(*) FROM labels l WHERE l.session_id = s2.id AND l.reward IS NOT NULL) AS labeled_count
        FROM sessions s2) c ON c.id = s.id
      ${where.length ? 'WHERE ' + where.join(' AND ') : ''}`;
    const total = this.store.get<{ n: number }>(`SELECT COUNT(*) AS n ${base}`, params)!.n;
    const limit = filter.limit ?? -1;
    const offset = filter.offset ?? 0;
    const rows = this.store.all<{
      id: string; title: string; format: SessionFormat; created_at: number | null; no_sample_reason: NoSampleReason | null;
      turn_count: number; sample_count: number; labeled_count: number;
    }>(
      `SELECT s.id, s.title, s.format, s.created_at, s.no_sample_reason, c.turn_count, c.sample_count, c.labeled_count ${base}
       ORDER BY s.created_at IS NULL, s.created_at DESC, s.id LIMIT ? OFFSET ?`,
      [...params, limit, offset],
    );
    return {
      total,
      sessions: rows.map((r) => ({
        id: r.id, title: r.title, source: r.format, createdAt: r.created_at, turnCount: r.turn_count,
        sampleCount: r.sample_count, labeledCount: r.labeled_count, noSampleReason: r.no_sample_reason,
      })),
    };
  }

  getSession(id: string): SessionDetail {
    const record = readSessionRecord(this.store, id);
    if (!record) throw new UserError(`no session '${id}' in ${this.dbPath}`);
    const turns = readTurns(this.store, id);
    const samples = readSamples(this.store, id);
    return {
      id, title: record.title, source: record.format, createdAt: record.createdAt, turnCount: turns.length,
      sampleCount: samples.length, labeledCount: samples.filter((s) => s.label.reward !== null).length,
      noSampleReason: record.noSampleReason,
      turns: turns.map((t) => ({
        index: t.index, role: t.role, text: t.text, reasoning: t.reasoning, toolCalls: t.toolCalls,
        attachments: t.attachments.map((a) => ({ kind: a.kind, ...(a.name !== undefined ? { name: a.name } : {}) })),
        timestamp: t.timestamp, hidden: t.hidden, classification: t.classification, sideReason: t.sideReason,
      })),
      samples: samples.map((s) => this.sampleView(id, turns, s)),
      alternatives: readAlternatives(this.store, id).map((a) => ({ atTurn: a.atTurn, text: a.text })),
    };
  }

  private sampleView(sessionId: string, turns: { text: string }[], s: SampleRecord): SampleView {
    return {
      sessionId, responseTurn: s.responseTurn, feedbackTurn: s.feedbackTurn, nextStateRole: s.nextStateRole,
      response: turns[s.responseTurn].text, feedback: s.feedbackTurn === null ? null : turns[s.feedbackTurn].text,
      label: publicLabel(s.label),
    };
  }

  listSamples(sessionId?: string): SampleView[] {
    if (sessionId !== undefined && !readSessionRecord(this.store, sessionId)) throw new UserError(`no session '${sessionId}' in ${this.dbPath}`);
    const out: SampleView[] = [];
    for (const bundle of iterateBundles(this.store, sessionId)) {
      for (const s of bundle.samples) out.push(this.sampleView(bundle.id, bundle.turns, s));
    }
    return out;
  }

  // ── labels ────────────────────────────────────────────────────────────────────────

  private readLabel(sessionId: string, responseTurn: number): StoredLabel {
    const row = this.store.get<Parameters<typeof labelFromRow>[0]>('SELECT * FROM labels WHERE session_id = ? AND response_turn = ?', [sessionId, responseTurn]);
    return row ? labelFromRow(row) : { ...EMPTY_LABEL };
  }

  private requireSample(sessionId: string, responseTurn: number): void {
    if (this.store.get('SELECT 1 FROM samples WHERE session_id = ? AND response_turn = ?', [sessionId, responseTurn])) return;
    if (!readSessionRecord(this.store, sessionId)) throw new UserError(`no session '${sessionId}' in ${this.dbPath}`);
    const turns = this.store.all<{ response_turn: number }>('SELECT response_turn FROM samples WHERE session_id = ? ORDER BY response_turn', [sessionId]);
    const list = turns.length ? `its samples are at turns ${turns.map((t) => t.response_turn).join(', ')}` : 'it has no samples';
    throw new UserError(`session '${sessionId}' has no sample at turn ${responseTurn}; ${list}`);
  }

  /** A manual label: fields in the patch replace the stored ones, the rest are kept. */
  setLabel(sessionId: string, responseTurn: number, patch: LabelPatch): LabelView {
    this.requireSample(sessionId, responseTurn);
    if (patch.reward !== undefined && !validReward(patch.reward)) throw new UserError(`reward must be 1, -1, 0 or null, got ${String(patch.reward)}`);
    const old = this.readLabel(sessionId, responseTurn);
    const clean = (v: string | null | undefined, fallback: string | null) => (v === undefined ? fallback : v === null || v.trim() === '' ? null : v);
    const next: StoredLabel = {
      ...old,
      reward: patch.reward === undefined ? old.reward : patch.reward,
      hint: clean(patch.hint, old.hint),
      repair: clean(patch.repair, old.repair),
      notes: clean(patch.notes, old.notes),
      source: 'manual',
      updatedAt: nowSeconds(),
    };
    this.writeLabel(sessionId, responseTurn, next);
    this.store.markDirty();
    return publicLabel(next);
  }

  private writeLabel(sessionId: string, responseTurn: number, l: StoredLabel): void {
    this.store.run(
      `INSERT OR REPLACE INTO labels (session_id, response_turn, reward, hint, source, votes, repair, notes, updated_at, judge_backend, judge_model, prompt_version)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [sessionId, responseTurn, l.reward, l.hint, l.source, JSON.stringify(l.votes), l.repair, l.notes, l.updatedAt ?? nowSeconds(), l.judgeBackend, l.judgeModel, l.promptVersion],
    );
  }

  // ── judging ───────────────────────────────────────────────────────────────────────

  /** The samples a judge sees, in stable order, with what decides whether to (re)judge them. */
  private *judgeTargets(): Generator<{ input: JudgeInput; label: StoredLabel }> {
    for (const bundle of iterateBundles(this.store)) {
      for (const s of bundle.samples) {
        if (s.feedbackTurn === null || s.nextStateRole === null) continue;
        yield { input: judgeInput(bundle, s), label: s.label };
      }
    }
  }

  /**
   * Why a judge must leave this label alone, or null. Manual labels always win; an LLM
   * judge's label outranks the heuristic's; a label from the same backend, model and prompt
   * is up to date unless `force`.
   */
  private skipReason(label: StoredLabel, backend: JudgeBackend, promptVersion: string, force: boolean): 'manual' | 'higher' | 'unchanged' | null {
    if (label.source === 'manual') return 'manual';
    if (backend.labelSource === 'heuristic' && label.source?.startsWith('judge:')) return 'higher';
    if (!force && label.source === backend.labelSource && label.judgeBackend === backend.provenance.backend &&
      label.judgeModel === backend.provenance.model && label.promptVersion === promptVersion) return 'unchanged';
    return null;
  }

  private storeVerdict(input: JudgeInput, backend: JudgeBackend, promptVersion: string, verdict: JudgeVerdict): void {
    this.writeLabel(input.sessionId, input.responseTurn, {
      reward: verdict.reward,
      hint: isUsefulHint(verdict.hint) ? verdict.hint.trim() : null,
      source: backend.labelSource,
      votes: verdict.votes as Vote[],
      repair: null,
      notes: null,
      updatedAt: nowSeconds(),
      judgeBackend: backend.provenance.backend,
      judgeModel: backend.provenance.model,
      promptVersion,
    });
  }

  /** The heuristic judge over every sample, synchronously (it is instant). Always re-scores. */
  judgeHeuristic(options: HeuristicJudgeOptions): JudgeSummary {
    const summary: Required<JudgeSummary> = { judged: 0, skippedManual: 0, skippedHigher: 0, skippedUnchanged: 0, cancelled: false };
    const promptVersion = this.heuristic.provenance.promptVersion + (options.hints ? '+hints' : '');
    this.store.transaction(() => {
      for (const { input, label } of [...this.judgeTargets()]) {
        const skip = this.skipReason(label, this.heuristic, promptVersion, true);
        if (skip === 'manual') { summary.skippedManual++; continue; }
        if (skip === 'higher') { summary.skippedHigher++; continue; }
        this.storeVerdict(input, this.heuristic, promptVersion, this.heuristic.judgeSync(input, options));
        summary.judged++;
      }
    });
    this.store.markDirty();
    this.store.flush();
    return summary;
  }

  async runJudge(backend: JudgeBackend, options: RunJudgeOptions): Promise<JudgeSummary> {
    const summary: Required<JudgeSummary> = { judged: 0, skippedManual: 0, skippedHigher: 0, skippedUnchanged: 0, cancelled: false };
    const promptVersion = backend.provenance.promptVersion + (options.hints ? '+hints' : '');
    const votes = options.votes ?? 3;
    const targets = [...this.judgeTargets()];
    const total = targets.length;
    let done = 0;
    options.onProgress?.(0, total);
    try {
      for (const { input, label } of targets) {
        if (options.signal?.aborted) {
          summary.cancelled = true;
          break;
        }
        const skip = this.skipReason(label, backend, promptVersion, options.force ?? false);
        if (skip === 'manual') summary.skippedManual++;
        else if (skip === 'higher') summary.skippedHigher++;
        else if (skip === 'unchanged') summary.skippedUnchanged++;
        else {
          const verdict = await backend.judge(input, { hints: options.hints, votes, signal: options.signal });
          // The user may have labelled this sample while the judge was thinking.
          if (this.readLabel(input.sessionId, input.responseTurn).source !== 'manual') {
            this.storeVerdict(input, backend, promptVersion, verdict);
            this.store.markDirty();
            summary.judged++;
          } else summary.skippedManual++;
        }
        options.onProgress?.(++done, total);
      }
    } finally {
      this.store.flush();
    }
    return summary;
  }

  judgeCandidates(): JudgeCandidate[] {
    return [...this.judgeTargets()].map(({ input, label }) => ({
      input,
      label: { source: label.source, judgeBackend: label.judgeBackend, judgeModel: label.judgeModel, promptVersion: label.promptVersion },
    }));
  }

  recordJudgeVerdict(sample: { sessionId: string; responseTurn: number }, verdict: JudgeVerdict, provenance: VerdictProvenance): boolean {
    // The user may have labelled this sample while the judge was thinking.
    if (this.readLabel(sample.sessionId, sample.responseTurn).source === 'manual') return false;
    this.writeLabel(sample.sessionId, sample.responseTurn, {
      reward: verdict.reward,
      hint: verdict.hint?.trim() || null,
      source: provenance.labelSource,
      votes: verdict.votes,
      repair: null,
      notes: null,
      updatedAt: nowSeconds(),
      judgeBackend: provenance.backend,
      judgeModel: provenance.model,
      promptVersion: provenance.promptVersion,
    });
    this.store.markDirty();
    return true;
  }

  // ── checks, training set, window ──────────────────────────────────────────────────

  checks(): CheckReport {
    const stats = this.stats();
    const sessionsWithoutSamples = this.store
      .all<{ id: string; title: string; no_sample_reason: NoSampleReason }>(
        'SELECT id, title, no_sample_reason FROM sessions WHERE no_sample_reason IS NOT NULL ORDER BY created_at IS NULL, created_at, id',
      )
      .map((r) => ({ id: r.id, title: r.title, reason: r.no_sample_reason }));
    const warnings: string[] = [];
    const { pos, neg, unlabeled } = stats.labeled;
    const hints = this.store.get<{ n: number }>("SELECT COUNT(*) AS n FROM labels WHERE hint IS NOT NULL AND hint != ''")!.n;
    if (stats.samples === 0) warnings.push('No samples yet: import chats in which an assistant reply got a reaction.');
    if (unlabeled > 0) warnings.push(`${unlabeled} of ${stats.samples} samples are unlabeled: run the judge or label them.`);
    if (pos + neg > 0 && (pos === 0 || neg === 0)) {
      warnings.push(`Only ${pos === 0 ? 'negative' : 'positive'} rewards (${pos} +1, ${neg} −1): Binary RL learns best from both.`);
    } else if (pos + neg > 0 && Math.max(pos, neg) > 4 * Math.min(pos, neg)) {
      warnings.push(`Rewards are imbalanced: ${pos} +1 against ${neg} −1.`);
    }
    if (stats.samples > 0 && hints === 0) warnings.push('No sample has a hint: On-Policy Distillation has nothing to learn from (run the judge with hints).');
    if (stats.sessions_without_samples > 0) warnings.push(`${stats.sessions_without_samples} session(s) yield no sample; see the list for why.`);
    return { stats, sessionsWithoutSamples, warnings };
  }

  /**
   * With `rolloutsFor` (a model folder), samples captured live from that model carry their
   * rollout (see TrainingSample.rollout); without it none does, so a run on another model
   * never mistakes a rollout's log-probs for its own.
   */
  trainingSamples(options: { method?: TrainMethod; rolloutsFor?: string; format?: SessionFormat } = {}): TrainingSample[] {
    const out: TrainingSample[] = [];
    const rolloutModel = options.rolloutsFor ? path.resolve(options.rolloutsFor) : null;
    for (const bundle of iterateBundles(this.store, undefined, options.format)) {
      // The at-least-one rule, per session and method: docs/design.md §At-least-one.
      for (const { sample: s, kept } of sessionSamplesFor(options.method ?? 'combine', bundle.samples.map(signalOf))) {
        out.push({
          sessionId: bundle.id,
          responseTurn: s.responseTurn,
          messages: contextMessages(bundle, s),
          response: responseMessage(bundle, s),
          reward: s.reward,
          hint: s.hint,
          repair: s.label.repair,
          keptByAtLeastOne: kept,
          ...(rolloutModel && bundle.format === 'capture' ? this.rolloutOf(bundle.id, s.responseTurn, bundle.turns[s.responseTurn].text, rolloutModel) : {}),
        });
      }
    }
    return out;
  }

  nothingToTrain(method: TrainMethod): string | null {
    const all: SampleSignal[] = [];
    for (const bundle of iterateBundles(this.store)) all.push(...bundle.samples.map(signalOf));
    return whyNothingToTrain(method, all);
  }

  /** The latest rollout of the local model `modelDir` for this reply, when its text is the reply's. */
  private rolloutOf(sessionId: string, responseTurn: number, text: string, modelDir: string): Pick<TrainingSample, 'rollout'> {
    const row = this.store.get<{ reply: string; prompt_ids: string; token_ids: string; logprobs: string }>(
      `SELECT reply, prompt_ids, token_ids, logprobs FROM capture_exchanges
       WHERE session_id = ? AND reply_turn = ? AND kind = 'main' AND token_ids IS NOT NULL AND model_dir = ?
       ORDER BY seq DESC LIMIT 1`,
      [sessionId, responseTurn, modelDir],
    );
    if (!row || (JSON.parse(row.reply) as { content: string }).content !== text) return {};
    return { rollout: { promptIds: JSON.parse(row.prompt_ids), tokens: JSON.parse(row.token_ids), logprobs: JSON.parse(row.logprobs) } };
  }

  // ── live capture (src-main/capture/) ──────────────────────────────────────────────

  /**
   * Applies captured exchanges and the conversations they shape, in one transaction:
   * exchange rows are inserted by id (a replayed one is ignored), and each conversation is
   * upserted as a `capture` session (labels follow their replies, as for a re-import).
   * Returns, per session, the response turns of samples that did not exist before.
   */
  applyCapture(exchanges: readonly CaptureExchangeRow[], conversations: readonly ImportedConversation[], logPath: string): Map<string, number[]> {
    const fresh = new Map<string, number[]>();
    if (!exchanges.length && !conversations.length) return fresh;
    const window = this.contextWindow();
    const now = nowSeconds();
    this.store.transaction(() => {
      for (const x of exchanges) {
        this.store.run(
          `INSERT OR IGNORE INTO capture_exchanges (id, session_id, seq, kind, at, reply_turn, messages, reply, served_by, model, model_dir, prompt_ids, token_ids, logprobs)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            x.id, x.sessionId, x.seq, x.kind, x.at, x.replyTurn, JSON.stringify(x.messages), JSON.stringify(x.reply), x.servedBy, x.model,
            x.modelDir, x.rollout ? JSON.stringify(x.rollout.promptIds) : null, x.rollout ? JSON.stringify(x.rollout.tokens) : null,
            x.rollout ? JSON.stringify(x.rollout.logprobs) : null,
          ],
        );
      }
      if (!conversations.length) return;
      let source = this.store.get<{ id: number }>("SELECT id FROM sources WHERE sha256 = 'capture'");
      if (!source) {
        this.store.run("INSERT INTO sources (path, format, sha256, imported_at, sessions, turns) VALUES (?, 'capture', 'capture', ?, 0, 0)", [logPath, now]);
        source = this.store.get<{ id: number }>('SELECT last_insert_rowid() AS id')!;
      }
      for (const conv of conversations) {
        const id = sessionIdFor('capture', conv);
        const before = new Set(this.store.all<{ t: number }>('SELECT response_turn AS t FROM samples WHERE session_id = ?', [id]).map((r) => r.t));
        upsertConversation(this.store, conv, 'capture', source.id, window, now);
        const added = this.store.all<{ t: number }>('SELECT response_turn AS t FROM samples WHERE session_id = ? ORDER BY response_turn', [id]).map((r) => r.t).filter((t) => !before.has(t));
        if (added.length) fresh.set(id, added);
      }
    });
    this.store.markDirty();
    return fresh;
  }

  /** Every captured exchange of a session (or all), oldest first: for the capture status, tests and replay checks. */
  captureExchanges(sessionId?: string): CaptureExchangeRow[] {
    const rows = this.store.all<{
      id: string; session_id: string; seq: number; kind: 'main' | 'side'; at: number; reply_turn: number | null; messages: string; reply: string;
      served_by: 'local' | 'upstream'; model: string | null; model_dir: string | null; prompt_ids: string | null; token_ids: string | null; logprobs: string | null;
    }>(`SELECT * FROM capture_exchanges ${sessionId !== undefined ? 'WHERE session_id = ?' : ''} ORDER BY at, session_id, seq`, sessionId !== undefined ? [sessionId] : []);
    return rows.map((r) => ({
      id: r.id, sessionId: r.session_id, seq: r.seq, kind: r.kind, at: r.at, replyTurn: r.reply_turn, messages: JSON.parse(r.messages),
      reply: JSON.parse(r.reply), servedBy: r.served_by, model: r.model, modelDir: r.model_dir,
      rollout: r.token_ids ? { promptIds: JSON.parse(r.prompt_ids!), tokens: JSON.parse(r.token_ids), logprobs: JSON.parse(r.logprobs!) } : null,
    }));
  }

  /** Counts for the capture status: exchanges recorded, and captured samples with a next state but no label. */
  captureCounts(): { exchanges: number; pendingJudge: number; sessionIds: string[] } {
    const exchanges = this.store.get<{ n: number }>('SELECT COUNT(*) AS n FROM capture_exchanges')!.n;
    const pendingJudge = this.store.get<{ n: number }>(
      `SELECT COUNT(*) AS n FROM samples p JOIN sessions s ON s.id = p.session_id
       LEFT JOIN labels l ON l.session_id = p.session_id AND l.response_turn = p.response_turn
       WHERE s.format = 'capture' AND p.feedback_turn IS NOT NULL AND (l.session_id IS NULL OR (l.reward IS NULL AND l.hint IS NULL))`,
    )!.n;
    const sessionIds = this.store
      .all<{ id: string }>("SELECT id FROM sessions WHERE format = 'capture' UNION SELECT DISTINCT session_id AS id FROM capture_exchanges")
      .map((r) => r.id);
    return { exchanges, pendingJudge, sessionIds };
  }

  /** Removes a session with its turns, samples, labels and captured exchanges; false when there was none. */
  deleteSession(id: string): boolean {
    const existed = !!readSessionRecord(this.store, id) || !!this.store.get('SELECT 1 FROM capture_exchanges WHERE session_id = ?', [id]);
    this.store.transaction(() => {
      this.store.run('DELETE FROM labels WHERE session_id = ?', [id]);
      this.store.run('DELETE FROM sessions WHERE id = ?', [id]);
      this.store.run('DELETE FROM capture_exchanges WHERE session_id = ?', [id]);
    });
    this.store.markDirty();
    this.store.flush();
    return existed;
  }

  contextWindow(): ContextWindowSetting {
    const row = this.store.get<{ value: string }>("SELECT value FROM settings WHERE key = 'context_window'");
    return row ? (JSON.parse(row.value) as ContextWindowSetting) : {};
  }

  setContextWindow(window: ContextWindowSetting): void {
    for (const [key, value] of Object.entries(window)) {
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) throw new UserError(`context window ${key} must be a whole number ≥ 1, got ${value}`);
    }
    const clean: ContextWindowSetting = {};
    if (window.lastTurns !== undefined) clean.lastTurns = window.lastTurns;
    if (window.tokenBudget !== undefined) clean.tokenBudget = window.tokenBudget;
    this.store.transaction(() => {
      this.store.run("INSERT OR REPLACE INTO settings (key, value) VALUES ('context_window', ?)", [JSON.stringify(clean)]);
      rebuildAllSamples(this.store, clean);
    });
    this.store.markDirty();
    this.store.flush();
  }

  // ── exports ───────────────────────────────────────────────────────────────────────

  private *lines(format: ExportFormat): Generator<string> {
    if (!EXPORT_FORMATS.includes(format)) throw new UserError(`unknown export format '${format}'; choose one of ${EXPORT_FORMATS.join(', ')}`);
    for (const bundle of iterateBundles(this.store)) yield* sessionLines(format, bundle);
  }

  async exportJsonl(format: ExportFormat, outPath: string): Promise<{ lines: number; path: string }> {
    const resolved = path.resolve(outPath);
    if (resolved === this.dbPath) throw new UserError(`${outPath}: that is the database itself; choose another output file`);
    const lines = writeJsonl(resolved, this.lines(format));
    return { lines, path: resolved };
  }

  previewExport(format: ExportFormat, lines: number): string[] {
    const out: string[] = [];
    if (lines <= 0) return out;
    for (const line of this.lines(format)) {
      out.push(line);
      if (out.length >= lines) break;
    }
    return out;
  }

  /** Runs a raw query: for tests and diagnostics only. */
  query<T = Record<string, unknown>>(sql: string, params?: Params): T[] {
    return this.store.all<T>(sql, params);
  }

  flush(): void {
    this.store.flush();
  }

  close(): void {
    this.store.close();
  }
}

function publicLabel(l: StoredLabel): LabelView {
  return { reward: l.reward, hint: l.hint, source: l.source as LabelSource | null, votes: l.votes, repair: l.repair, notes: l.notes, updatedAt: l.updatedAt };
}

function judgeInput(bundle: SessionBundle, s: SampleRecord): JudgeInput {
  const reply = bundle.turns[s.responseTurn];
  const next = bundle.turns[s.feedbackTurn!];
  return {
    sessionId: bundle.id,
    responseTurn: s.responseTurn,
    context: contextMessages(bundle, s),
    response: reply.text,
    responseMessage: responseMessage(bundle, s),
    nextState: { role: s.nextStateRole!, text: next.text },
  };
}

/** Opens the workspace at `dbPath`, runs `fn`, and always closes (and so saves) it. */
export async function withWorkspace<T>(dbPath: string, fn: (ws: Workspace) => Promise<T> | T): Promise<T> {
  const ws = await Workspace.open(dbPath);
  try {
    return await fn(ws);
  } finally {
    ws.close();
  }
}
