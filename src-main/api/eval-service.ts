/**
 * The app's evaluation (docs/design.md §Evaluation): one run at a time, in the evaluation
 * worker (src-main/eval/run-in-worker.ts), on the open database's held-out split. Progress and
 * the final state go out as `eval.progress`; Cancel keeps what was measured. Replay uses the
 * judge chosen on the Settings page when it is an LLM judge; with the heuristic, the report
 * says replay was skipped and why. The database's lessons, when it has some and the call does
 * not leave them out, are measured as one more model, "lessons" (docs/design.md §Lessons).
 */
import type { CallInput } from '../../src-shared/contract.js';
import type { EvalState } from '../../src-shared/eval-api.js';
import { appWording, UserError } from '../../src-shared/types.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { REPLAY_DEFAULTS } from '../eval/replay.js';
import { startEvaluation } from '../eval/run-in-worker.js';
import type { LlmJudgeSpec } from '../judge/backends.js';
import type { EventHub } from '../workspace/event-hub.js';

export interface EvalServiceHooks {
  workspace: () => WorkspaceApi;
  /** The replay judge from the settings; null for the heuristic. */
  replayJudge: () => { judge: LlmJudgeSpec | null; votes: number };
}

export class EvalService {
  private state: EvalState = { state: 'idle', progress: null, report: null, error: null, metrics: [] };
  private controller: AbortController | null = null;

  constructor(private readonly events: EventHub, private readonly hooks: EvalServiceHooks) {}

  status(): EvalState {
    return this.state;
  }

  start(input: CallInput<'evalStart'>): EvalState {
    if (this.state.state === 'running') throw new UserError('An evaluation is already running: cancel it first.');
    const ws = this.hooks.workspace();
    const samples = ws.evaluationSamples('heldout');
    const split = ws.split();
    const { judge, votes } = this.hooks.replayJudge();
    const lessons = input.lessons === false ? '' : (ws.lessons()?.text ?? '');
    const controller = new AbortController();
    this.controller = controller;
    this.update({ state: 'running', progress: null, report: null, error: null, metrics: [...input.metrics] });
    startEvaluation(
      {
        modelDir: input.modelDir, adapters: input.adapters, samples, metrics: [...input.metrics], seed: 0, device: 'cpu', lessons,
        split: { name: 'heldout', sessions: split.heldOut.sessions, samples: samples.length },
        replay: { ...REPLAY_DEFAULTS, judge, votes, rollouts: input.rollouts ?? REPLAY_DEFAULTS.rollouts, maxNewTokens: input.maxNewTokens ?? REPLAY_DEFAULTS.maxNewTokens },
      },
      { signal: controller.signal, onProgress: (progress) => this.update({ ...this.state, progress }) },
    ).then(
      (report) => this.update({ ...this.state, state: report.cancelled ? 'cancelled' : 'done', report }),
      (err: unknown) => this.update({ ...this.state, state: 'failed', error: appWording(err) }),
    ).finally(() => {
      if (this.controller === controller) this.controller = null;
    });
    return this.state;
  }

  /** Stops the running evaluation (it keeps what was measured); whether one was running. */
  cancel(): { cancelled: boolean } {
    const running = this.state.state === 'running';
    this.controller?.abort();
    return { cancelled: running };
  }

  close(): void {
    this.controller?.abort();
  }

  private update(next: EvalState): void {
    this.state = next;
    this.events.emit('eval.progress', next);
  }
}
