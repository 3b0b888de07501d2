/**
 * What an on-policy run is asked for and what it saves (docs/design.md §On-policy training):
 * the offline trainer's options and settings (../train/run-settings.ts) plus the rollouts'
 * own. Every setting is saved in every checkpoint, so a resume keeps it; those that decide
 * which episodes a step generates (K, contexts per step, the limits, the sampling, where the
 * contexts come from) cannot change on resume, the others (tool URL and timeout, the judge)
 * can be given again.
 */
import path from 'node:path';
import { ON_POLICY_DEFAULTS } from '../../src-shared/rollout.js';
import { methodRecord, methodsUsing, orList } from '../../src-shared/training-methods.js';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import type { LlmJudgeSpec } from '../judge/backends.js';
import type { ModelConfig } from '../model/hf-checkpoint.js';
import type { ToolSchema } from '../rollout/tools.js';
import { readToolSchemas } from '../rollout/user-tools.js';
import { keptOnResume, resumedSettings, settingsFrom, type RunSettings, type TrainerOptions } from '../train/run-settings.js';
import type { LoraConfig } from '../train/training-step.js';

/** The on-policy part of a run's options; unset: the default (ON_POLICY_DEFAULTS), or on resume the run's own. */
export interface OnPolicyOptions {
  /** K: rollouts per context. */
  rollouts?: number;
  contextsPerStep?: number;
  maxTurns?: number;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  toolErrorLimit?: number;
  toolTimeoutMs?: number;
  /** Contexts with checkable answers (`hindsight rollout`'s task file) instead of the database's samples. */
  taskFile?: string;
  /** Your own tools: a JSON array of OpenAI-style schemas, run at `toolUrl`. */
  toolsFile?: string;
  toolUrl?: string;
  /** The replay judge that scores rollouts of database samples (rl, combine). */
  judge?: LlmJudgeSpec;
  /** Replay judge votes per rollout. */
  votes?: number;
}

/** An on-policy run's options: the trainer's, less `--data`, plus the rollouts'. */
export interface OnPolicyTrainerOptions extends Omit<TrainerOptions, 'onPolicy' | 'dataFile'> {
  onPolicy: OnPolicyOptions;
  /** The database search_history reads (read only); none: the tool is not offered. */
  dbPath?: string;
  /**
   * Sessions search_history never shows, besides `heldOut`'s: the database's held-out split
   * when the run takes no split to evaluate (a task file's run without an explicit --db), so no
   * held-out text becomes the context of a trained reply.
   */
  hiddenFromSearch?: string[];
}

/** The rollouts' settings, as every checkpoint of an on-policy run saves them. */
export interface OnPolicyRunSettings {
  rollouts: number;
  contextsPerStep: number;
  maxTurns: number;
  maxTokens: number;
  temperature: number;
  topP: number;
  toolErrorLimit: number;
  toolTimeoutMs: number;
  /** Where the contexts come from; they are kept in the run folder's contexts.jsonl either way. */
  source: 'tasks' | 'database';
  taskFile: string | null;
  /** The user tools' schemas (read from the tools file when the run started) and where they run. */
  userTools: ToolSchema[];
  toolUrl: string | null;
  /** The replay judge without its API key (which is never written to disk). */
  judge: LlmJudgeSpec | null;
  votes: number;
}

/** An on-policy run's settings: the offline trainer's and the rollouts'. */
export interface OnPolicyTrainSettings extends RunSettings {
  onPolicy: OnPolicyRunSettings;
}

/** How many judge votes each rollout gets by default. */
export const DEFAULT_VOTES = 1;
/** On-policy steps of a run when `steps` is not given. */
export const DEFAULT_ON_POLICY_STEPS = 10;

/** A judge as the run keeps it: a local judge's folder resolved. */
function resolvedJudge(judge: LlmJudgeSpec | undefined): LlmJudgeSpec | null {
  if (!judge) return null;
  return judge.backend === 'local' ? { ...judge, modelDir: path.resolve(judge.modelDir) } : judge;
}

/** A judge as a checkpoint saves it: without its API key. */
function withoutKey(judge: LlmJudgeSpec | null): LlmJudgeSpec | null {
  if (judge?.backend !== 'openai') return judge;
  const { apiKey: _key, ...rest } = judge;
  return rest;
}

/** The tools file's schemas and the URL they run at: both or neither. */
function userToolSettings(o: OnPolicyOptions): Pick<OnPolicyRunSettings, 'userTools' | 'toolUrl'> {
  if (!o.toolsFile && !o.toolUrl) return { userTools: [], toolUrl: null };
  if (!o.toolsFile || !o.toolUrl) throw new UserError('--tools and --tool-url go together (the schemas, and where they run)');
  return { userTools: readToolSchemas(o.toolsFile), toolUrl: o.toolUrl };
}

/**
 * A new on-policy run's settings. Refuses, in one line, a run that would have no signal: rl
 * without a task file or a judge (the rollouts would have no reward), opd on a task file (tasks
 * carry no hint), a judge beside a task file (the tasks check their own answers).
 */
