/**
 * The background loop of live capture (opt-in in Settings, off by default): OpenClaw-RL's
 * "train by talking" on the desktop.
 *
 * 1. Auto-judge: captured samples without a label are judged with the backend chosen in
 *    Settings (the same runner as the Judge action: src-main/judge/runner.ts), limited to
 *    captured sessions. Manual labels are never touched.
 * 2. Auto-train: once N (default 16) captured samples have signal for the method (±1, a hint)
 *    and no background run has trained on them yet, a run starts (src-main/train/trainer-thread.ts,
 *    in its worker) on exactly those samples plus the ones the at-least-one rule keeps, from
 *    the adapter being served (a continuation, like OpenClaw-RL's policy updates), with their
 *    rollout log-probs as `old` where they match. Only samples with signal count as trained:
 *    a kept one teaches nothing, so it must not stop a later label from being trained on.
 *    The memory check the CLI and the Training page make (src-main/train/memory-check.ts)
 *    chooses its micro-batch; a run that cannot fit even one row at a time is not started,
 *    and the check's one line is the loop's last error (the capture status and log show it).
 * 3. Hot swap: the finished adapter is loaded beside the served model, then served; the one
 *    before stays on the rollback stack.
 *
 * Every step's outcome is in the capture log (`trained`, `adapter` records), so after a
 * restart the queue resumes where it was: unlabelled samples are judged, untrained labelled
 * ones still count towards N. One pass runs at a time; a kick during a pass runs another.
 * A failed run is not retried until more samples have come in (no hot loop on an error).
 */
import fs from 'node:fs';
import path from 'node:path';
import { appWording } from '../../src-shared/types.js';
import type { TrainingSample } from '../../src-shared/views.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { openJudgeBackend, type JudgeBackendSpec } from '../judge/backends.js';
import { runJudge, type JudgeTarget } from '../judge/runner.js';
import type { CaptureStatus } from '../../src-shared/contract.js';
import type { SettingsStore } from '../store/settings-file.js';
import { TRAIN_DEFAULTS, type TrainMethod } from '../../src-shared/training.js';
import type { CaptureSettingFields } from '../../src-shared/capture-defaults.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import { memoryRunOf } from '../../src-shared/train-memory.js';
import { type MemoryVerdict } from '../../src-shared/memory-verdict.js';
import { checkRunMemory, stepPlan } from '../train/memory-check.js';

export type LoopState = CaptureStatus['loop']['state'];

export interface LoopContext {
  workspace(): WorkspaceApi;
  settings(): SettingsStore;
  /** The model the endpoint serves, which is the one trained. */
  modelDir(): string;
  /** The adapter served now (null: the base model): each run continues from it. */
  servedAdapter(): string | null;
  /** `session/turn` keys already trained on by a background run. */
  trainedKeys(): ReadonlySet<string>;
  /** Where run folders go. */
  adapterRoot(): string;
  recordTrained(runId: string, keys: string[], adapterDir: string): void;
  /** Loads the adapter beside the served model, then serves it. */
  swapTo(adapterDir: string): Promise<void>;
  onState(): void;
  log(line: string): void;
}

export const sampleKey = (s: { sessionId: string; responseTurn: number }) => `${s.sessionId}/${s.responseTurn}`;

/**
 * The captured samples a background run of `method` trains on that no run has used yet: the
 * same choice, at-least-one rule included, as training from the database (docs/design.md
 * §At-least-one). Only those with signal count towards the threshold N (countWithSignal).
 */
export function untrainedSamples(ws: WorkspaceApi, modelDir: string, trained: ReadonlySet<string>, method: TrainMethod): TrainingSample[] {
  return ws.trainingSamples({ method, rolloutsFor: modelDir, format: 'capture' }).filter((s) => !trained.has(sampleKey(s)));
}

/** How many of these samples carry signal (kept samples never start a run on their own). */
export const countWithSignal = (samples: readonly TrainingSample[]) => samples.filter((s) => !s.keptByAtLeastOne).length;

/** What a background run takes from the capture settings besides its samples. */
type BackgroundRun = Pick<CaptureSettingFields, 'captureTrainMethod' | 'captureTrainQuantize' | 'captureTrainPrecision'>;

/**
 * The memory check of a background run (its settings are the trainer's defaults but for the
 * method, the base's storage and precision, and the batch): the micro-batch it goes with, or the
 * one line why it cannot start. No held-out evaluation runs beside it, so the forward pass is
 * counted only for a method that reads hints (its teacher).
 */
function backgroundRunMemory(modelDir: string, s: BackgroundRun, batchSize: number): Promise<MemoryVerdict> {
  const d = TRAIN_DEFAULTS;
  const method = s.captureTrainMethod;
  const config = {
    method, batchSize, loraR: d.loraR, targets: [...d.targets], optimizer: d.optimizer, device: d.device, quantize: s.captureTrainQuantize,
    ...(s.captureTrainPrecision ? { precision: s.captureTrainPrecision } : {}),
  };
  return checkRunMemory(modelDir, (shape) => ({ ...memoryRunOf(config, shape), teacher: methodRecord(method).uses.hint }), 'capture');
}

export class CaptureLoop {
  state: LoopState = 'idle';
  lastError: string | null = null;
  lastRun: CaptureStatus['loop']['lastRun'] = null;
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private failedAt = 0;
  private readonly abort = new AbortController();

