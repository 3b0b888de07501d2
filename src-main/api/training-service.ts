// The app's side of fine-tuning: run bookkeeping, events and the plug for the trainer.
//
// THE PLUG: `loadTrainingEngine()` below adapts the trainer (src-main/train/run.ts, which
// hosts it in a worker thread) to `TrainingEngine`. While the compiled training step
// (src-main/train/step/) is missing from the build, it returns null and every start/resume
// answers a clear "not available in this build" error, which the Training page shows as it
// is. The page draws `train.progress` events and reacts to `train.status`.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UserError } from '../core/types.js';
import type { WorkspaceApi } from '../core/workspace-api.js';
import type { Availability, TrainConfig, TrainProgress, TrainRunInfo, TrainingState } from './contract.js';
import { UnavailableError } from './errors.js';
import type { EventHub } from './events.js';

/** One fine-tune as the engine sees it. */
export interface TrainJob {
  runId: string;
  config: TrainConfig;
  /** The labelled samples come from here (and the database file, for a worker thread). */
  workspace: WorkspaceApi;
  dbPath: string;
  /** True when continuing from the last checkpoint in `config.outDir` (optimizer state restored). */
  resume: boolean;
  /** Aborted by Cancel: stop after the current step and keep a checkpoint. */
  signal: AbortSignal;
  onProgress(progress: Omit<TrainProgress, 'runId'>): void;
  /** Reports the execution provider that actually runs, e.g. "CPUExecutionProvider". */
  onExecutionProvider(name: string): void;
  /** What the trainer is doing before and between steps ("compiling the training graph…"). */
  onPhase(message: string): void;
}

export interface TrainingEngine {
  /** Runs to the end (or to the abort) and resolves with the PEFT adapter folder. */
  run(job: TrainJob): Promise<{ adapterDir: string; status: 'finished' | 'cancelled' }>;
}

const NOT_AVAILABLE =
  'Training is not available in this build yet: the compiled training step (src-main/train/step/) has not landed. ' +
  'Labels, checks and exports work; the Fine-tune button starts working when it does.';

/**
 * The trainer needs its step module, which step-factory.ts loads by a computed path. Look
 * where it would be: beside the trainer in the sources, or in out/main/step/ in the
 * desktop build (electron.vite.config.ts makes it an entry there).
 */
function trainStepPresent(): boolean {
  const candidates = ['../train/step/index.ts', '../train/step/index.js', './step/index.js'];
  return candidates.some((rel) => fs.existsSync(fileURLToPath(new URL(rel, import.meta.url))));
}

/** Where the trainer plugs in. Returns null while it cannot run in this build. */
export async function loadTrainingEngine(): Promise<TrainingEngine | null> {
  if (!trainStepPresent()) return null;
  const { startTraining } = await import('../train/run.js');
  return {
    async run(job) {
      const { config } = job;
      const result = await startTraining(
        {
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
          // A resumed run reads its rows and settings back from its own folder.
          ...(job.resume ? { resume: config.outDir } : { samples: job.workspace.trainingSamples() }),
        },
        {
          signal: job.signal,
          onEvent: (event) => {
            if (event.type === 'step') {
              const { execution_provider: _ep, epoch: _epoch, tokens: _tokens, ...log } = event.log;
              job.onProgress(log);
            } else if (event.type === 'executionProvider') job.onExecutionProvider(event.name);
            else job.onPhase(event.message);
          },
        },
      );
      return { adapterDir: result.adapterDir, status: result.status };
    },
  };
}

interface Run {
  info: TrainRunInfo;
  history: TrainProgress[];
  abort: AbortController;
}

export class TrainingService {
  private readonly runs = new Map<string, Run>();
  private engine: TrainingEngine | null | undefined;

  constructor(
    private readonly events: EventHub,
    private readonly workspace: () => WorkspaceApi,
  ) {}

  private async getEngine(): Promise<TrainingEngine | null> {
    if (this.engine === undefined) this.engine = await loadTrainingEngine();
    return this.engine;
  }

