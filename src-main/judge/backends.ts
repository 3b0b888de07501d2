/**
 * Opening a judge backend by name — what the CLI and the app's Judge action share.
 * The caller closes what it opened (the local model holds a worker thread).
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { thresholdProblem, type CompositeThresholds } from '../../src-shared/composite.js';
import type { Device } from '../model/ort-session.js';
import type { LoadQuantize } from '../model/inference-fit.js';
import { HeuristicJudge, type JudgeBackend } from './verdicts.js';
import { JudgeSetupError } from './judge-errors.js';
import { LlmJudge, type ChatCompleter } from './llm-judge.js';
import { LocalCompleter } from './local-completer.js';
import { OpenAiClient } from './openai-client.js';
import { isModelPath } from '../model/model-path.js';

/**
 * Where an OpenAI-compatible judge is looked for when no URL is given: Ollama's default server,
 * the local server people most often already run (the judge, lessons and eval commands).
 */
export const DEFAULT_JUDGE_URL = 'http://127.0.0.1:11434/v1';

export type JudgeBackendSpec =
  | { backend: 'heuristic' }
  | { backend: 'local'; modelDir: string; device?: Device; maxTokens?: number; composite?: CompositeThresholds; quantize?: LoadQuantize }
  | {
      backend: 'openai';
      /** The composite reward mode with its thresholds (docs/design.md §Composite score). */
      composite?: CompositeThresholds;
      baseUrl: string;
      model: string;
      apiKey?: string;
      timeoutMs?: number;
      retries?: number;
      concurrency?: number;
      maxTokens?: number;
      /** The model's context in tokens (Settings, --judge-context): prompts are fitted to it (./prompt-fit.ts). */
      contextTokens?: number;
    };

/** An LLM judge's spec (the heuristic generates no text). */
export type LlmJudgeSpec = Exclude<JudgeBackendSpec, { backend: 'heuristic' }>;

/** The chat completer behind an LLM judge spec, for judges other than the reward judge (replay). */
export async function openCompleter(spec: LlmJudgeSpec): Promise<ChatCompleter> {
  if (spec.backend === 'local') {
    const dir = path.resolve(spec.modelDir);
    if (!isModelPath(dir)) {
      throw new JudgeSetupError({ kind: 'not-a-model-folder', dir: spec.modelDir, flag: '--judge-model' });
    }
    return LocalCompleter.load(dir, { device: spec.device, quantize: spec.quantize });
  }
  return new OpenAiClient({
    baseUrl: spec.baseUrl, model: spec.model, apiKey: spec.apiKey, timeoutMs: spec.timeoutMs, retries: spec.retries, concurrency: spec.concurrency,
    contextTokens: spec.contextTokens,
  });
}

export interface OpenedJudge {
  judge: JudgeBackend;
  close(): Promise<void>;
}

export async function openJudgeBackend(spec: JudgeBackendSpec): Promise<OpenedJudge> {
  const composite = spec.backend === 'heuristic' ? undefined : spec.composite;
  const problem = composite ? thresholdProblem(composite) : null;
  if (problem) throw new UserError(problem);
  switch (spec.backend) {
    case 'heuristic':
      return { judge: new HeuristicJudge(), close: async () => {} };
    case 'local': {
      const dir = path.resolve(spec.modelDir);
      if (!isModelPath(dir)) {
        throw new JudgeSetupError({ kind: 'not-a-model-folder', dir: spec.modelDir, flag: '--model' });
      }
      const completer = await LocalCompleter.load(dir, { device: spec.device, quantize: spec.quantize });
      const judge = new LlmJudge(completer, { maxTokens: spec.maxTokens, composite });
      return { judge, close: () => judge.close() };
    }
    case 'openai': {
      const judge = new LlmJudge(
        new OpenAiClient({
          baseUrl: spec.baseUrl,
          model: spec.model,
          apiKey: spec.apiKey,
          timeoutMs: spec.timeoutMs,
          retries: spec.retries,
          concurrency: spec.concurrency,
          contextTokens: spec.contextTokens,
        }),
        { maxTokens: spec.maxTokens, composite },
      );
      return { judge, close: () => judge.close() };
    }
  }
}
