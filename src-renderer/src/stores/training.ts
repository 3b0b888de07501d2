// The Training screen's state: availability, the runs, and the shown run's step history for
// the charts, fed live by `train.progress` events and re-read after a reload, with the run's
// held-out evaluations (`train.eval` events) for the held-out curve.
import { defineStore } from 'pinia';
import type { TrainConfig, TrainEval, TrainProgress, TrainRunInfo, TrainingState } from '../../../src-shared/contract.js';
import { APP_TRAIN_DEFAULTS, TRAIN_DEFAULTS } from '../../../src-shared/training.js';
import { api, errorMessage } from '../api/client';
import { freshRead } from '../api/fresh-read';
import { useAppStore } from './app';

/** A new run's settings as the form first shows them: the trainer's defaults, the app's method and steps. */
export function defaultTrainConfig(modelDir: string, outDir: string): TrainConfig {
  const d = TRAIN_DEFAULTS;
  return {
    modelDir,
    outDir,
    method: APP_TRAIN_DEFAULTS.method,
    steps: APP_TRAIN_DEFAULTS.steps,
    batchSize: d.batchSize,
    lr: d.lr,
    optimizer: d.optimizer,
    loraR: d.loraR,
    loraAlpha: d.loraAlpha,
    targets: [...d.targets],
    device: d.device,
    quantize: d.quantize,
    recompute: d.recompute,
    lossAgg: d.lossAgg,
    opdTopK: d.opdTopK,
    seed: d.seed,
    checkpointEvery: d.saveEvery,
  };
}

/**
 * Adds one step to a history. A step that is already there, or an earlier one, replaces the
 * steps from it on: a run resumed from an older checkpoint (after a failure) redoes those
 * steps, and an event that raced a `trainMetrics` read must not be drawn twice.
 */
export function withStep(history: readonly TrainProgress[], progress: TrainProgress): TrainProgress[] {
  const kept = history.at(-1) && history.at(-1)!.step >= progress.step ? history.filter((p) => p.step < progress.step) : [...history];
  kept.push(progress);
  return kept;
}

/** trainStatus reads, repeated when a train.status event arrives during one (../api/fresh-read.ts). */
const statusRead = freshRead();

export const useTrainingStore = defineStore('training', {
  state: () => ({
    state: null as TrainingState | null,
    runId: null as string | null,
    history: [] as TrainProgress[],
    /** Held-out evaluations of the shown run, by step (step 0: before the first update). */
    evals: [] as TrainEval[],
    error: null as string | null,
    starting: false,
    listening: false,
  }),
  getters: {
    run(state): TrainRunInfo | null {
      return state.state?.runs.find((r) => r.runId === state.runId) ?? null;
    },
    latest(state): TrainProgress | null {
      return state.history.at(-1) ?? null;
    },
  },
  actions: {
    async load() {
      await statusRead.run(async () => {
        try {
          this.state = await api.trainStatus();
          const last = this.state.runs.at(-1);
          if (last && !this.runId) this.runId = last.runId;
          if (this.runId) await this.reloadHistory();
        } catch (err) {
          this.error = errorMessage(err);
        }
      });
    },
    /** The server's history wins; live events that arrived meanwhile merge in by step. */
    async reloadHistory() {
      if (!this.runId) return;
      const runId = this.runId;
      const { progress, evals } = await api.trainMetrics({ runId });
      if (this.runId !== runId) return;
      const live = this.history.filter((p) => p.runId === runId && p.step > (progress.at(-1)?.step ?? 0));
      this.history = [...progress, ...live];
      const liveEvals = this.evals.filter((e) => e.runId === runId && e.step > (evals.at(-1)?.step ?? -1));
      this.evals = [...evals, ...liveEvals];
    },
    listen() {
      if (this.listening) return;
      this.listening = true;
      // The stream (re)opened: what was sent while it was closed is read instead.
      api.onStreamOpen(() => void this.load());
      // Steps and evaluations merge into the history by step (reloadHistory), whatever the order.
      api.on('train.progress', (p) => {
        if (p.runId === this.runId) this.history = withStep(this.history, p);
      });
      api.on('train.eval', (e) => {
        if (e.runId === this.runId) this.evals = [...this.evals.filter((x) => x.step < e.step), e];
      });
      api.on('train.status', (info) => {
        statusRead.touched();
        if (!this.state) return;
        const before = this.state.runs.find((r) => r.runId === info.runId);
        const runs = this.state.runs.filter((r) => r.runId !== info.runId);
        // A run's own failure is shown in its progress panel (info.error), not as a start error,
        // and as a toast when it happens, on whichever page the user is.
        this.state = { ...this.state, runs: [...runs, info] };
        if (info.status === 'failed' && before?.status !== 'failed' && info.error) useAppStore().toast('error', `Fine-tune failed: ${info.error}`);
      });
    },
    async start(config: TrainConfig) {
      this.starting = true;
      this.error = null;
      try {
        const { runId } = await api.trainStart(config);
        // A new run starts with empty charts, whatever the last one drew.
        this.runId = runId;
        this.history = [];
        this.evals = [];
        await this.load();
      } catch (err) {
        this.error = errorMessage(err);
      } finally {
        this.starting = false;
      }
    },
    async cancel() {
      if (!this.runId) return;
      try {
        await api.cancel({ job: 'train', runId: this.runId });
      } catch (err) {
        this.error = errorMessage(err);
      }
    },
    async resume() {
      if (!this.runId) return;
      this.error = null;
      try {
        await api.trainResume({ runId: this.runId });
        await this.load();
      } catch (err) {
        this.error = errorMessage(err);
      }
    },
  },
});