  constructor(private readonly ctx: LoopContext) {}

  /** Something changed (a new sample, a label, a restart): run a pass soon. */
  kick(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runPasses().finally(() => (this.running = null));
  }

  /** Resolves when no pass is running (tests and shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private setState(state: LoopState): void {
    this.state = state;
    this.ctx.onState();
  }

  private async runPasses(): Promise<void> {
    // Let the request that kicked us finish first.
    await new Promise((r) => setImmediate(r));
    do {
      this.again = false;
      try {
        await this.pass();
      } catch (err) {
        // Shown in the app's live-capture panel; the judge is the one chosen in Settings.
        this.lastError = appWording(err).split('\n')[0] ?? String(err);
        this.ctx.log(`capture loop: ${this.lastError}`);
      } finally {
        if (!this.closed) this.setState('idle');
      }
    } while (this.again && !this.closed);
  }

  private async pass(): Promise<void> {
    const s = this.ctx.settings().raw;
    if (s.captureAutoJudge) await this.judge();
    if (this.closed || !s.captureAutoTrain) return;
    const samples = untrainedSamples(this.ctx.workspace(), this.ctx.modelDir(), this.ctx.trainedKeys(), s.captureTrainMethod);
    const ready = countWithSignal(samples);
    if (ready >= s.captureTrainEvery && ready > this.failedAt) await this.train(samples);
  }

  private judgeSpec(): JudgeBackendSpec {
    const s = this.ctx.settings().raw;
    const composite = this.ctx.settings().compositeThresholds();
    if (s.judgeBackend === 'local') return { backend: 'local', modelDir: s.localModelDir, composite };
    if (s.judgeBackend === 'openai') return { backend: 'openai', baseUrl: s.openaiBaseUrl, model: s.openaiModel, apiKey: s.openaiApiKey, composite, contextTokens: s.openaiContextTokens || undefined };
    return { backend: 'heuristic' };
  }

  private async judge(): Promise<void> {
    const ws = this.ctx.workspace();
    const captured = () => ws.judgeCandidates().filter((c) => c.input.sessionId.startsWith('capture:'));
    if (!captured().some((c) => c.label.source === null)) return;
    this.setState('judging');
    const s = this.ctx.settings().raw;
    const opened = await openJudgeBackend(this.judgeSpec());
    try {
      // The runner sees only the captured sessions.
      const view: JudgeTarget = { judgeCandidates: captured, recordJudgeVerdicts: ws.recordJudgeVerdicts.bind(ws), flush: ws.flush.bind(ws) };
      await runJudge(view, opened.judge, { hints: s.judgeHints, votes: s.judgeVotes, signal: this.abort.signal, concurrency: s.judgeBackend === 'openai' ? 4 : 1 });
    } finally {
      await opened.close();
    }
  }

  private async train(samples: TrainingSample[]): Promise<void> {
    const s = this.ctx.settings().raw;
    const modelDir = this.ctx.modelDir();
    const batchSize = Math.min(TRAIN_DEFAULTS.batchSize, samples.length);
    let memory: MemoryVerdict;
    try {
      memory = await backgroundRunMemory(modelDir, s, batchSize);
      if (memory.refusal) throw new Error(memory.refusal);
    } catch (err) {
      // Not retried until more samples come in, as a failed run is not.
      this.failedAt = countWithSignal(samples);
      throw err;
    }
    const initAdapter = this.ctx.servedAdapter();
    const runId = `run-${new Date().toISOString().replace(/[-:.TZ]/g, '').slice(0, 17)}`;
    const outDir = path.join(this.ctx.adapterRoot(), runId);
    fs.mkdirSync(this.ctx.adapterRoot(), { recursive: true });
    this.setState('training');
    this.ctx.log(`capture loop: training ${runId} on ${samples.length} new sample(s)${initAdapter ? ` from ${initAdapter}` : ''}`);
    const { startTraining } = await import('../train/trainer-thread.js');
    let result;
    try {
      result = await startTraining(
        {
          modelDir,
          outDir,
          method: s.captureTrainMethod,
          quantize: s.captureTrainQuantize,
          // Absent: the device's default, recorded as null like a Training-page run without a Precision.
          ...(s.captureTrainPrecision ? { precision: s.captureTrainPrecision } : {}),
          samples,
          ...(s.captureTrainSteps > 0 ? { steps: s.captureTrainSteps } : {}),
          batchSize,
          ...stepPlan(memory),
          ...(initAdapter ? { initAdapter } : {}),
          device: 'cpu',
          saveEvery: 0,
          seed: 0,
        },
        { signal: this.abort.signal },
      );
    } catch (err) {
      this.failedAt = countWithSignal(samples);
      throw new Error(`background training failed: ${(err as Error).message.split('\n')[0]}`);
    }
    if (result.status !== 'finished' || this.closed) return;
    this.failedAt = 0;
    const keys = samples.filter((x) => !x.keptByAtLeastOne).map(sampleKey);
    this.ctx.recordTrained(runId, keys, result.adapterDir);
    this.lastRun = { runId, adapterDir: result.adapterDir, samples: keys.length, finishedAt: Date.now() };
    this.setState('swapping');
    await this.ctx.swapTo(result.adapterDir);
    this.lastError = null;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort.abort();
    await this.idle().catch(() => {});
  }
}
