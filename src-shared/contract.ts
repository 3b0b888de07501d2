// THE API contract of Hindsight: every call the UI can make, with its input (checked at run
// time) and its output type, and every event the back end pushes. Three parties obey it:
//   - the Electron preload exposes it as `window.api`, one method per call (src-main/app/);
//   - `hindsight serve` exposes it as `POST /api/<call>` with JSON, events over SSE
//     (`GET /api/events`) (src-main/api/http-server.ts);
//   - the renderer's one client speaks to either (src-renderer/src/api/client.ts).
// Both transports validate every input with `validateCall` before the service sees it.
//
// This file must stay free of Node and Electron imports: the sandboxed preload and the
// browser bundle import it.
import type {
  CheckReport,
  ExportFormat,
  ImportSummary,
  JudgeSummary,
  LabelView,
  ReviewItem,
  SessionDetail,
  SampleView,
  SessionSummary,
  SplitView,
  Stats,
  TurnView,
} from './views.js';
import { SESSION_FORMATS, SOURCE_FORMATS, type SessionFormat } from './types.js';
import { OPENCLAW_METHODS, TRL_METHODS, type ReplayProgress, type TrlHandoffResult } from './handoff.js';
import { tokenViewInput, type TokenViewProgress, type TokenViewResult } from './token-view.js';
import { evalStartInput, type EvalState } from './eval-api.js';
import { CHAT_CALLS, type ChatState } from './chat-api.js';
import { MODEL_CALLS } from './models-api.js';
import { CAPTURE_CALLS, type CaptureStatus } from './capture-api.js';
import { EXPORT_CALLS } from './export-api.js';
import { SESSION_BULK_CALLS, SESSION_SORT_KEYS, SORT_ORDERS } from './sessions-api.js';
import { MODEL_EXPORT_CALLS } from './model-export-api.js';
import { TRAIN_MEMORY_CALLS } from './train-memory-api.js';
import { LESSONS_CALLS } from './lessons.js';
import { call, returns, type Returns } from './call-spec.js';
import { onPolicyInput } from './on-policy-api.js';
import { ROLLOUT_CALLS } from './rollouts-api.js';
import type { Availability, TrainEval, TrainingState, TrainProgress, TrainRunInfo } from './training-api.js';
import { bounded, LORA_TARGETS, LOSS_AGGS, OPTIMIZER_KINDS, PRECISIONS, QUANTIZE_CHOICES, RECOMPUTE_MODES, TRAIN_DEVICES, TRAIN_METHODS, type LoraTarget, type Precision, type Quantize, type TrainDevice, type TrainMethod } from './training.js';
import { array, boolean, integer, nullable, object, oneOf, optional, string, ValidationError, variants, type Infer } from './validate.js';

export { ValidationError };
export type { CallSpec, Returns } from './call-spec.js';
export * from './api-errors.js';
export type * from './training-api.js';
export type { CaptureKeyView, CaptureStatus } from './capture-api.js';
export type { ExportCounts, ExportFilter } from './export-api.js';
export type { BulkLabelResult, SessionSortKey, SortOrder } from './sessions-api.js';
// Training's vocabulary is defined in ./training.ts; the contract's users get it here too.
export { LORA_TARGETS, TRAIN_DEVICES, TRAIN_METHODS };
export type { LoraTarget, Quantize, TrainDevice, TrainMethod };
export type { TokenView, TokenViewMode, TokenViewProgress, TokenViewResult, TokenViewToken } from './token-view.js';
export type { CheckReport, ExportFormat, ImportSummary, JudgeSummary, LabelView, ReviewItem, SampleView, SessionDetail, SessionSummary, SplitView, Stats, TurnView };

// ---------------------------------------------------------------------------------------
// Shared value types
// ---------------------------------------------------------------------------------------

export type JudgeBackend = 'heuristic' | 'local' | 'openai';
export const JUDGE_BACKENDS: readonly JudgeBackend[] = ['heuristic', 'local', 'openai'];

export interface AppInfo {
  version: string;
  /** Which transport the UI is on; the browser has no native dialogs. */
  transport: 'electron' | 'http';
  dbPath: string;
  settingsPath: string;
  sampleDataPath: string;
  defaultModelDir: string;
  defaultExportDir: string;
  /** Native file pickers and "open folder" exist only in the desktop app. */
  nativeDialogs: boolean;
  training: Availability;
  judges: Record<JudgeBackend, Availability>;
}

