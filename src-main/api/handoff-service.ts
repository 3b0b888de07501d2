// The Export page's "For a GPU cluster" calls (docs/design.md §Hand-off): writing a TRL hand-off
// folder, and one OpenClaw-RL replay at a time in the background, whose progress the page
// polls. Held-out sessions stay out of both unless the page's checkbox puts them in, and the
// result says how many were left out. Stopping a replay lets the turns in flight finish; starting it again with the same
// folder resumes it (src-main/openai/replay-client.ts).
import { UserError } from '../../src-shared/types.js';
import type { ReplayOptions, ReplayProgress, TrlHandoffOptions, TrlHandoffResult } from '../../src-shared/handoff.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { openclawHandoff } from '../openai/openclaw-handoff.js';

const IDLE: ReplayProgress = { state: 'idle', outDir: null, sent: 0, total: 0, sessionsDone: 0, sessions: 0, abandoned: 0, heldOut: null, error: null };

export class HandoffService {
  private progress: ReplayProgress = { ...IDLE };
  private controller: AbortController | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly workspace: () => WorkspaceApi) {}

  trl(options: TrlHandoffOptions): TrlHandoffResult {
    return this.workspace().handoffTrl(options);
  }

  replayStart(options: ReplayOptions): ReplayProgress {
    if (this.running) throw new UserError('a replay is already running; stop it first');
    const controller = new AbortController();
    this.controller = controller;
    this.progress = { ...IDLE, state: 'running', outDir: options.outDir };
    this.running = openclawHandoff(this.workspace(), options, {
      signal: controller.signal,
      onPlanned: (heldOut) => (this.progress = { ...this.progress, heldOut }),
      onProgress: (c) => (this.progress = { ...this.progress, ...c }),
    })
      .then(({ summary }) => {
        const error = summary.failures.length ? `${summary.failures.length} session${summary.failures.length === 1 ? '' : 's'} failed, e.g. ${summary.failures[0]!.sessionId}: ${summary.failures[0]!.error}` : null;
        this.progress = { ...this.progress, ...summary, state: summary.stopped ? 'stopped' : error ? 'failed' : 'finished', error };
      })
      .catch((err: Error) => {
        this.progress = { ...this.progress, state: 'failed', error: err.message };
      })
      .finally(() => {
        this.running = null;
        this.controller = null;
      });
    return this.status();
  }

  status(): ReplayProgress {
    return { ...this.progress };
  }

  replayStop(): ReplayProgress {
    if (this.controller && !this.controller.signal.aborted) {
      this.controller.abort();
      this.progress = { ...this.progress, state: 'stopping' };
    }
    return this.status();
  }

  /** Waits for a running replay to end (after a stop, or at shutdown). */
  async settled(): Promise<void> {
    await this.running;
  }
}
