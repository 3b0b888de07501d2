// Judging from the app. The heuristic judge is built in (the workspace runs it). The LLM
// judges, local model and OpenAI-compatible endpoint (issue 6, src-main/pipeline/), plug in
// through `loadLlmJudge` below; until they land, choosing them answers a clear error.
import type { JudgeSummary, WorkspaceApi } from '../core/workspace-api.js';
import type { Availability, JudgeBackend } from './contract.js';
import { UnavailableError } from './errors.js';
import type { EventHub } from './events.js';
import type { SettingsStore } from './settings.js';

export interface LlmJudgeJob {
  backend: Exclude<JudgeBackend, 'heuristic'>;
  hints: boolean;
  votes: number;
  localModelDir: string;
  openai: { baseUrl: string; model: string; apiKey: string };
  workspace: WorkspaceApi;
  onProgress(done: number, total: number): void;
}

export interface LlmJudge {
  run(job: LlmJudgeJob): Promise<JudgeSummary>;
}

/** Where the LLM judges plug in. Returns null while there are none. */
export async function loadLlmJudge(): Promise<LlmJudge | null> {
  return null;
}

const NOT_AVAILABLE = (backend: string) =>
  `The ${backend} judge is not available in this build yet (the LLM judges have not landed); use the heuristic judge.`;

export class JudgeService {
  constructor(
    private readonly events: EventHub,
    private readonly settings: () => SettingsStore,
  ) {}

  async availability(): Promise<Record<JudgeBackend, Availability>> {
    const llm = await loadLlmJudge();
    const llmState = (backend: string): Availability => (llm ? { available: true, reason: null } : { available: false, reason: NOT_AVAILABLE(backend) });
    return { heuristic: { available: true, reason: null }, local: llmState('local model'), openai: llmState('OpenAI-compatible') };
  }

  async run(workspace: WorkspaceApi, backend: JudgeBackend, hints: boolean, votes: number | undefined): Promise<JudgeSummary> {
    if (backend === 'heuristic') {
      const summary = workspace.judgeHeuristic({ hints });
      this.events.emit('judge.progress', { done: summary.judged, total: summary.judged });
      return summary;
    }
    const llm = await loadLlmJudge();
    if (!llm) throw new UnavailableError(NOT_AVAILABLE(backend === 'local' ? 'local model' : 'OpenAI-compatible'));
    const s = this.settings().raw;
    return llm.run({
      backend,
      hints,
      votes: votes ?? s.judgeVotes,
      localModelDir: s.localModelDir,
      openai: { baseUrl: s.openaiBaseUrl, model: s.openaiModel, apiKey: s.openaiApiKey },
      workspace,
      onProgress: (done, total) => this.events.emit('judge.progress', { done, total }),
    });
  }
}
