// The shapes of the workspace's data as the UI, the CLI and the API read them (sessions, samples,
// labels, the split, exports, the judge's candidates). Node-free. The Node-side facade that
// returns them, WorkspaceApi, is src-main/workspace/workspace-api.ts; src-main/workspace/
// workspace.ts implements it over the store, the importers, the pipeline and the exporters.
import type { JudgeInput, LabelSource, Reward, Role, SessionFormat, SourceFormat, ToolCall, TurnClass, Vote } from './types.js';
import type { CompositeScore } from './composite.js';
import type { OfferedTool } from './offered-tools.js';
import type { ReviewReason } from './review.js';
import type { SessionSortKey, SortOrder } from './sessions-api.js';

export type ExportFormat = 'samples' | 'openclaw' | 'kto' | 'sft' | 'dpo' | 'sdft';
export const EXPORT_FORMATS: readonly ExportFormat[] = ['samples', 'openclaw', 'kto', 'sft', 'dpo', 'sdft'];

/**
 * What each format needs before it writes a line, in the app's words: shown where an export
 * preview is empty. (The rules themselves are src-main/export/formats.ts's.)
 */
export const EXPORT_FORMAT_NEEDS: Readonly<Record<ExportFormat, string>> = {
  samples: 'The samples format writes every sample, a reply with the user or tool message that followed it: import some chats first.',
  openclaw: 'The openclaw format writes every sample, a reply with the user or tool message that followed it: import some chats first.',
  kto: 'KTO needs samples labelled +1 or −1: label some replies, or run a judge.',
  sft: 'SFT needs replies labelled +1, or replies with a repair: label or repair some replies.',
  dpo: 'DPO needs pairs: a regenerated reply whose text differs from the reply kept, or a repair written for a reply.',
  sdft: 'SDFT needs samples with a hint: run a judge with hints, or write a hint for a reply.',
};

export interface ImportSummary {
  sessions_added: number;
  sessions_updated: number;
  sessions_unchanged: number;
  turns: number;
  samples: number;
  warnings: string[];
  /** Each input's own result, in import order: a folder of exports lists every file found in it. */
  files: ImportFileResult[];
  /** The ids of the sessions this import added (the Sessions page marks them new). */
  added_ids: string[];
}

/**
 * One file's part of an import: `imported` (its counts), `skipped` (a file found in a folder
 * that is not a chat export: `reason` says why, the others still import), or `refused` (a link
 * or a non-regular file in a folder, or one too deep: not read).
 */
export interface ImportFileResult {
  path: string;
  outcome: 'imported' | 'skipped' | 'refused';
  format: SourceFormat | null;
  reason: string | null;
  sessions_added: number;
  sessions_updated: number;
  sessions_unchanged: number;
  turns: number;
  samples: number;
  warnings: number;
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
  source: SessionFormat;
  createdAt: number | null;
  turnCount: number;
  sampleCount: number;
  labeledCount: number;
  /** Why the session yields no sample, when it yields none. */
  noSampleReason: NoSampleReason | null;
  /** Whether the session is held out from training for evaluation, and why (docs/design.md §Evaluation). */
  split: SessionSplit;
}

/** Why a session is where it is in the held-out split (src-main/pipeline/split-rule.ts): the hash rule, added to reach the minimum, passed over as too large to hold out whole, or the user's choice. */
export type SplitReason = 'rule' | 'minimum' | 'too-large' | 'user';

export interface SessionSplit {
  heldOut: boolean;
  why: SplitReason;
}

/** The held-out split of a database (`hindsight split`, the Sessions page). */
export interface SplitView {
  /** The rule holds out about this percentage of the samples (sessions whose split value is below it, topped up to the minimum). */
  percent: number;
  /** Sessions with samples, and their samples. */
  sessions: number;
  samples: number;
  heldOut: { sessions: number; samples: number };
  /** The held-out sessions with samples, those too large to hold out whole, and every session the user placed, in id order. */
  listed: { id: string; title: string; samples: number; heldOut: boolean; why: SplitReason }[];
}

export interface SessionFilter {
  search?: string;
  source?: SessionFormat;
  labelStatus?: 'labeled' | 'unlabeled' | 'partial';
  hasSamples?: boolean;
  /** The column to sort by (default: created) and its direction (default: newest first for created, ascending for the others). Sessions without a date sort last either way. */
  sort?: SessionSortKey;
  order?: SortOrder;
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
  /** The judge's confidence in its reward, 0–1; null for labels judged before it was kept. */
  confidence: number | null;
  /** The judge's evidence (matched cues or a vote count); a manual edit keeps the judge's. */
  evidence: string[];
  repair: string | null;
  notes: string | null;
  updatedAt: number | null;
  /** When a person reviewed it (a manual label is reviewed when written); null = not yet. */
  reviewedAt: number | null;
  /** The composite judge's 0–100 score with its reasons (docs/design.md §Composite score); null otherwise. */
  composite: CompositeScore | null;
}

