// The app's side of fine-tuning: run bookkeeping, events, and the adapter from the API's
// TrainConfig to the trainer (src-main/train/trainer-thread.ts, which hosts it in a worker thread). The
// page draws `train.progress` events and reacts to `train.status`.
//
// RUNS OUTLIVE THE APP: each database's runs are listed in `<db>.training-runs.json` beside
// it, and a run's step history is its own `trainer_log.jsonl`, re-read on demand. A run that
// was still going when the app closed comes back as cancelled (resumable from its last
// checkpoint) or, without a checkpoint, as failed with the reason.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { appWording, UserError } from '../../src-shared/types.js';
import { writeFileAtomicSync } from '../store/atomic-file.js';
import { trainingRunsPathFor } from '../store/db-companions.js';
import { LOG_FILE, readEvalLog, readLog, type EvalLogLine } from '../train/trainer-log.js';
import { holdsRun } from '../train/run-folder.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import type { Availability, TrainConfig, TrainEval, TrainProgress, TrainRunInfo, TrainingState } from '../../src-shared/contract.js';
import type { EventHub } from '../workspace/event-hub.js';
import { overLengthNote } from '../../src-shared/training.js';
import type { OnPolicySettings } from '../../src-shared/on-policy-api.js';
import type { StepPlan, TrainerEvent, TrainerOptions } from '../train/trainer.js';
import type { OnPolicyTrainerOptions } from '../onpolicy/options.js';
import { isModelPath } from '../model/model-path.js';
import { checkConfigMemory, resumedStepPlan, stepPlan } from '../train/memory-check.js';

/** One fine-tune as the engine sees it. */
export interface TrainJob {
  runId: string;
  config: TrainConfig;
  /** The labelled samples come from here (and the database file, for a worker thread). */
  workspace: WorkspaceApi;
  dbPath: string;
  /** True when continuing from the last checkpoint in `config.outDir` (optimizer state restored). */
  resume: boolean;
  /** How the step runs: rows per pass and whether it recomputes (the memory check's choice, or the page's Micro-batch); absent: the trainer's defaults. */
  plan?: StepPlan;
  /** Aborted by Cancel: stop after the current step and keep a checkpoint. */
  signal: AbortSignal;
  onProgress(progress: Omit<TrainProgress, 'runId'>): void;
  /** Reports the execution provider that actually runs, e.g. "CPUExecutionProvider". */
  onExecutionProvider(name: string): void;
  /** What the trainer is doing before and between steps ("compiling the training graph…"). */
  onPhase(message: string): void;
  /** A held-out evaluation (at the start, every few steps, at the end). */
  onEval(line: EvalLogLine): void;
  /** What the run leaves out ("3 samples over 2,048 tokens skipped; …"), shown for the whole run. */
  onNotice?(message: string): void;
}

export interface TrainingEngine {
  /** Runs to the end (or to the abort) and resolves with the PEFT adapter folder. */
  run(job: TrainJob): Promise<{ adapterDir: string; status: 'finished' | 'cancelled' }>;
}

/** The trainer's events as the job's callbacks (the offline and the on-policy trainer send the same ones). */
function forward(job: TrainJob): (event: TrainerEvent) => void {
  return (event) => {
    if (event.type === 'step') {
      const { execution_provider: _ep, epoch: _epoch, tokens: _tokens, ...log } = event.log;
      job.onProgress(log);
    } else if (event.type === 'eval') job.onEval(event.log);
    else if (event.type === 'executionProvider') job.onExecutionProvider(event.name);
    else if (event.type === 'overLength') job.onNotice?.(overLengthNote(event.count, event.maxLength, event.positions, 'app'));
    else job.onPhase(event.message);
  };
}

