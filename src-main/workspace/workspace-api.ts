// The data-side facade that the CLI, the app's API service, live capture and `serve` all call:
// ./workspace.ts implements it over the store, the importers, the pipeline and the exporters.
// The shapes it returns are Node-free and shared with the renderer (src-shared/views.ts); the
// facade itself is Node-side (it opens files, writes exports), so it lives here.
import type { ReplayPlan, TrlHandoffOptions, TrlHandoffResult } from '../../src-shared/handoff.js';
import type { JudgeVerdict, SessionFormat, SourceFormat } from '../../src-shared/types.js';
import type { TrainMethod } from '../../src-shared/training.js';
import type { SavedChats } from '../store/saved-chats.js';
import type { ExportCounts, ExportFilter } from '../../src-shared/export-api.js';
import type { LessonHint, StoredLessons } from '../../src-shared/lessons.js';
import type { ImportOptions } from './import-into-store.js';
import type { BulkLabelResult } from '../../src-shared/sessions-api.js';
import type {
  CheckReport, ContextWindowSetting, ExportFormat, ImportSummary, JudgeCandidate, LabelPatch, LabelView, ReviewItem,
  SampleView, SessionDetail, SessionFilter, SessionSummary, SplitView, Stats, TrainingSample, VerdictProvenance,
} from '../../src-shared/views.js';

export interface WorkspaceApi {
  readonly dbPath: string;
  /** The Chat page's saved chats, in this database. */
  readonly savedChats: SavedChats;
  importFiles(paths: string[], format?: SourceFormat | 'auto', options?: ImportOptions): Promise<ImportSummary>;
  stats(): Stats;
  listSessions(filter?: SessionFilter): { total: number; sessions: SessionSummary[] };
  getSession(id: string): SessionDetail;
  listSamples(sessionId?: string): SampleView[];
  /** A manual label: always wins over judge and heuristic labels. */
  setLabel(sessionId: string, responseTurn: number, patch: LabelPatch): LabelView;
  checks(): CheckReport;
  /** The review queue: unreviewed, uncertain judge labels, most uncertain first (at most `limit`). */
  reviewQueue(limit?: number): { total: number; items: ReviewItem[] };
  /**
   * What the judge runner (src-main/judge/runner.ts, for every backend) works with: every sample
   * that has a next state, in stable order, with its label's provenance ...
   */
  judgeCandidates(): JudgeCandidate[];
  /**
   * ... and storing verdicts with their raw votes and provenance, in one transaction (one
   * journal line, one fsync). For each, false (and nothing stored) when its sample has a manual
   * label by now.
   */
  recordJudgeVerdicts(
    verdicts: readonly { sample: { sessionId: string; responseTurn: number }; verdict: JudgeVerdict }[],
    provenance: VerdictProvenance,
  ): boolean[];
  /**
   * The samples a run of `method` (default combine) learns from: per session, those with
   * signal for the method (±1 for rl, a hint for opd, either for combine); a session with
   * samples but none with signal keeps its first sample, flagged (docs/design.md
   * §At-least-one). A hint counts when the user typed it, or when a judge's passes the filter.
   * Samples of held-out sessions are never among them (see split()).
   */
  trainingSamples(options?: { method?: TrainMethod; rolloutsFor?: string; format?: SessionFormat; reactions?: boolean }): TrainingSample[];
  /** One sample as training would see it (context, reply, the hint training uses), selected by a run or not; null when there is none. */
  trainingSampleAt(sessionId: string, responseTurn: number): TrainingSample | null;
  /** Why a run of `method` on this database would learn nothing (what it needs, what there is), or null. */
  nothingToTrain(method: TrainMethod): string | null;
  /** The held-out split (docs/design.md §Evaluation): held-out samples never reach trainingSamples. */
  split(): SplitView;
  /** Holds sessions out (true), trains on them (false), or leaves them to the rule again (null). */
  setHeldOut(sessionIds: string[], heldOut: boolean | null): SplitView;
  /**
   * Every sample of the held-out sessions ('heldout') or of all sessions ('all'), whatever its
   * label, for evaluation; keptByAtLeastOne is false on each.
   */
  evaluationSamples(split: 'heldout' | 'all'): TrainingSample[];
  /** The lessons (docs/design.md §Lessons), or null when none are set. */
  lessons(): StoredLessons | null;
  /** Stores the lessons (null or blank text clears them); saved at once. */
  setLessons(lessons: StoredLessons | null): void;
  /** The hints lessons are distilled from (the sessions trained on), and how many held-out ones are left out. */
  lessonHints(): { hints: LessonHint[]; heldOut: number };
  /** Removes a session with its turns, samples and labels (and captured exchanges); false when there was none. */
  deleteSession(id: string): boolean;
  /** Removes sessions in one transaction; returns how many there were. */
  deleteSessions(ids: readonly string[]): number;
  /** Gives every sample of the sessions one manual reward (null clears it), in one transaction. */
  labelSessions(ids: readonly string[], reward: 1 | -1 | null): BulkLabelResult;
  contextWindow(): ContextWindowSetting;
  /** Changes the context window and recomputes every sample's context; labels stay. */
  setContextWindow(window: ContextWindowSetting): void;
  /**
   * Writes one export format: every session, held-out ones included (an export is a dataset, not
   * a training run), unless `leaveOutHeldOut` (a replay's record of what it sent).
   */
  exportJsonl(format: ExportFormat, outPath: string, options?: { leaveOutHeldOut?: boolean }): Promise<{ lines: number; path: string }>;
  /** The first lines of an export; `filter` as exportCounts'. */
  previewExport(format: ExportFormat, lines: number, filter?: ExportFilter): string[];
  /** How many lines each format would write, every session or (leaveOutHeldOut) the trained-on ones. */
  exportCounts(filter?: ExportFilter): ExportCounts;
  /** Writes a TRL hand-off folder (docs/design.md §Hand-off). */
  handoffTrl(options: TrlHandoffOptions): TrlHandoffResult;
  /** The requests a replay to OpenClaw-RL sends, session by session; held-out sessions only when included. */
  replayPlan(options?: { includeHeldOut?: boolean }): ReplayPlan;
  /** Saves pending changes now (they are otherwise saved shortly after each change). */
  flush(): void;
  close(): void;
}
