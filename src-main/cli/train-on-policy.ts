// `hindsight train --on-policy`: the flags of on-policy training (docs/design.md §On-policy
// training) and the run itself, in the on-policy trainer's worker thread
// (src-main/onpolicy/onpolicy-thread.ts). ./train.ts declares these flags with its own and
// sends a run here when --on-policy is given, or when --resume names an on-policy run.
import fs from 'node:fs';
import { ON_POLICY_DEFAULTS as D } from '../../src-shared/rollout.js';
import { UserError } from '../../src-shared/types.js';
import { TRAIN_DEFAULTS, type TrainDevice as Device, type TrainMethod } from '../../src-shared/training.js';
import { checkOptionsSignal, DEFAULT_ON_POLICY_STEPS, DEFAULT_VOTES, type OnPolicyOptions, type OnPolicyTrainerOptions } from '../onpolicy/options.js';
import { onPolicyRunSource } from '../onpolicy/prepare.js';
import { startOnPolicyTraining } from '../onpolicy/onpolicy-thread.js';
import type { OnPolicyResult } from '../onpolicy/onpolicy-trainer.js';
import type { HeldOutSet } from '../train/train-eval.js';
import type { TrainerEvent, TrainerOptions } from '../train/trainer.js';
import { withWorkspace } from '../workspace/workspace.js';
import { boundFlag, defaultDbPath, ranged, UsageError } from './args.js';
import { judgeFlags } from './eval.js';
import { JUDGE_MODEL_HELP } from './model-flags.js';

const ON = 'on-policy training (docs/design.md §On-policy training)';
const num = (x: number) => String(x);

/** The flags of on-policy runs; unset ones stay undefined, so a resume keeps the run's own. */
export const ON_POLICY_OPTIONS = {
  'on-policy': { type: 'boolean', group: ON, help: "train on the model's own samples: each step, K rollouts per context with the current adapter, scored, then PPO epochs on them" },
  rollouts: { type: 'string', value: 'K', group: ON, help: ranged('rollouts', 'rollouts per context and step'), otherwise: num(D.rollouts) },
  'contexts-per-step': { type: 'string', value: 'N', group: ON, help: ranged('contextsPerStep', 'contexts each step generates from (each gives K rollouts)'), otherwise: num(D.contextsPerStep) },
  'max-turns': { type: 'string', value: 'N', group: ON, help: ranged('maxTurns', 'assistant replies per episode (a tool result starts another)'), otherwise: num(D.maxTurns) },
  'max-tokens': { type: 'string', value: 'N', group: ON, help: ranged('maxTokens', 'generated tokens per episode, over all its replies'), otherwise: num(D.maxTokens) },
  temperature: { type: 'string', value: 'T', group: ON, help: ranged('temperature', 'sampling temperature of the rollouts; 0 is greedy'), otherwise: num(D.temperature) },
  'top-p': { type: 'string', value: 'P', group: ON, help: ranged('topP', 'nucleus sampling mass of the rollouts'), otherwise: num(D.topP) },
  tasks: {
    type: 'string', value: 'FILE', group: ON, otherwise: "the database's samples (opd: the hinted ones; rl and combine: with a replay judge)",
    help: 'contexts with checkable answers (JSONL: messages, optional tools, answer or answer_regex): the reward of rl',
  },
  tools: { type: 'string', value: 'FILE', group: ON, help: 'your own tools for task rollouts: a JSON array of OpenAI-style schemas (needs --tool-url)', otherwise: 'built-in tools only' },
  'tool-url': { type: 'string', value: 'URL', group: ON, help: 'the loopback endpoint your tools run at: each call is POSTed as {"name","arguments"}', otherwise: 'none' },
  'tool-timeout-ms': { type: 'string', value: 'MS', group: ON, help: ranged('toolTimeoutMs', 'a tool call is abandoned after this long'), otherwise: num(D.toolTimeoutMs) },
  'tool-error-limit': { type: 'string', value: 'N', group: ON, help: ranged('toolErrorLimit', 'failed tool calls after which an episode stops'), otherwise: num(D.toolErrorLimit) },
  'judge-backend': {
    type: 'string', value: 'local|openai', group: ON, otherwise: 'none: rl and combine need --tasks, opd needs none',
    help: "the replay judge that scores rollouts of the database's samples, knowing how the user reacted to the original reply",
  },
  'judge-model': { type: 'string', value: 'DIR|NAME', group: ON, help: JUDGE_MODEL_HELP, required: 'with --judge-backend' },
  'judge-url': { type: 'string', value: 'URL', group: ON, help: "the OpenAI-compatible server's base URL, up to /v1", otherwise: 'http://127.0.0.1:11434/v1 (Ollama)' },
  'judge-api-key': { type: 'string', value: 'K', group: ON, help: 'bearer key for the judge server (never saved with the run)', otherwise: 'env HINDSIGHT_JUDGE_API_KEY, else none' },
  votes: { type: 'string', value: 'N', group: ON, help: ranged('votes', 'replay judge votes per rollout (majority, tie → 0)'), otherwise: num(DEFAULT_VOTES) },
} as const;