export interface SampleView {
  sessionId: string;
  responseTurn: number;
  feedbackTurn: number | null;
  nextStateRole: 'user' | 'tool' | null;
  /** The reply's text, and the tool calls it made (a reply may be only calls). */
  response: string;
  responseCalls: { name: string; arguments: string }[];
  feedback: string | null;
  label: LabelView;
}

export interface SessionDetail extends SessionSummary {
  turns: TurnView[];
  samples: SampleView[];
  /** The tools the conversation offered the model (./offered-tools.ts): name and description, in order. */
  tools: { name: string; description: string | null }[];
  /** Regenerated siblings kept beside the kept reply at `atTurn`. */
  alternatives: { atTurn: number; text: string }[];
}

export interface LabelPatch {
  reward?: Reward | null;
  hint?: string | null;
  repair?: string | null;
  notes?: string | null;
}

/** One label of the review queue (docs/design.md §Review), most uncertain first. */
export interface ReviewItem {
  sample: SampleView;
  sessionTitle: string;
  /** The last user message before the reply, for context. */
  prompt: string | null;
  uncertainty: number;
  reasons: ReviewReason[];
  /** The reasons in words ("split votes (+1 −1 +1)"). */
  reasonTexts: string[];
  /** What the heuristic says of this sample, when an LLM judge made the label. */
  heuristicReward: Reward | null;
}

export interface CheckReport {
  stats: Stats;
  /** Judge labels nobody reviewed that the review queue holds (docs/design.md §Review). */
  unreviewedUncertain: number;
  sessionsWithoutSamples: { id: string; title: string; reason: NoSampleReason }[];
  warnings: string[]; // imbalance warnings that matter for training
}

/** How many labels have each reward. */
export interface RewardCounts {
  good: number;
  bad: number;
  neutral: number;
}

export interface JudgeSummary {
  judged: number;
  /** The rewards of the labels it wrote: how many +1 (the reply was good), −1 (bad) and 0 (no signal). */
  rewards?: RewardCounts;
  skippedManual: number;
  /** Samples left alone because a higher-precedence label (an LLM judge's) is there. */
  skippedHigher?: number;
  /** Samples already judged by the same backend, model and prompt (incremental re-runs). */
  skippedUnchanged?: number;
  /** True when the run was cancelled; what was judged before is kept. */
  cancelled?: boolean;
}

/** A sample a judge can see (it has a next state), with the provenance of its current label. */
export interface JudgeCandidate {
  input: JudgeInput;
  label: { source: LabelSource | null; judgeBackend: string | null; judgeModel: string | null; promptVersion: string | null };
}

/** Who produced a verdict, as stored beside the label (docs/design.md §Judges: backend, model, prompt version). */
export interface VerdictProvenance {
  labelSource: LabelSource;
  backend: string;
  model: string | null;
  promptVersion: string;
}

/** A chat message as chat templates and TRL expect it (see src-main/pipeline/chat-messages.ts). */
export type TrainingMessage = {
  role: Role;
  content: string;
  tool_calls?: { id?: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
};

/**
 * One sample the trainer learns from. `reward` is 0 both for a neutral label and for an
 * unlabeled sample kept by the at-least-one rule (`keptByAtLeastOne`).
 */
export interface TrainingSample {
  sessionId: string;
  responseTurn: number;
  /** The (windowed) context before the reply. */
  messages: TrainingMessage[];
  /** The reply as it was given (the policy's tokens to score): its text and its tool calls. */
  response: TrainingMessage;
  /** The tools the conversation offered (./offered-tools.ts): the prompt is rendered with them. */
  tools?: OfferedTool[];
  reward: Reward;
  hint: string | null;
  /** The user's ideal reply, when they wrote one in the annotator. */
  repair: string | null;
  keptByAtLeastOne: boolean;
  /** What came next (the user's reaction or a tool's output), which the replay judge reads: evaluation, and on-policy training when asked for. */
  reaction?: { role: 'user' | 'tool'; text: string };
  /**
   * Live capture: the rollout the local model produced for this reply (prompt token ids,
   * generated token ids and their log-probs), attached only when asked for with the model
   * that produced it (`trainingSamples({ rolloutsFor })`). The trainer uses it as `old`
   * when the rendered context tokenises to the same prompt ids (src-main/train/batches.ts).
   */
  rollout?: { promptIds: number[]; tokens: number[]; logprobs: number[] };
}

/** The optional context window of docs/design.md §Samples and next states (leading system turns always stay). */
export interface ContextWindowSetting {
  lastTurns?: number;
  tokenBudget?: number;
}