export interface Settings {
  judge: {
    backend: JudgeBackend;
    votes: number;
    hints: boolean;
    localModelDir: string;
    openaiBaseUrl: string;
    openaiModel: string;
    /** Never sent back to the UI: only whether one is stored. */
    openaiApiKeySet: boolean;
    /** The OpenAI-compatible judge model's context in tokens (judge prompts are fitted to it); 0: unknown. */
    openaiContextTokens: number;
    /** LLM judges score 0–100 with reasons; ≥ compositePos → +1, ≤ compositeNeg → −1. */
    composite: boolean;
    compositePos: number;
    compositeNeg: number;
  };
  defaultModelDir: string;
  /** Live capture and its background loop (src-main/capture/). */
  capture: {
    enabled: boolean;
    /** '' = the local model answers; else requests are forwarded there. */
    upstreamBaseUrl: string;
    upstreamModel: string;
    upstreamApiKeySet: boolean;
    autoJudge: boolean;
    autoTrain: boolean;
    trainEvery: number;
    trainSteps: number;
    trainMethod: TrainMethod;
    trainQuantize: Quantize;
    /** The frozen base's precision in each background run; null: the device's default (docs/design.md §Precision). */
    trainPrecision: Precision | null;
  };
}

export type ChangeReason = 'import' | 'label' | 'judge' | 'database' | 'settings' | 'capture' | 'delete' | 'split';

// ---------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------

const NO_INPUT = object({});
const sessionId = string({ min: 1, max: 500 });
const path = string({ min: 1, max: 4096 });
const importFormat = optional(oneOf([...SOURCE_FORMATS, 'auto'] as const));
/** The largest file the UI may upload (base64 in JSON). Bigger exports go by path or the CLI. */
export const MAX_UPLOAD_BYTES = 200 * 1024 * 1024;

const sessionFilter = object({
  search: optional(string({ max: 500 })),
  source: optional(oneOf(SESSION_FORMATS)),
  labelStatus: optional(oneOf(['labeled', 'unlabeled', 'partial'] as const)),
  hasSamples: optional(boolean()),
  sort: optional(oneOf(SESSION_SORT_KEYS)),
  order: optional(oneOf(SORT_ORDERS)),
  offset: optional(integer({ min: 0 })),
  limit: optional(integer({ min: 0, max: 10_000 })),
});

const labelPatch = object({
  reward: optional(nullable(oneOf([1, -1, 0] as const))),
  hint: optional(nullable(string({ max: 20_000 }))),
  repair: optional(nullable(string({ max: 200_000 }))),
  notes: optional(nullable(string({ max: 20_000 }))),
});

const optionalText = (max: number) => optional(string({ max }));
const trlHandoff = object({
  baseModel: string({ min: 1, max: 1000 }),
  outDir: path,
  method: oneOf(TRL_METHODS),
  initAdapter: optional(path),
  gpus: integer({ min: 1, max: 4096 }),
  judgeUrl: optionalText(2000),
  judgeModel: optionalText(500),
  includeHeldOut: optional(boolean()),
  lossAgg: optional(oneOf(LOSS_AGGS)),
  opdTopK: optional(bounded('opdTopK')),
});
const replayStart = object({
  endpoint: string({ min: 1, max: 2000 }),
  apiKey: optionalText(2000),
  outDir: path,
  model: optionalText(500),
  maxTokens: optional(integer({ min: 1, max: 1_000_000 })),
  concurrency: integer({ min: 1, max: 256 }),
  paceMs: integer({ min: 0, max: 3_600_000 }),
  baseModel: optionalText(1000),
  method: oneOf(OPENCLAW_METHODS),
  judgeUrl: optionalText(2000),
  includeHeldOut: optional(boolean()),
  lossAgg: optional(oneOf(LOSS_AGGS)),
  opdTopK: optional(bounded('opdTopK')),
});

/** A run's Precision (docs/design.md §Precision), one rule for the Training page's runs and live capture's. */
const precisionChoice = oneOf(PRECISIONS);

/** trainStart's fields and their rules, which also check the settings the Training page kept in the browser. */
export const TRAIN_CONFIG_FIELDS = {
  modelDir: path,
  outDir: path,
  method: oneOf(TRAIN_METHODS),
  // The numbers' bounds are training's own (src-shared/training.ts TRAIN_BOUNDS), as the CLI's.
  steps: bounded('steps'),
  batchSize: bounded('batchSize'),
  lr: bounded('lr'),
  optimizer: oneOf(OPTIMIZER_KINDS),
  loraR: bounded('loraR'),
  loraAlpha: bounded('loraAlpha'),
  targets: array(oneOf(LORA_TARGETS), { min: 1, max: LORA_TARGETS.length }),
  device: oneOf(TRAIN_DEVICES),
  seed: bounded('seed'),
  checkpointEvery: bounded('saveEvery'),
  maxLength: optional(bounded('maxLength')),
  quantize: optional(oneOf(QUANTIZE_CHOICES)),
  precision: optional(precisionChoice),
  recompute: optional(oneOf(RECOMPUTE_MODES)),
  lossAgg: optional(oneOf(LOSS_AGGS)),
  opdTopK: optional(bounded('opdTopK')),
  microBatch: optional(bounded('microBatch')),
  ignoreMemory: optional(boolean()),
  onPolicy: optional(onPolicyInput),
};
const trainConfig = object(TRAIN_CONFIG_FIELDS);