/** The options every run takes from the page's settings. */
function commonOptions(job: TrainJob): TrainerOptions {
  const { config } = job;
  return {
    modelDir: config.modelDir,
    outDir: config.outDir,
    method: config.method,
    steps: config.steps,
    batchSize: config.batchSize,
    lr: config.lr,
    optimizer: config.optimizer,
    loraR: config.loraR,
    loraAlpha: config.loraAlpha,
    targets: config.targets,
    seed: config.seed,
    device: config.device,
    saveEvery: config.checkpointEvery,
    ...(config.maxLength ? { maxLength: config.maxLength } : {}),
    ...(config.quantize ? { quantize: config.quantize } : {}), ...(config.precision ? { precision: config.precision } : {}), ...(config.recompute ? { recompute: config.recompute } : {}),
    ...(config.lossAgg ? { lossAgg: config.lossAgg } : {}), ...(config.opdTopK !== undefined ? { opdTopK: config.opdTopK } : {}),
    ...job.plan,
    // A resumed run reads its rows (or contexts) and settings back from its own folder; both
    // check them against, and evaluate, the held-out split (docs/design.md §Evaluation).
    ...(job.resume ? { resume: config.outDir } : {}),
    heldOut: { sessionIds: job.workspace.split().listed.filter((s) => s.heldOut).map((s) => s.id), samples: job.workspace.evaluationSamples('heldout') },
  };
}

/**
 * An on-policy run's options from the page's On-policy settings (docs/design.md §On-policy
 * training): the PPO settings apply to the run's batches, the rest to its rollouts. Without a
 * task file the contexts are the database's samples, with what came next after each (for the
 * replay judge) and the rollouts captured live from this model.
 */
function onPolicyOptions(job: TrainJob, s: OnPolicySettings): OnPolicyTrainerOptions {
  const { config } = job;
  const fromDatabase = !job.resume && s.taskFile === undefined;
  return {
    ...commonOptions(job),
    advantage: s.advantage, grpoStd: s.grpoStd, normalizeAdvantages: s.normalizeAdvantages, ppoEpochs: s.ppoEpochs,
    onPolicy: { rollouts: s.rollouts, contextsPerStep: s.contextsPerStep, maxTurns: s.maxTurns, maxTokens: s.maxTokens, ...(s.taskFile !== undefined ? { taskFile: s.taskFile } : {}) },
    dbPath: job.dbPath,
    ...(fromDatabase ? { samples: job.workspace.trainingSamples({ method: config.method, rolloutsFor: config.modelDir, reactions: true }) } : {}),
  };
}

/** The trainers behind the TrainingEngine seam, each loaded on the first fine-tune that needs it. */
export const trainerEngine: TrainingEngine = {
  async run(job) {
    const { config } = job;
    if (config.onPolicy) {
      const { startOnPolicyTraining } = await import('../onpolicy/onpolicy-thread.js');
      const result = await startOnPolicyTraining(onPolicyOptions(job, config.onPolicy), { signal: job.signal, onEvent: forward(job) });
      return { adapterDir: result.adapterDir, status: result.status };
    }
    const { startTraining } = await import('../train/trainer-thread.js');
    const options = { ...commonOptions(job), ...(job.resume ? {} : { samples: job.workspace.trainingSamples({ method: config.method }) }) };
    const result = await startTraining(options, { signal: job.signal, onEvent: forward(job) });
    return { adapterDir: result.adapterDir, status: result.status };
  },
};

interface Run {
  info: TrainRunInfo;
  /** Null until asked for: a listed run's history is read from its trainer_log.jsonl. */
  history: TrainProgress[] | null;
  abort: AbortController;
  /** The runs file of the database the run was started on. */
  file: string;
}

/** The runs of a database, beside it (kept small: the newest MAX_LISTED_RUNS). */
export function runsFileFor(dbPath: string): string {
  return trainingRunsPathFor(dbPath);
}
const MAX_LISTED_RUNS = 50;

/** The step of the checkpoint a resume would start from (train/run-checkpoint.ts's latest.json), or null. */
function checkpointStep(outDir: string): number | null {
  try {
    const latest = JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', 'latest.json'), 'utf8')) as { step?: unknown };
    return Number.isInteger(latest.step) ? (latest.step as number) : null;
  } catch {
    return null;
  }
}

