// The Training screen's state: availability, the runs, and each run's step history for the
// charts, fed live by `train.progress` events and re-read after a reload.
import { defineStore } from 'pinia';
import type { TrainConfig, TrainProgress, TrainRunInfo, TrainingState } from '../../../src-main/api/contract.js';
import { api, errorMessage } from '../api/client';

export const useTrainingStore = defineStore('training', {
  state: () => ({
    state: null as TrainingState | null,
    runId: null as string | null,
    history: [] as TrainProgress[],
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
      try {
        this.state = await api.trainStatus();
        const last = this.state.runs.at(-1);
        if (last && !this.runId) {
          this.runId = last.runId;
          this.history = (await api.trainMetrics({ runId: last.runId })).progress;
        }
      } catch (err) {
        this.error = errorMessage(err);
      }
    },
    listen() {
      if (this.listening) return;
      this.listening = true;
      api.on('train.progress', (p) => {
        if (p.runId === this.runId) this.history.push(p);
      });
      api.on('train.status', (info) => {
        if (!this.state) return;
        const runs = this.state.runs.filter((r) => r.runId !== info.runId);
        this.state = { ...this.state, runs: [...runs, info] };
        if (info.status === 'failed' && info.runId === this.runId) this.error = info.error;
      });
    },
    async start(config: TrainConfig) {
      this.starting = true;
      this.error = null;
      try {
        const { runId } = await api.trainStart(config);
        this.runId = runId;
        this.history = [];
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
        await api.trainCancel({ runId: this.runId });
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