/** The jobs `cancel` stops, by kind: a fine-tune is named by its run; the others run one at a time. */
export const CANCEL_JOBS = ['judge', 'tokenView', 'train', 'eval'] as const;
export type CancelJob = (typeof CANCEL_JOBS)[number];
const cancelInput = variants('job', {
  judge: object({ job: oneOf(['judge'] as const) }),
  tokenView: object({ job: oneOf(['tokenView'] as const) }),
  train: object({ job: oneOf(['train'] as const), runId: string({ min: 1, max: 100 }) }),
  eval: object({ job: oneOf(['eval'] as const) }),
} satisfies Record<CancelJob, unknown>);

export const CALLS = {
  appInfo: call('Where the database lives, what this build can do, and the transport.', NO_INPUT, returns<AppInfo>()),
  stats: call('Counts of sessions, turns, samples and labels.', NO_INPUT, returns<Stats>()),
  listSessions: call('Sessions matching a filter, with the total count.', sessionFilter, returns<{ total: number; sessions: SessionSummary[] }>()),
  sourceCounts: call('How many sessions each source format has.', NO_INPUT, returns<Record<SessionFormat, number>>()),
  getSession: call('One session with its turns, samples and labels.', object({ id: sessionId }), returns<SessionDetail>()),
  // Bulk labelling and deleting from the Sessions list (src-shared/sessions-api.ts).
  ...SESSION_BULK_CALLS,
  deleteSession: call(
    'Deletes a session with its turns, samples and labels; a captured one also leaves the capture log (rewritten without it).',
    object({ id: sessionId }),
    returns<{ deleted: boolean }>(),
  ),
  setLabel: call(
    'A manual label on one sample; always wins over judge and heuristic labels.',
    object({ sessionId, responseTurn: integer({ min: 0 }), patch: labelPatch }),
    returns<LabelView>(),
  ),
  importFiles: call('Imports export files or folders by path (on the machine that runs the back end).', object({ paths: array(path, { min: 1, max: 1000 }), format: importFormat }), returns<ImportSummary>()),
  importUpload: call(
    'Imports the content of a file the UI uploaded: written to a temporary file, imported, then removed.',
    // inFolder: the file is one of a folder the user chose; one that is not a chat export is skipped, not an error.
    object({ fileName: string({ min: 1, max: 1000 }), dataBase64: string({ max: Math.ceil(MAX_UPLOAD_BYTES / 3) * 4 }), format: importFormat, inFolder: optional(boolean()) }),
    returns<ImportSummary>(),
  ),
  loadSampleData: call('Imports the demo exports shipped in resources/samples.', NO_INPUT, returns<ImportSummary>()),
  // A judge run keeps the labels it gave; a fine-tune stops after its step, keeping a checkpoint; an evaluation keeps what it measured.
  cancel: call('Stops a running job of one kind (judge, tokenView, train with its runId, eval); `cancelled`: whether one was running.', cancelInput, returns<{ cancelled: boolean }>()),
  judgeRun: call(
    'Labels every sample with a judge; manual labels are never overwritten.',
    object({ backend: oneOf(JUDGE_BACKENDS), hints: boolean(), votes: optional(integer({ min: 1, max: 15 })) }),
    returns<JudgeSummary>(),
  ),
  tokenView: call(
    "A reply's tokens coloured by the hint's OPD advantage (teacher − student) or an adapter's change (adapter − base); progress as tokenview.progress.",
    tokenViewInput,
    returns<TokenViewResult>(),
  ),
  checks: call('The at-least-one report, the label distribution and imbalance warnings.', NO_INPUT, returns<CheckReport>()),
  reviewQueue: call(
    'The review queue: unreviewed judge labels, most uncertain first (split votes, weak evidence, judges disagreeing, no evidence).',
    object({ limit: optional(integer({ min: 1, max: 5000 })) }),
    returns<{ total: number; items: ReviewItem[] }>(),
  ),
  // Counts per format, preview and write, with one filter (src-shared/export-api.ts).
  ...EXPORT_CALLS,
  handoffTrl: call('Writes a TRL hand-off folder: datasets, train.py, accelerate configs, README (docs/design.md §Hand-off).', trlHandoff, returns<TrlHandoffResult>()),
  handoffReplayStart: call('Starts replaying the recorded sessions into an OpenClaw-RL server; the same folder resumes.', replayStart, returns<ReplayProgress>()),
  handoffReplayStatus: call('The running or last replay: turns answered, sessions done, its state.', NO_INPUT, returns<ReplayProgress>()),
  handoffReplayStop: call('Stops the replay after the turns in flight; starting it again resumes.', NO_INPUT, returns<ReplayProgress>()),
  defaultModelDir: call('The model folder preselected for training (the demo model).', NO_INPUT, returns<{ path: string; exists: boolean }>()),
  trainStatus: call('Whether the trainer is available, and the runs of this launch.', NO_INPUT, returns<TrainingState>()),
  trainStart: call('Starts a fine-tune; progress arrives as train.progress events.', trainConfig, returns<{ runId: string }>()),
  trainResume: call('Resumes a cancelled or failed run from its last checkpoint.', object({ runId: string({ min: 1, max: 100 }) }), returns<{ runId: string }>()),
  trainMetrics: call(
    'Every step and held-out evaluation recorded so far for a run (to redraw charts after a reload).',
    object({ runId: string({ min: 1, max: 100 }) }),
    returns<{ progress: TrainProgress[]; evals: TrainEval[] }>(),
  ),
  // The Rollouts view: the episodes of on-policy runs (src-shared/rollouts-api.ts).
  ...ROLLOUT_CALLS,
  split: call('The held-out split: which sessions are kept for evaluation, never trained on.', NO_INPUT, returns<SplitView>()),
  setHeldOut: call(
    'Holds sessions out for evaluation (true), trains on them (false), or leaves them to the rule again (null).',
    object({ sessionIds: array(sessionId, { min: 1, max: 10_000 }), heldOut: nullable(boolean()) }),
    returns<SplitView>(),
  ),
  evalStart: call('Evaluates the base model and adapters on the held-out split; progress as eval.progress (docs/design.md §Evaluation).', evalStartInput, returns<EvalState>()),
  evalStatus: call('The running or last evaluation, with its report.', NO_INPUT, returns<EvalState>()),
  ...CHAT_CALLS,
  // The models on this machine, for the model picker (src-shared/models-api.ts).
  ...MODEL_CALLS,
  // A finished run back into Ollama / llama.cpp (src-shared/model-export-api.ts).
  ...MODEL_EXPORT_CALLS,
  // The Training page's memory estimate: the model's shape and the host's memory (src-shared/train-memory-api.ts).
  ...TRAIN_MEMORY_CALLS,
  // Lessons without training: the hints as a system prompt (src-shared/lessons.ts).
  ...LESSONS_CALLS,
  // Live capture's status, rollback and the API key of its clients (src-shared/capture-api.ts).
  ...CAPTURE_CALLS,
  getSettings: call('Judge backends and the default model.', NO_INPUT, returns<Settings>()),
  updateSettings: call(
    'Changes some settings; an omitted field keeps its value.',
    object({
      judgeBackend: optional(oneOf(JUDGE_BACKENDS)),
      judgeVotes: optional(integer({ min: 1, max: 15 })),
      judgeHints: optional(boolean()),
      localModelDir: optional(string({ max: 4096 })),
      openaiBaseUrl: optional(string({ max: 2000 })),
      openaiModel: optional(string({ max: 500 })),
      openaiApiKey: optional(string({ max: 2000 })),
      openaiContextTokens: optional(integer({ min: 0, max: 10_000_000 })),
      judgeComposite: optional(boolean()),
      compositePos: optional(integer({ min: 0, max: 100 })),
      compositeNeg: optional(integer({ min: 0, max: 100 })),
      defaultModelDir: optional(string({ max: 4096 })),
      captureEnabled: optional(boolean()),
      captureUpstreamUrl: optional(string({ max: 2000 })),
      captureUpstreamModel: optional(string({ max: 500 })),
      captureUpstreamApiKey: optional(string({ max: 2000 })),
      captureAutoJudge: optional(boolean()),
      captureAutoTrain: optional(boolean()),
      captureTrainEvery: optional(integer({ min: 1, max: 100_000 })),
      captureTrainSteps: optional(integer({ min: 0, max: 100_000 })),
      captureTrainMethod: optional(oneOf(TRAIN_METHODS)),
      captureTrainQuantize: optional(oneOf(QUANTIZE_CHOICES)),
      // null: the device's default, as a Training-page run without a Precision.
      captureTrainPrecision: optional(nullable(precisionChoice)),
    }),
    returns<Settings>(),
  ),
  openDatabase: call('Switches to another database file (created when missing).', object({ path }), returns<AppInfo>()),
  pickImportFiles: call('Desktop only: the native open dialog for exports.', NO_INPUT, returns<{ paths: string[] }>()),
  pickSavePath: call('Desktop only: the native save dialog.', object({ defaultPath: string({ max: 4096 }) }), returns<{ path: string | null }>()),
  pickFolder: call('Desktop only: the native folder dialog.', object({ title: string({ max: 200 }) }), returns<{ path: string | null }>()),
  pickDatabase: call('Desktop only: the native dialog to choose a database file.', NO_INPUT, returns<{ path: string | null }>()),
  openPath: call('Desktop only: opens a folder in the file manager.', object({ path }), returns<{ opened: boolean }>()),
} as const;