/**
 * The history of a run from its trainer_log.jsonl, as the trainer's events carried it. An
 * unfinished run's history ends at its checkpoint: the steps after it are redone on resume.
 */
function historyFromLog(info: TrainRunInfo): TrainProgress[] {
  const upTo = info.status === 'finished' ? Infinity : (checkpointStep(info.config.outDir) ?? 0);
  return readLog(path.join(info.config.outDir, LOG_FILE))
    .filter((line) => line.step <= upTo)
    .map(({ execution_provider: _ep, epoch: _epoch, tokens: _tokens, ...line }) => ({ ...line, runId: info.runId }));
}

/** A run listed as going when the app closed: its worker died with the app. */
function interrupted(info: TrainRunInfo): TrainRunInfo {
  const step = checkpointStep(info.config.outDir);
  const base = { ...info, phase: null, adapterDir: null, lastProgress: null };
  if (step === null) return { ...base, status: 'failed', error: 'Interrupted: the app closed before the run wrote its first checkpoint; start it again.' };
  return { ...base, status: 'cancelled', error: `Interrupted: the app closed during the run; resume continues from the checkpoint at step ${step}.` };
}

export class TrainingService {
  private runs = new Map<string, Run>();
  /** The runs file whose runs `runs` holds (besides runs still going on another database). */
  private listed: string | null = null;

  constructor(
    private readonly events: EventHub,
    private readonly workspace: () => WorkspaceApi,
    private readonly engine: TrainingEngine = trainerEngine,
  ) {}

  /** The trainer is part of every build; the field stays in the contract for the page's sake. */
  availability(): Availability {
    return { available: true, reason: null };
  }

  async state(): Promise<TrainingState> {
    this.sync();
    return { engine: this.availability(), runs: [...this.runs.values()].map((r) => r.info) };
  }

  metrics(runId: string): TrainProgress[] {
    return this.historyOf(this.getRun(runId));
  }

  /** The held-out evaluations of a run so far, from its trainer_log.jsonl. */
  evaluations(runId: string): TrainEval[] {
    const { info } = this.getRun(runId);
    return readEvalLog(path.join(info.config.outDir, LOG_FILE)).map((line) => ({ ...line, runId }));
  }

  private historyOf(run: Run): TrainProgress[] {
    run.history ??= historyFromLog(run.info);
    return run.history;
  }

  /** Lists the open database's runs (after a restart, or a switch to another database). */
  private sync(): void {
    const file = runsFileFor(this.workspace().dbPath);
    if (file === this.listed) return;
    this.listed = file;
    const active = [...this.runs.values()].filter((r) => r.info.status === 'running' || r.info.status === 'cancelling');
    this.runs = new Map();
    for (const info of readRunsFile(file)) {
      const live = info.status === 'running' || info.status === 'cancelling';
      this.runs.set(info.runId, { info: live ? interrupted(info) : info, history: null, abort: new AbortController(), file });
    }
    for (const run of active) this.runs.set(run.info.runId, run);
  }

  /** Writes the runs of one database; a failure to write is reported, never fatal to the run. */
  private persist(file: string): void {
    const infos = [...this.runs.values()].filter((r) => r.file === file).map((r) => r.info).slice(-MAX_LISTED_RUNS);
    try {
      writeFileAtomicSync(file, Buffer.from(JSON.stringify({ format: 1, runs: infos }, null, 1) + '\n', 'utf8'));
    } catch (err) {
      process.stderr.write(`hindsight: could not record the training runs in ${file}: ${(err as Error).message}\n`);
    }
  }