/** The steps note of --steps and the PPO epochs note of --ppo-epochs, for ./train.ts. */
export const ON_POLICY_STEPS_NOTE = `${DEFAULT_ON_POLICY_STEPS} with --on-policy (each step generates its own rollouts)`;
export const ON_POLICY_EPOCHS_NOTE = `${D.ppoEpochs} with --on-policy`;

type Values = Record<string, string | boolean | string[] | undefined>;
const str = (v: Values, k: string) => v[k] as string | undefined;

/** Flags only an on-policy run reads. */
const ONLY_ON_POLICY = Object.keys(ON_POLICY_OPTIONS).filter((k) => k !== 'on-policy');

/** Whether this train command is an on-policy run: --on-policy, or --resume of one; other runs refuse its flags. */
export function isOnPolicyCommand(v: Values): boolean {
  if (v['on-policy'] || (typeof v.resume === 'string' && onPolicyRunSource(v.resume) !== null)) return true;
  const stray = ONLY_ON_POLICY.find((k) => v[k] !== undefined);
  if (stray) throw new UsageError(`--${stray} goes with --on-policy`);
  return false;
}

function onPolicyFlags(v: Values, device: Device): OnPolicyOptions {
  const judge = judgeFlags(v, device);
  if (judge && v.tasks !== undefined) throw new UsageError('--tasks checks its own answers: give --tasks or --judge-backend, not both');
  return {
    rollouts: boundFlag('rollouts', str(v, 'rollouts')), contextsPerStep: boundFlag('contextsPerStep', str(v, 'contexts-per-step')),
    maxTurns: boundFlag('maxTurns', str(v, 'max-turns')), maxTokens: boundFlag('maxTokens', str(v, 'max-tokens')),
    temperature: boundFlag('temperature', str(v, 'temperature')), topP: boundFlag('topP', str(v, 'top-p')),
    toolErrorLimit: boundFlag('toolErrorLimit', str(v, 'tool-error-limit')), toolTimeoutMs: boundFlag('toolTimeoutMs', str(v, 'tool-timeout-ms')),
    taskFile: str(v, 'tasks'), toolsFile: str(v, 'tools'), toolUrl: str(v, 'tool-url'), votes: boundFlag('votes', str(v, 'votes')),
    ...(judge ? { judge } : {}),
  };
}

function heldOutOf(ws: Parameters<Parameters<typeof withWorkspace>[1]>[0]): HeldOutSet {
  return { sessionIds: ws.heldOutSessionIds(), samples: ws.evaluationSamples('heldout') };
}

/**
 * The database's part of a run: the samples (a new run without --tasks), and the held-out
 * split to check against and evaluate. A run from a task file takes a split only from a --db
 * given explicitly, as a --data run does.
 */
async function fromDatabase(dbFlag: string | undefined, method: TrainMethod, modelDir: string | undefined, contexts: 'database' | 'tasks', resume: boolean) {
  const db = dbFlag ?? defaultDbPath();
  const split = dbFlag !== undefined || contexts === 'database';
  if (contexts === 'database' && !resume && !fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first, or give --tasks FILE`);
  if (!fs.existsSync(db)) return { dbPath: undefined };
  // search_history still never shows a held-out session (docs/design.md §Evaluation).
  if (!split) return withWorkspace(db, (ws) => ({ dbPath: db, hiddenFromSearch: ws.heldOutSessionIds() }), { access: 'read' });
  return withWorkspace(db, (ws) => ({
    dbPath: db,
    heldOut: heldOutOf(ws),
    ...(contexts === 'database' && !resume ? { samples: ws.trainingSamples({ method, rolloutsFor: modelDir, reactions: true }) } : {}),
  }), { access: 'read' });
}

/** Runs an on-policy run from the parsed flags and the options ./train.ts made of the shared ones. */
export async function runOnPolicy(v: Values, base: TrainerOptions, signal: AbortSignal, onEvent: (e: TrainerEvent) => void): Promise<OnPolicyResult> {
  if (base.dataFile) throw new UsageError('--data trains on rows as they are; --on-policy generates its own rollouts: give one or the other');
  const { dataFile: _data, ...rest } = base;
  const onPolicy = onPolicyFlags(v, base.device ?? 'cpu');
  if (!base.resume) checkOptionsSignal(base.method ?? TRAIN_DEFAULTS.method, onPolicy);
  const source = base.resume ? onPolicyRunSource(base.resume)! : onPolicy.taskFile ? 'tasks' : 'database';
  const options: OnPolicyTrainerOptions = {
    ...rest, onPolicy, ...(await fromDatabase(str(v, 'db'), base.method ?? TRAIN_DEFAULTS.method, base.modelDir, source, base.resume !== undefined)),
  };
  return startOnPolicyTraining(options, { signal, onEvent });
}
