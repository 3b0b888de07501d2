/**
 * Running a judge over the workspace's samples — the one runner for every backend
 * (heuristic, local, openai) and every caller: `hindsight judge`, `hindsight demo`, the
 * app's Judge action and live capture.
 *
 * - Incremental: a sample is judged only when it is unlabelled, or its label came from
 *   the heuristic, another backend or model, or an older prompt version. A label made
 *   with hints also counts as current for a run without hints (same reward prompt).
 *   `force` re-judges everything but manual labels.
 * - Never touches manual labels (checked again just before each write: the user may
 *   label a sample while the judge is thinking). The heuristic never overwrites an LLM
 *   judge's label (a manual label outranks an LLM judge's, which outranks the heuristic's).
 * - Resumable: each verdict is written as soon as it is in, and the store saves on its
 *   coalesced schedule (at most ~2 s later) and at the end — so a killed run loses at most
 *   the last moments of work, and the next run skips everything already judged.
 * - Cancellable: an AbortSignal stops it; verdicts already in are kept, `cancelled: true`.
 * - Concurrent: up to `concurrency` samples at once (the backend bounds its own requests).
 * - Survives long samples: a sample whose judge prompt cannot fit the judge model's context
 *   (./prompt-fit.ts) is skipped and counted (`skippedTooLong`, with `judgeContext`).
 * - No single sample's failure stops a run: one that fails on its own (an HTTP 400, a garbage
 *   answer) is counted in `failed` with the first reason, and the run goes on. The run stops,
 *   after saving what was judged, when the backend itself is down: a setup error (timeout,
 *   refused key, unknown model), an endpoint still failing after its retries, an unexpected
 *   crash, or the first MAX_FAILURES_BEFORE_ANY samples all failing (it refuses everything).
 * - Votes stopped by the token limit before their answer are counted (`cutOffVotes`).
 */
import type { JudgeInput, JudgeVerdict } from '../../src-shared/types.js';
import type { JudgeCandidate, JudgeSummary, VerdictProvenance } from '../../src-shared/views.js';
import { UserError } from '../../src-shared/types.js';
import type { JudgeRunSkips } from '../../src-shared/judge-notes.js';
import type { JudgeBackend } from './verdicts.js';
import { JudgeBackendDownError, JudgeSetupError } from './judge-errors.js';
import { PromptTooLongError } from './prompt-fit.js';
import { wasCutOff } from './parse.js';

/** Samples that may fail in a row, before any is judged, until the run counts the backend as down. */
export const MAX_FAILURES_BEFORE_ANY = 3;
/** The most verdicts stored in one transaction, and how long the first of a batch waits for others (ms). */
const VERDICT_BATCH = 256;
const VERDICT_BATCH_MS = 200;

/** Whether an error is the backend's (the run stops) rather than one sample's (skipped, counted). */
export function isBackendDown(err: unknown): boolean {
  return err instanceof JudgeSetupError || err instanceof JudgeBackendDownError || !(err instanceof UserError);
}

/**
 * What the runner needs of a workspace (src-main/workspace/workspace-api.ts, which has these
 * three): the candidates, a way to store a verdict, and a save. Live capture passes a view
 * limited to its own sessions.
 */
export interface JudgeTarget {
  /** Every sample that has a next state, in stable order, with its label's provenance. */
  judgeCandidates(): JudgeCandidate[];
  /** Stores verdicts in one transaction; for each, false (and nothing stored) when its sample has a manual label by now. */
  recordJudgeVerdicts(verdicts: readonly { sample: { sessionId: string; responseTurn: number }; verdict: JudgeVerdict }[], provenance: VerdictProvenance): boolean[];
  /** Saves pending changes now. */
  flush(): void;
}

export interface JudgeProgress {
  /** Samples handled so far (judged or skipped) of `total` with a next state. */
  done: number;
  total: number;
  judged: number;
  elapsedMs: number;
}

export interface JudgeRunOptions {
  hints: boolean;
  /** Votes per sample (default 3). */
  votes?: number;
  force?: boolean;
  /** Samples judged at once (default 1). */
  concurrency?: number;
  signal?: AbortSignal;
  onProgress?: (progress: JudgeProgress) => void;
}

export interface JudgeRunSummary extends Required<JudgeSummary>, JudgeRunSkips {
  backend: string;
  model: string | null;
  promptVersion: string;
  votes: number;
  elapsedMs: number;
  /** Mean wall time per judged sample (0 when none). */
  msPerSample: number;
}

/** The prompt version a run's labels get; LLM judges know theirs, the heuristic appends '+hints'. */
export function runPromptVersion(backend: JudgeBackend, hints: boolean): string {
  const own = (backend as { promptVersionFor?: (hints: boolean) => string }).promptVersionFor;
  return own ? own.call(backend, hints) : backend.provenance.promptVersion + (hints ? '+hints' : '');
}

type Decision = 'judge' | 'manual' | 'higher' | 'unchanged';