  async start(config: TrainConfig): Promise<{ runId: string }> {
    this.sync();
    if ([...this.runs.values()].some((r) => r.info.status === 'running' || r.info.status === 'cancelling')) {
      throw new UserError('A fine-tune is already running; cancel it or wait for it to finish.');
    }
    checkModelDir(config.modelDir);
    checkOutDir(config.outDir);
    if (config.onPolicy?.taskFile !== undefined) checkTaskFile(config.onPolicy.taskFile);
    // The trainer's own rules on the method, the estimator and the task file, checked before a
    // run is listed (the page has no replay judge); a SurfaceError says them in the page's words.
    if (config.opdTopK) (await import('../train/run-settings.js')).checkTopKForMethod(config.opdTopK, config.method, config.onPolicy !== undefined);
    if (config.onPolicy) {
      // Loaded here, as the trainers are, so the app does not load the training code until asked to train.
      const [{ checkAdvantageForMethod }, { checkOptionsSignal }] = await Promise.all([import('../train/run-settings.js'), import('../onpolicy/options.js')]);
      checkAdvantageForMethod(config.onPolicy.advantage, config.method);
      checkOptionsSignal(config.method, { taskFile: config.onPolicy.taskFile });
    }
    // Refused here, before any run is listed, so the page shows why instead of a run that
    // "finishes" having learnt nothing (docs/design.md §At-least-one). A task file brings its
    // own contexts and rewards, so an on-policy run with one needs no labelled sample.
    const nothing = config.onPolicy?.taskFile === undefined ? this.workspace().nothingToTrain(config.method) : null;
    if (nothing) throw new UserError(nothing);
    // The memory estimate (src-shared/train-memory.ts), as the page shows it: it chooses the
    // micro-batch, and a run that cannot fit even one row at a time is refused with the page's
    // line, unless it was asked to start anyway.
    const memory = await checkConfigMemory(config);
    if (memory.refusal && !config.ignoreMemory) throw new UserError(memory.refusal);
    const runId = crypto.randomBytes(6).toString('hex');
    this.launch(this.engine, runId, config, false, stepPlan(memory));
    return { runId };
  }

  async resume(runId: string): Promise<{ runId: string }> {
    const run = this.getRun(runId);
    if (run.info.status === 'running' || run.info.status === 'cancelling') throw new UserError(`Run ${runId} is still running.`);
    if (run.info.status === 'finished') throw new UserError(`Run ${runId} has finished; start a new fine-tune instead.`);
    if (checkpointStep(run.info.config.outDir) === null) {
      throw new UserError(`Run ${runId} has no checkpoint in ${run.info.config.outDir} to resume from; start a new fine-tune instead.`);
    }
    // How the step runs is no part of the math: a resume chooses it for the memory the machine has now.
    this.launch(this.engine, runId, run.info.config, true, await resumedStepPlan(run.info.config), this.historyOf(run));
    return { runId };
  }

  cancel(runId: string): { cancelled: boolean } {
    const run = this.getRun(runId);
    if (run.info.status !== 'running') return { cancelled: false };
    run.abort.abort();
    this.update(run, { status: 'cancelling' });
    return { cancelled: true };
  }

  /**
   * The app is closing: a running fine-tune stops after its current step, keeps a checkpoint
   * and is listed as cancelled, so it can be resumed at the next launch. (The trainer's worker
   * keeps the process alive for that one step.)
   */
  close(): void {
    for (const run of this.runs.values()) {
      if (run.info.status !== 'running') continue;
      run.abort.abort();
      this.update(run, { status: 'cancelling' });
    }
  }

  private getRun(runId: string): Run {
    this.sync();
    const run = this.runs.get(runId);
    if (!run) throw new UserError(`No training run '${runId}' for this database.`);
    return run;
  }

  private update(run: Run, patch: Partial<TrainRunInfo>): void {
    run.info = { ...run.info, ...patch };
    this.events.emit('train.status', run.info);
    if (patch.status !== undefined) this.persist(run.file);
  }