export type CallName = keyof typeof CALLS;
export const CALL_NAMES = Object.keys(CALLS) as CallName[];
export type CallInput<K extends CallName> = Infer<(typeof CALLS)[K]['input']>;
export type CallOutput<K extends CallName> = (typeof CALLS)[K]['output'] extends Returns<infer O> ? O : never;

/** What the service implements: one async function per call. */
export type ApiHandlers = { [K in CallName]: (input: CallInput<K>) => Promise<CallOutput<K>> };

/** What the UI calls: the same, with the input optional where it has no required field. */
export type ApiMethods = {
  [K in CallName]: {} extends CallInput<K>
    ? (input?: CallInput<K>) => Promise<CallOutput<K>>
    : (input: CallInput<K>) => Promise<CallOutput<K>>;
};

export function isCallName(name: unknown): name is CallName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(CALLS, name);
}

/** Checks an untrusted call; throws a ValidationError naming the field. */
export function validateCall<K extends CallName>(name: K, input: unknown): CallInput<K> {
  return CALLS[name].input.parse(input ?? {}, '') as CallInput<K>;
}

// ---------------------------------------------------------------------------------------
// Events (main → UI)
// ---------------------------------------------------------------------------------------

/** Every event, declared once: its name and (a type only) its payload; ApiEvents and EVENT_NAMES are read off it. */
const EVENTS = {
  /** The data changed; views re-read what they show. */
  'workspace.changed': returns<{ reason: ChangeReason }>(),
  'judge.progress': returns<{ done: number; total: number }>(),
  'tokenview.progress': returns<TokenViewProgress>(),
  'train.progress': returns<TrainProgress>(),
  /** A held-out evaluation of a running fine-tune (docs/design.md §Evaluation). */
  'train.eval': returns<TrainEval>(),
  /** A run changed status (started, cancelled, finished with its adapter folder, failed). */
  'train.status': returns<TrainRunInfo>(),
  'eval.progress': returns<EvalState>(),
  /** The Chat page's turn: both replies as written so far. */
  'chat.progress': returns<ChatState>(),
  /** Live capture made samples: a reply got its next state (the views refresh). */
  'capture.sample': returns<{ sessionId: string; responseTurns: number[] }>(),
  /** Live capture's status changed (on/off, loop state, adapter swap). */
  'capture.status': returns<CaptureStatus>(),
  /** The desktop menu asks the UI to do something. */
  'app.command': returns<{ command: 'import' | 'export' | 'openDatabase' | 'settings' }>(),
} as const;

/** Each event's payload, by name. */
export type ApiEvents = { [E in keyof typeof EVENTS]: (typeof EVENTS)[E] extends Returns<infer P> ? P : never };
export type EventName = keyof ApiEvents;
export const EVENT_NAMES = Object.keys(EVENTS) as readonly EventName[];

export const isEventName = (name: unknown): name is EventName => typeof name === 'string' && (EVENT_NAMES as readonly string[]).includes(name);

export type EventListener<E extends EventName> = (payload: ApiEvents[E]) => void;

/** `window.api` and the browser client: the calls plus `on(event, listener)` → unsubscribe. */
export type HindsightApi = ApiMethods & {
  on<E extends EventName>(event: E, listener: EventListener<E>): () => void;
  /** The browser's event stream (re)opened, so what it sent meanwhile was lost: read again (IPC loses none, never calls it). */
  onStreamOpen(listener: () => void): () => void;
};