/** Whether a run judges a sample with this label, or why it leaves the label alone. */
export function decide(label: JudgeCandidate['label'], backend: JudgeBackend, promptVersion: string, hints: boolean, force: boolean): Decision {
  if (label.source === 'manual') return 'manual';
  if (backend.labelSource === 'heuristic' && label.source?.startsWith('judge:')) return 'higher';
  if (force) return 'judge';
  const sameJudge = label.source === backend.labelSource && label.judgeBackend === backend.provenance.backend && label.judgeModel === backend.provenance.model;
  if (!sameJudge || label.promptVersion === null) return 'judge';
  if (label.promptVersion === promptVersion) return 'unchanged';
  // A label judged with hints carries a reward from the same reward prompt.
  if (!hints && label.promptVersion.startsWith(promptVersion + '+')) return 'unchanged';
  return 'judge';
}

function isAbort(err: unknown, signal?: AbortSignal): boolean {
  return !!signal?.aborted || (err as { name?: string })?.name === 'AbortError';
}

export async function runJudge(workspace: JudgeTarget, backend: JudgeBackend, options: JudgeRunOptions): Promise<JudgeRunSummary> {
  const started = Date.now();
  const votes = options.votes ?? 3;
  const promptVersion = runPromptVersion(backend, options.hints);
  const provenance = { labelSource: backend.labelSource, backend: backend.provenance.backend, model: backend.provenance.model, promptVersion };
  const summary: JudgeRunSummary = {
    judged: 0, rewards: { good: 0, bad: 0, neutral: 0 }, skippedManual: 0, skippedHigher: 0, skippedUnchanged: 0, cancelled: false,
    skippedTooLong: 0, judgeContext: null, failed: 0, failedReason: null, cutOffVotes: 0, weightsNote: backend.weightsNote ?? null,
    backend: backend.provenance.backend, model: backend.provenance.model, promptVersion, votes, elapsedMs: 0, msPerSample: 0,
  };

  const candidates = workspace.judgeCandidates();
  const total = candidates.length;
  const queue: JudgeCandidate[] = [];
  for (const c of candidates) {
    const decision = decide(c.label, backend, promptVersion, options.hints, options.force ?? false);
    if (decision === 'manual') summary.skippedManual++;
    else if (decision === 'higher') summary.skippedHigher++;
    else if (decision === 'unchanged') summary.skippedUnchanged++;
    else queue.push(c);
  }
  let done = total - queue.length;
  const report = () => options.onProgress?.({ done, total, judged: summary.judged, elapsedMs: Date.now() - started });
  report();

  // Verdicts are stored in batches, each one transaction: one journal line and one fsync where a
  // verdict each cost 9,000 fsyncs for the heuristic over 9,000 samples. A batch closes at
  // VERDICT_BATCH verdicts or VERDICT_BATCH_MS after its first; a kill loses at most that much,
  // which the next run judges again.
  let pending: { input: JudgeInput; verdict: JudgeVerdict }[] = [];
  let timer: ReturnType<typeof setTimeout> | null = null;
  const commit = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (!pending.length) return;
    const batch = pending;
    pending = [];
    const stored = workspace.recordJudgeVerdicts(batch.map(({ input, verdict }) => ({ sample: input, verdict })), provenance);
    batch.forEach(({ verdict }, i) => {
      if (!stored[i]) summary.skippedManual++;
      else {
        summary.judged++;
        summary.rewards[verdict.reward === 1 ? 'good' : verdict.reward === -1 ? 'bad' : 'neutral']++;
      }
    });
    report();
  };

  let failure: unknown = null;
  let next = 0;
  const worker = async () => {
    while (failure === null && next < queue.length) {
      if (options.signal?.aborted) {
        summary.cancelled = true;
        return;
      }
      const { input } = queue[next++]!;
      try {
        const verdict = await backend.judge(input, { hints: options.hints, votes, signal: options.signal });
        if (options.signal?.aborted) {
          summary.cancelled = true; // a verdict that lands after Cancel is not stored
          return;
        }
        summary.cutOffVotes += verdict.votes.filter((v) => (v.reward === undefined && wasCutOff(v.raw)) || (v.hintRaw !== undefined && v.hintAnswer === undefined && wasCutOff(v.hintRaw))).length;
        pending.push({ input, verdict });
        if (pending.length >= VERDICT_BATCH) commit();
        else timer ??= setTimeout(commit, VERDICT_BATCH_MS);
      } catch (err) {
        if (isAbort(err, options.signal)) {
          summary.cancelled = true;
          return;
        }
        if (err instanceof PromptTooLongError) {
          summary.skippedTooLong++;
          summary.judgeContext = err.contextTokens;
        } else if (isBackendDown(err) || (summary.judged + pending.length === 0 && summary.failed + 1 >= MAX_FAILURES_BEFORE_ANY)) {
          failure ??= err;
          return;
        } else {
          summary.failed++;
          summary.failedReason ??= (err as Error).message;
        }
      }
      done++;
      report();
    }
  };
  try {
    const lanes = Math.max(1, Math.min(options.concurrency ?? 1, queue.length || 1));
    await Promise.all(Array.from({ length: lanes }, worker));
  } finally {
    try {
      commit(); // what was judged before a failure or Cancel is kept
    } finally {
      workspace.flush();
    }
  }
  if (failure !== null) throw failure;
  summary.elapsedMs = Date.now() - started;
  summary.msPerSample = summary.judged ? Math.round(summary.elapsedMs / summary.judged) : 0;
  return summary;
}
