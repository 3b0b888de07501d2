// Rollout episodes written by the tests themselves, in the shape of src-shared/rollout.ts
// `Episode`, with real token ids of the demo model's tokenizer (so the Rollouts view can show
// token texts), and a listed training run whose folder holds them: what an on-policy run
// leaves behind, without running one.
import fs from 'node:fs';
import path from 'node:path';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { runsFileFor } from '../../src-main/api/training-service.js';
import { defaultOnPolicySettings } from '../../src-shared/on-policy-api.js';
import { EPISODES_FILE, type Episode, type EpisodeFinish, type EpisodeMessage, type RolloutRewardSource, type ToolCallRecord } from '../../src-shared/rollout.js';
import type { TrainRunInfo } from '../../src-shared/training-api.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';

export const DEMO_MODEL = path.resolve(import.meta.dirname, '../../resources/models/stories260K');

export interface TurnSpec {
  text: string;
  toolCalls?: Omit<ToolCallRecord, 'ms'>[];
  /** A reward on this turn's last generated token. */
  reward?: number;
}

export interface EpisodeSpec {
  contextId: string;
  sample: number;
  step: number;
  prompt: string;
  turns: TurnSpec[];
  finish: EpisodeFinish;
  reward: number | null;
  rewardSource: RolloutRewardSource;
  /** Give it a teacher–student gap per generated token (an OPD episode). */
  opd?: boolean;
}

let tokenizer: ChatTokenizer | null = null;
const encode = (text: string) => (tokenizer ??= ChatTokenizer.load(DEMO_MODEL)).encode(text);

/** A deterministic log-prob and gap per generated token, with both signs in the gap. */
const oldLogprob = (k: number) => -0.2 - 0.15 * (k % 7);
export const gapOf = (k: number) => (((k * 37) % 11) - 5) / 10;

export function buildEpisode(spec: EpisodeSpec): Episode {
  const messages: EpisodeMessage[] = [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: spec.prompt }];
  const inputIds = [...encode(`${messages[0]!.content}\n${spec.prompt}\n`)];
  const promptLength = inputIds.length;
  const generated: { start: number; end: number }[] = [];
  const rewards: { at: number; r: number }[] = [];
  for (const turn of spec.turns) {
    const calls = turn.toolCalls?.map((c) => ({ ...c, ms: 3 }));
    messages.push({ role: 'assistant', content: turn.text, ...(calls ? { toolCalls: calls } : {}) });
    const start = inputIds.length;
    inputIds.push(...encode(turn.text));
    generated.push({ start, end: inputIds.length });
    if (turn.reward !== undefined) rewards.push({ at: inputIds.length - 1, r: turn.reward });
    for (const call of calls ?? []) {
      messages.push({ role: 'tool', name: call.name, content: call.result, ...(call.ok ? {} : { error: true }) });
      inputIds.push(...encode(`\n${call.result}\n`));
    }
  }
  const count = generated.reduce((n, s) => n + s.end - s.start, 0);
  const calls = spec.turns.flatMap((t) => t.toolCalls ?? []);
  return {
    id: `${spec.contextId}#${spec.sample}@${spec.step}`,
    contextId: spec.contextId,
    sample: spec.sample,
    seed: 1000 + spec.sample,
    step: spec.step,
    messages,
    promptMessages: 2,
    tokens: { inputIds, promptLength, generated, logprobs: Array.from({ length: count }, (_, k) => oldLogprob(k)) },
    finish: spec.finish,
    rewards,
    reward: spec.reward,
    rewardSource: spec.rewardSource,
    ...(spec.opd ? { teacherGap: Array.from({ length: count }, (_, k) => gapOf(k)) } : {}),
    summary: { turns: spec.turns.length, toolCalls: calls.length, invalidToolCalls: calls.filter((c) => !c.ok).length, tokens: count, reward: spec.reward, seconds: 0.4 },
  };
}