  private launch(engine: TrainingEngine, runId: string, config: TrainConfig, resume: boolean, plan: StepPlan, history: TrainProgress[] = []): void {
    const run: Run = {
      info: { runId, status: 'running', config, startedAt: Date.now(), executionProvider: null, phase: null, lastProgress: history.at(-1) ?? null, adapterDir: null, error: null },
      history,
      abort: new AbortController(),
      file: runsFileFor(this.workspace().dbPath),
    };
    // A resumed run moves to the end of the list, as the newest.
    this.runs.delete(runId);
    this.runs.set(runId, run);
    this.events.emit('train.status', run.info);
    this.persist(run.file);
    const job: TrainJob = {
      runId,
      config,
      workspace: this.workspace(),
      dbPath: this.workspace().dbPath,
      resume,
      plan,
      signal: run.abort.signal,
      onProgress: (p) => {
        const progress = { ...p, runId };
        // A resume from an older checkpoint (after a failure) redoes steps: they replace
        // the ones recorded before, so the history stays one line per step.
        let history = this.historyOf(run);
        if ((history.at(-1)?.step ?? 0) >= progress.step) history = run.history = history.filter((h) => h.step < progress.step);
        history.push(progress);
        run.info = { ...run.info, lastProgress: progress };
        // A step ends whatever the trainer said it was doing before ("checkpoint at step 10").
        if (run.info.phase !== null) this.update(run, { phase: null });
        this.events.emit('train.progress', progress);
      },
      onExecutionProvider: (name) => this.update(run, { executionProvider: name }),
      onPhase: (message) => this.update(run, { phase: message }),
      onEval: (line) => this.events.emit('train.eval', { ...line, runId }),
      onNotice: (message) => this.update(run, { notice: message }),
    };
    engine.run(job).then(
      ({ adapterDir, status }) => this.update(run, { status, adapterDir, phase: null }),
      (err: Error) => this.update(run, { status: run.abort.signal.aborted ? 'cancelled' : 'failed', phase: null, error: failureText(err) }),
    );
  }
}

/** A failed run's reason as the Training page shows it: one line, in the page's own terms. */
function failureText(err: Error): string {
  // The trainer's CUDA error names the CLI's --device flag; the page has a Device field.
  return appWording(err).split('\n')[0] ?? String(err);
}

/** The runs listed in a runs file; a missing or unreadable file lists none (the logs stay on disk). */
function readRunsFile(file: string): TrainRunInfo[] {
  if (!fs.existsSync(file)) return [];
  try {
    const stored = JSON.parse(fs.readFileSync(file, 'utf8')) as { format?: unknown; runs?: unknown };
    if (stored.format !== 1 || !Array.isArray(stored.runs)) throw new Error('not a Hindsight runs file (format 1)');
    return (stored.runs as TrainRunInfo[]).filter((r) => typeof r?.runId === 'string' && typeof r.config?.outDir === 'string');
  } catch (err) {
    process.stderr.write(`hindsight: ignoring ${file}: ${(err as Error).message}\n`);
    return [];
  }
}

/**
 * A new run never writes into a folder that holds another run (the trainer refuses it too,
 * in the CLI's words); the page picks fresh folders, so this is a folder the user chose.
 */
function checkOutDir(dir: string): void {
  if (fs.existsSync(dir) && !fs.statSync(dir).isDirectory()) throw new UserError(`The output folder ${dir} is a file; choose a folder.`);
  if (holdsRun(dir)) {
    throw new UserError(`The output folder ${dir} already holds a training run; choose another folder (a run listed here continues with its Resume button).`);
  }
}

/** An on-policy task file must be a file the back end can read; say which path when it is not. */
function checkTaskFile(file: string): void {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (!stat) throw new UserError(`The task file ${file} does not exist (the path is on the machine that runs the trainer).`);
  if (!stat.isFile()) throw new UserError(`The task file ${file} is not a file; give a JSONL file with one task per line.`);
}

/** A model folder must at least have config.json (or the model be a .gguf file); say which folder when it does not. */
export function checkModelDir(dir: string): void {
  if (!isModelPath(dir)) {
    throw new UserError(`Model folder ${dir} has no config.json (expected a Hugging Face checkpoint folder).`);
  }
}