export function onPolicySettingsFrom(o: OnPolicyTrainerOptions & { modelDir: string }, lora: LoraConfig, model: ModelConfig): OnPolicyTrainSettings {
  const d = ON_POLICY_DEFAULTS;
  const p = o.onPolicy;
  const base = settingsFrom({ ...o, ppoEpochs: o.ppoEpochs ?? d.ppoEpochs }, lora, model);
  // The on-policy trainer scores each episode's teacher on the sampled tokens as it finishes
  // (./scoring.ts), and keeps no top K in episodes.jsonl.
  if (base.loss.opdTopK) {
    throw new SurfaceError('--opd-topk is for offline runs: an on-policy run distils the sampled token (leave --opd-topk at 0)', 'Top-K distillation is for runs on the labelled samples: set Top-K to 0 for an on-policy run.');
  }
  const s: OnPolicyRunSettings = {
    rollouts: p.rollouts ?? d.rollouts,
    contextsPerStep: p.contextsPerStep ?? d.contextsPerStep,
    maxTurns: p.maxTurns ?? d.maxTurns,
    maxTokens: p.maxTokens ?? d.maxTokens,
    temperature: p.temperature ?? d.temperature,
    topP: p.topP ?? d.topP,
    toolErrorLimit: p.toolErrorLimit ?? d.toolErrorLimit,
    toolTimeoutMs: p.toolTimeoutMs ?? d.toolTimeoutMs,
    source: p.taskFile ? 'tasks' : 'database',
    taskFile: p.taskFile ? path.resolve(p.taskFile) : null,
    ...userToolSettings(p),
    judge: resolvedJudge(p.judge),
    votes: p.votes ?? DEFAULT_VOTES,
  };
  checkSignal(base.method, s);
  return { ...base, onPolicy: s };
}

/** {@link checkSignal} on a new run's options, before anything is read. */
export function checkOptionsSignal(method: RunSettings['method'], o: OnPolicyOptions): void {
  checkSignal(method, { source: o.taskFile ? 'tasks' : 'database', judge: o.judge ?? null });
}

/**
 * Whether the method has a signal from where the contexts come from. The app's Training page
 * has no replay judge; its wording names the page's fields (Method, Task file).
 */
function checkSignal(method: RunSettings['method'], s: Pick<OnPolicyRunSettings, 'source' | 'judge'>): void {
  if (s.source === 'tasks' && s.judge) throw new UserError('a task file checks its own answers: give --tasks or a replay judge (--judge-backend), not both');
  const { uses, label } = methodRecord(method);
  const using = (signal: 'reward' | 'hint') => ({ names: orList(methodsUsing(signal).map((m) => m.name)), labels: orList(methodsUsing(signal).map((m) => m.label)) });
  // A task file gives rewards (its answers) and no hints; the database gives hints, and rewards only through a judge.
  if (s.source === 'tasks' && !uses.reward) {
    throw new SurfaceError(
      `on-policy ${method} learns from hints, and a task file has none: use --method ${using('reward').names} with --tasks, or ${method} on the database's hinted samples`,
      `${label} learns from hints, and a task file has none: clear the Task file field to learn from the database's hinted samples, or choose ${using('reward').labels} as the Method to train on the task file's answers.`,
    );
  }
  if (!uses.hint && s.source === 'database' && !s.judge) {
    throw new SurfaceError(
      `on-policy ${method} needs a reward for each rollout: give --tasks FILE (answers to check) or a replay judge (--judge-backend local|openai), or train --method ${using('hint').names} on hints`,
      `On-policy ${label} needs rewards for the rollouts: give a Task file (answers to check), or choose ${using('hint').labels} as the Method to learn from the hints.`,
    );
  }
}

/**
 * A resumed run's settings: the saved ones with the options given again applied. Those that
 * decide the episodes cannot change: another value is refused, the same one is fine.
 */
export function resumedOnPolicySettings(saved: OnPolicyTrainSettings, o: OnPolicyTrainerOptions): OnPolicyTrainSettings {
  const base = resumedSettings(saved, o);
  const s = saved.onPolicy;
  const p = o.onPolicy;
  const fixed = (name: string, given: unknown, has: unknown) => keptOnResume('on-policy run', name, given, has);
  fixed('rollouts per context', p.rollouts, s.rollouts);
  fixed('contexts per step', p.contextsPerStep, s.contextsPerStep);
  fixed('max turns', p.maxTurns, s.maxTurns);
  fixed('max tokens', p.maxTokens, s.maxTokens);
  fixed('temperature', p.temperature, s.temperature);
  fixed('top-p', p.topP, s.topP);
  fixed('tool error limit', p.toolErrorLimit, s.toolErrorLimit);
  fixed('task file', p.taskFile === undefined ? undefined : path.resolve(p.taskFile), s.taskFile);
  const tools = p.toolsFile || p.toolUrl ? userToolSettings(p) : { userTools: s.userTools, toolUrl: s.toolUrl };
  const judge = resolvedJudge(p.judge) ?? keyFromEnvironment(s.judge);
  const next: OnPolicyRunSettings = {
    ...s, ...tools, toolTimeoutMs: p.toolTimeoutMs ?? s.toolTimeoutMs, judge, votes: p.votes ?? s.votes,
  };
  checkSignal(base.method, next);
  return { ...base, onPolicy: next };
}

/** A saved openai judge gets its key back from the environment (it was not saved). */
function keyFromEnvironment(judge: LlmJudgeSpec | null): LlmJudgeSpec | null {
  if (judge?.backend !== 'openai') return judge;
  const apiKey = process.env.HINDSIGHT_JUDGE_API_KEY;
  return apiKey ? { ...judge, apiKey } : judge;
}

/** What a checkpoint saves of the settings: the judge without its key. */
export function savedForm(settings: OnPolicyTrainSettings): OnPolicyTrainSettings {
  return { ...settings, onPolicy: { ...settings.onPolicy, judge: withoutKey(settings.onPolicy.judge) } };
}

/** Whether saved trainer settings are an on-policy run's. */
export function isOnPolicySettings(settings: unknown): settings is OnPolicyTrainSettings {
  return typeof settings === 'object' && settings !== null && typeof (settings as { onPolicy?: unknown }).onPolicy === 'object' && (settings as { onPolicy?: unknown }).onPolicy !== null;
}