/** Five episodes: a tool call that works, one that fails, an OPD story, two rewarded turns, and no reward. */
export function sampleEpisodes(): Episode[] {
  const calc = (expr: string, ok: boolean, result: string) => ({ name: 'calculator', arguments: { expression: expr }, ok, result });
  return [
    buildEpisode({
      contextId: 'tasks.jsonl:1', sample: 0, step: 1, prompt: 'What is 17 times 3?', finish: 'answer', reward: 1, rewardSource: 'task',
      turns: [{ text: 'Let me compute it.', toolCalls: [calc('17*3', true, '51')] }, { text: 'The answer is 51.', reward: 1 }],
    }),
    buildEpisode({
      contextId: 'tasks.jsonl:1', sample: 1, step: 1, prompt: 'What is 17 times 3?', finish: 'answer', reward: -1, rewardSource: 'task',
      turns: [{ text: 'I will divide.', toolCalls: [calc('17/0', false, 'error: division by zero')] }, { text: 'It is 20.', reward: -1 }],
    }),
    buildEpisode({
      contextId: 'story-session/1', sample: 0, step: 2, prompt: 'Tell me a story about a cat.', finish: 'max_tokens', reward: null, rewardSource: 'opd', opd: true,
      turns: [{ text: 'Once upon a time there was a little cat named Tom.' }],
    }),
    buildEpisode({
      contextId: 'tasks.jsonl:2', sample: 0, step: 2, prompt: 'Add 2 and 2, then double it.', finish: 'max_turns', reward: 0, rewardSource: 'replay',
      turns: [
        { text: 'First the sum.', toolCalls: [calc('2+2', true, '4')], reward: 0.5 },
        { text: 'Now double.', toolCalls: [calc('4*2', true, '8')], reward: -0.5 },
      ],
    }),
    buildEpisode({
      contextId: 'tasks.jsonl:3', sample: 2, step: 3, prompt: 'Look up the weather.', finish: 'tool_errors', reward: null, rewardSource: 'none',
      turns: [{ text: 'Checking.', toolCalls: [{ name: 'weather', arguments: '{not json', ok: false, result: 'error: arguments are not JSON' }] }],
    }),
  ];
}

/** The lines of an episodes.jsonl with a blank line, a line that is not an episode, and a torn last line. */
export function episodesFileText(episodes: Episode[], torn: Episode | null): string {
  const lines = episodes.map((e) => JSON.stringify(e));
  lines.splice(3, 0, '', JSON.stringify({ id: 'not-an-episode', messages: 'none' }));
  const text = lines.join('\n') + '\n';
  return torn ? text + JSON.stringify(torn).slice(0, 120) : text;
}

/** A listed run's record, as the training service keeps it. */
export function runInfo(runId: string, outDir: string, modelDir = DEMO_MODEL, startedAt = Date.now()): TrainRunInfo {
  const d = TRAIN_DEFAULTS;
  return {
    runId, status: 'finished', startedAt, executionProvider: 'CPUExecutionProvider', phase: null, lastProgress: null, adapterDir: outDir, error: null,
    config: {
      modelDir, outDir, method: 'combine', steps: 3, batchSize: 4, lr: d.lr, optimizer: d.optimizer, loraR: d.loraR, loraAlpha: d.loraAlpha,
      targets: [...d.targets], device: 'cpu', seed: 0, checkpointEvery: d.saveEvery, onPolicy: defaultOnPolicySettings(),
    },
  };
}

/** Lists runs for a database, as the Training page would have (the runs file beside it). */
export function writeRunsFile(dbPath: string, runs: TrainRunInfo[]): void {
  fs.writeFileSync(runsFileFor(dbPath), JSON.stringify({ format: 1, runs }, null, 1));
}

export function writeEpisodes(runDir: string, text: string): string {
  fs.mkdirSync(runDir, { recursive: true });
  const file = path.join(runDir, EPISODES_FILE);
  fs.writeFileSync(file, text);
  return file;
}