  async availability(): Promise<Availability> {
    return (await this.getEngine()) ? { available: true, reason: null } : { available: false, reason: NOT_AVAILABLE };
  }

  async state(): Promise<TrainingState> {
    return { engine: await this.availability(), runs: [...this.runs.values()].map((r) => r.info) };
  }

  metrics(runId: string): TrainProgress[] {
    return this.getRun(runId).history;
  }

  async start(config: TrainConfig): Promise<{ runId: string }> {
    const engine = await this.requireEngine();
    if ([...this.runs.values()].some((r) => r.info.status === 'running' || r.info.status === 'cancelling')) {
      throw new UserError('A fine-tune is already running; cancel it or wait for it to finish.');
    }
    checkModelDir(config.modelDir);
    const runId = crypto.randomBytes(6).toString('hex');
    this.launch(engine, runId, config, false);
    return { runId };
  }

  async resume(runId: string): Promise<{ runId: string }> {
    const engine = await this.requireEngine();
    const run = this.getRun(runId);
    if (run.info.status === 'running' || run.info.status === 'cancelling') throw new UserError(`Run ${runId} is still running.`);
    if (run.info.status === 'finished') throw new UserError(`Run ${runId} has finished; start a new fine-tune instead.`);
    this.launch(engine, runId, run.info.config, true, run.history);
    return { runId };
  }

  cancel(runId: string): { cancelled: boolean } {
    const run = this.getRun(runId);
    if (run.info.status !== 'running') return { cancelled: false };
    run.abort.abort();
    this.update(run, { status: 'cancelling' });
    return { cancelled: true };
  }

  private async requireEngine(): Promise<TrainingEngine> {
    const engine = await this.getEngine();
    if (!engine) throw new UnavailableError(NOT_AVAILABLE);
    return engine;
  }

  private getRun(runId: string): Run {
    const run = this.runs.get(runId);
    if (!run) throw new UserError(`No training run '${runId}' in this session.`);
    return run;
  }

  private update(run: Run, patch: Partial<TrainRunInfo>): void {
    run.info = { ...run.info, ...patch };
    this.events.emit('train.status', run.info);
  }

  private launch(engine: TrainingEngine, runId: string, config: TrainConfig, resume: boolean, history: TrainProgress[] = []): void {
    const run: Run = {
      info: { runId, status: 'running', config, startedAt: Date.now(), executionProvider: null, phase: null, lastProgress: history.at(-1) ?? null, adapterDir: null, error: null },
      history,
      abort: new AbortController(),
    };
    this.runs.set(runId, run);
    this.events.emit('train.status', run.info);
    const job: TrainJob = {
      runId,
      config,
      workspace: this.workspace(),
      dbPath: this.workspace().dbPath,
      resume,
      signal: run.abort.signal,
      onProgress: (p) => {
        const progress = { ...p, runId };
        // A resume from an older checkpoint (after a failure) redoes steps: they replace
        // the ones recorded before, so the history stays one line per step.
        if ((run.history.at(-1)?.step ?? 0) >= progress.step) run.history = run.history.filter((h) => h.step < progress.step);
        run.history.push(progress);
        run.info = { ...run.info, lastProgress: progress };
        // A step ends whatever the trainer said it was doing before ("checkpoint at step 10").
        if (run.info.phase !== null) this.update(run, { phase: null });
        this.events.emit('train.progress', progress);
      },
      onExecutionProvider: (name) => this.update(run, { executionProvider: name }),
      onPhase: (message) => this.update(run, { phase: message }),
    };
    engine.run(job).then(
      ({ adapterDir, status }) => this.update(run, { status, adapterDir, phase: null }),
      (err: Error) => this.update(run, { status: run.abort.signal.aborted ? 'cancelled' : 'failed', phase: null, error: err.message.split('\n')[0] ?? String(err) }),
    );
  }
}

/** A model folder must at least have config.json; say which folder when it does not. */
export function checkModelDir(dir: string): void {
  if (!fs.existsSync(path.join(dir, 'config.json'))) {
    throw new UserError(`Model folder ${dir} has no config.json (expected a Hugging Face checkpoint folder).`);
  }
}
