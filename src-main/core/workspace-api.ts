// The data-side facade that the CLI, the app's API service and `serve` all call.
// src-main/core/workspace.ts implements it over the store, the importers, the pipeline and
// the exporters; this file fixes its shape so the UI and the CLI can be built against it.
import type { LabelSource, Reward, Role, SourceFormat, ToolCall, TurnClass, Vote } from './types.js';

export type ExportFormat = 'samples' | 'openclaw' | 'kto' | 'sft' | 'dpo' | 'sdft';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['samples', 'openclaw', 'kto', 'sft', 'dpo', 'sdft'];

export interface ImportSummary {
  sessions_added: number;
  sessions_updated: number;
  sessions_unchanged: number;
  turns: number;
  samples: number;
  warnings: string[];
}

export interface Stats {
  sessions: number;
  turns: number;
  samples: number;
  labeled: { pos: number; neg: number; neutral: number; unlabeled: number };
  sessions_without_samples: number;
}

export type NoSampleReason = 'no assistant turn' | 'no reaction after any reply' | 'everything side';

export interface SessionSummary {
  id: string;
  title: string;
  source: SourceFormat;
  createdAt: number | null;
  turnCount: number;
  sampleCount: number;
  labeledCount: number;
  /** Why the session yields no sample, when it yields none. */
  noSampleReason: NoSampleReason | null;
}

export interface SessionFilter {
  search?: string;
  source?: SourceFormat;
  labelStatus?: 'labeled' | 'unlabeled' | 'partial';
  hasSamples?: boolean;
  offset?: number;
  limit?: number;
}

export interface TurnView {
  index: number;
  role: Role;
  text: string;
  reasoning: string | null;
  toolCalls: ToolCall[];
  attachments: { kind: string; name?: string }[];
  timestamp: number | null;
  hidden: boolean;
  classification: TurnClass;
  sideReason: string | null;
}

export interface LabelView {
  reward: Reward | null; // null = unlabeled
  hint: string | null;
  source: LabelSource | null;
  votes: Vote[];
  repair: string | null;
  notes: string | null;
  updatedAt: number | null;
}

export interface SampleView {
  sessionId: string;
  responseTurn: number;
  feedbackTurn: number | null;
  nextStateRole: 'user' | 'tool' | null;
  response: string;
  feedback: string | null;
  label: LabelView;
}

export interface SessionDetail extends SessionSummary {
  turns: TurnView[];
  samples: SampleView[];
  /** Regenerated siblings kept beside the kept reply at `atTurn`. */
  alternatives: { atTurn: number; text: string }[];
}

export interface LabelPatch {
  reward?: Reward | null;
  hint?: string | null;
  repair?: string | null;
  notes?: string | null;
}

export interface CheckReport {
  stats: Stats;
  sessionsWithoutSamples: { id: string; title: string; reason: NoSampleReason }[];
  warnings: string[]; // imbalance warnings that matter for training
}

export interface HeuristicJudgeOptions {
  hints: boolean;
}

export interface JudgeSummary {
  judged: number;
  skippedManual: number;
}

export interface WorkspaceApi {
  readonly dbPath: string;
  importFiles(paths: string[], format?: SourceFormat | 'auto'): Promise<ImportSummary>;
  stats(): Stats;
  listSessions(filter?: SessionFilter): { total: number; sessions: SessionSummary[] };
  getSession(id: string): SessionDetail;
  listSamples(sessionId?: string): SampleView[];
  /** A manual label: always wins over judge and heuristic labels. */
  setLabel(sessionId: string, responseTurn: number, patch: LabelPatch): LabelView;
  judgeHeuristic(options: HeuristicJudgeOptions): JudgeSummary;
  checks(): CheckReport;
  exportJsonl(format: ExportFormat, outPath: string): Promise<{ lines: number; path: string }>;
  previewExport(format: ExportFormat, lines: number): string[];
  close(): void;
}
