// Judging from the app: the Judge action runs the same runner as `hindsight judge`
// (src-main/judge/runner.ts) with the backend chosen in Settings — the heuristic, the local
// model, or an OpenAI-compatible endpoint — reporting `judge.progress` events and
// stoppable with `cancel({ job: 'judge' })`. One run at a time.
//
// The local judge model stays loaded between runs (loading costs seconds) and is closed
// when the configured folder changes or the app closes.
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import type { JudgeSummary } from '../../src-shared/views.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { openJudgeBackend, type JudgeBackendSpec, type LlmJudgeSpec, type OpenedJudge } from '../judge/backends.js';
import { runJudge } from '../judge/runner.js';
import type { Availability, JudgeBackend } from '../../src-shared/contract.js';
import type { EventHub } from '../workspace/event-hub.js';
import type { SettingsStore } from '../store/settings-file.js';
import { isModelPath } from '../model/model-path.js';

/** At most this many judge.progress events a second: the UI redraws a bar, not a log. */
const PROGRESS_INTERVAL_MS = 100;

export class JudgeService {
  private running: AbortController | null = null;
  private localJudge: { dir: string; opened: Promise<OpenedJudge> } | null = null;

  constructor(
    private readonly events: EventHub,
    private readonly settings: () => SettingsStore,
  ) {}

  async availability(): Promise<Record<JudgeBackend, Availability>> {
    const s = this.settings().raw;
    const hasModel = isModelPath(s.localModelDir);
    // Shown beside each backend on the Settings page, where its fields are: say what is
    // missing, not where to go.
    return {
      heuristic: { available: true, reason: null },
      local: hasModel ? { available: true, reason: null } : { available: false, reason: `Needs a model folder: there is none at ${s.localModelDir}.` },
      openai: s.openaiModel.trim()
        ? { available: true, reason: null }
        : { available: false, reason: 'Needs the endpoint’s base URL and model name, e.g. http://127.0.0.1:11434/v1 and qwen2.5:7b-instruct for Ollama.' },
    };
  }

  /** The replay judge for evaluation: the chosen backend when it is an LLM judge (the heuristic cannot judge a replay). */
  replayJudge(): { judge: LlmJudgeSpec | null; votes: number } {
    const s = this.settings().raw;
    if (s.judgeBackend === 'heuristic' || !this.availabilitySync(s.judgeBackend)) return { judge: null, votes: s.judgeVotes };
    const { composite: _, ...spec } = this.spec(s.judgeBackend) as LlmJudgeSpec;
    return { judge: spec as LlmJudgeSpec, votes: s.judgeVotes };
  }

  private availabilitySync(backend: 'local' | 'openai'): boolean {
    const s = this.settings().raw;
    return backend === 'local' ? isModelPath(s.localModelDir) : s.openaiModel.trim() !== '';
  }

  private spec(backend: JudgeBackend): JudgeBackendSpec {
    const s = this.settings().raw;
    if (backend === 'heuristic') return { backend };
    const composite = this.settings().compositeThresholds();
    if (backend === 'local') return { backend, modelDir: s.localModelDir, composite };
    if (!s.openaiModel.trim()) throw new UserError('The OpenAI-compatible endpoint has no model name yet: fill in its Model field and save the settings.');
    return { backend, baseUrl: s.openaiBaseUrl, model: s.openaiModel, apiKey: s.openaiApiKey, composite, contextTokens: s.openaiContextTokens || undefined };
  }

  /** The backend for a run; the local model is kept loaded for the next run. */
  private async open(backend: JudgeBackend): Promise<OpenedJudge> {
    const spec = this.spec(backend);
    if (spec.backend !== 'local') return openJudgeBackend(spec);
    const dir = path.resolve(spec.modelDir);
    if (this.localJudge?.dir !== dir) {
      await this.closeLocal();
      const opened = openJudgeBackend(spec);
      opened.catch(() => (this.localJudge = null));
      this.localJudge = { dir, opened };
    }
    const { judge } = await this.localJudge.opened;
    return { judge, close: async () => {} };
  }

  private async closeLocal(): Promise<void> {
    const local = this.localJudge;
    this.localJudge = null;
    if (local) await local.opened.then((o) => o.close(), () => {});
  }

  async run(workspace: WorkspaceApi, backend: JudgeBackend, hints: boolean, votes: number | undefined): Promise<JudgeSummary> {
    if (this.running) throw new UserError('A judge run is already under way; wait for it or cancel it.');
    const abort = new AbortController();
    this.running = abort;
    let lastEmit = 0;
    try {
      const opened = await this.open(backend);
      try {
        return await runJudge(workspace, opened.judge, {
          hints,
          votes: votes ?? this.settings().raw.judgeVotes,
          concurrency: backend === 'openai' ? 4 : 1,
          signal: abort.signal,
          onProgress: ({ done, total }) => {
            const now = Date.now();
            if (done === total || now - lastEmit >= PROGRESS_INTERVAL_MS) {
              lastEmit = now;
              this.events.emit('judge.progress', { done, total });
            }
          },
        });
      } finally {
        await opened.close();
      }
    } finally {
      this.running = null;
    }
  }

  /** Stops the running judge run; the samples it judged keep their labels. */
  cancel(): { cancelled: boolean } {
    if (!this.running) return { cancelled: false };
    this.running.abort();
    return { cancelled: true };
  }

  async close(): Promise<void> {
    this.running?.abort();
    await this.closeLocal();
  }
}
