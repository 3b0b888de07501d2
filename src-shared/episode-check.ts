/**
 * Reading rollout episodes back (docs/design.md §Rollouts view): whether a parsed line of
 * `episodes.jsonl` has the Episode shape of ./rollout.ts, and where an episode's rewards and
 * teacher–student gaps sit among its messages. Node-free and pure. The one check of an
 * episode: the Rollouts view skips a line it refuses, and a run that reuses episodes
 * (src-main/rollout/episodes-file.ts) refuses the file, so nothing trains from an episode
 * whose token bookkeeping does not add up (empty spans, log-probs above 0, a gap per token
 * missing).
 */
import { EPISODE_FINISHES, type Episode, type EpisodeFinish, type RolloutRewardSource } from './rollout.js';
import type { TurnGap, TurnReward } from './rollouts-api.js';

// Records, so a source or finish added to ./rollout.ts fails to compile here until it is known.
const REWARD_SOURCES: Record<RolloutRewardSource, true> = { task: true, replay: true, label: true, opd: true, none: true };
const FINISHES: Record<EpisodeFinish, true> = { answer: true, max_turns: true, max_tokens: true, tool_errors: true };

class ShapeProblem extends Error {}

function fail(field: string, problem: string): never {
  throw new ShapeProblem(`${field} ${problem}`);
}

type Fields = Record<string, unknown>;

function record(value: unknown, field: string): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, 'must be an object');
  return value as Fields;
}

function str(value: unknown, field: string): string {
  if (typeof value !== 'string') fail(field, 'must be a string');
  return value;
}

function num(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(field, 'must be a finite number');
  return value;
}

function int(value: unknown, field: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) fail(field, `must be a whole number in ${min}…${max}`);
  return value as number;
}

function list(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) fail(field, 'must be an array');
  return value;
}

function numbers(value: unknown, field: string, length: number): void {
  const values = list(value, field);
  if (values.length !== length) fail(field, `must have ${length} values (one per generated token), has ${values.length}`);
  values.forEach((v, i) => num(v, `${field}[${i}]`));
}

function checkToolCall(value: unknown, field: string): void {
  const call = record(value, field);
  str(call.name, `${field}.name`);
  if (typeof call.ok !== 'boolean') fail(`${field}.ok`, 'must be true or false');
  str(call.result, `${field}.result`);
  num(call.ms, `${field}.ms`);
}

function checkMessage(value: unknown, field: string): void {
  const message = record(value, field);
  str(message.content, `${field}.content`);
  switch (message.role) {
    case 'system':
    case 'user':
      return;
    case 'assistant':
      if (message.toolCalls !== undefined) list(message.toolCalls, `${field}.toolCalls`).forEach((c, i) => checkToolCall(c, `${field}.toolCalls[${i}]`));
      if (message.finish !== undefined) str(message.finish, `${field}.finish`);
      return;
    case 'tool':
      str(message.name, `${field}.name`);
      if (message.error !== undefined && typeof message.error !== 'boolean') fail(`${field}.error`, 'must be true or false');
      return;
    default:
      fail(`${field}.role`, 'must be system, user, assistant or tool');
  }
}

/** Checks `tokens` and returns how many tokens were generated. */
function checkTokens(value: unknown): number {
  const tokens = record(value, 'tokens');
  const ids = list(tokens.inputIds, 'tokens.inputIds');
  ids.forEach((id, i) => int(id, `tokens.inputIds[${i}]`));
  const promptLength = int(tokens.promptLength, 'tokens.promptLength', 0, ids.length);
  let generated = 0;
  let after = promptLength;
  list(tokens.generated, 'tokens.generated').forEach((span, i) => {
    const field = `tokens.generated[${i}]`;
    const { start, end } = record(span, field);
    // Spans are in order, inside the sequence, after the prompt, and never overlap.
    int(start, `${field}.start`, after, ids.length);
    int(end, `${field}.end`, (start as number) + 1, ids.length);
    generated += (end as number) - (start as number);
    after = end as number;
  });
  numbers(tokens.logprobs, 'tokens.logprobs', generated);
  (tokens.logprobs as number[]).forEach((lp, i) => {
    if (lp > 0) fail(`tokens.logprobs[${i}]`, 'must be ≤ 0 (a log-probability)');
  });
  return generated;
}

function checkSummary(value: unknown): void {
  const summary = record(value, 'summary');
  for (const key of ['turns', 'toolCalls', 'invalidToolCalls', 'tokens'] as const) int(summary[key], `summary.${key}`);
  if (summary.reward !== null) num(summary.reward, 'summary.reward');
  num(summary.seconds, 'summary.seconds');
}

function checkEpisode(value: unknown): void {
  const e = record(value, 'the line');
  if (str(e.id, 'id') === '') fail('id', 'must not be empty');
  if (str(e.contextId, 'contextId') === '') fail('contextId', 'must not be empty');
  if (e.contextSha256 !== undefined && !/^[0-9a-f]{64}$/.test(str(e.contextSha256, 'contextSha256'))) fail('contextSha256', 'must be 64 hex digits');
  int(e.sample, 'sample');
  int(e.seed, 'seed');
  int(e.step, 'step');
  const messages = list(e.messages, 'messages');
  messages.forEach((m, i) => checkMessage(m, `messages[${i}]`));
  int(e.promptMessages, 'promptMessages', 0, messages.length);
  const generated = checkTokens(e.tokens);
  const length = (e.tokens as { inputIds: unknown[] }).inputIds.length;
  if (!FINISHES[e.finish as EpisodeFinish]) fail('finish', `must be one of ${EPISODE_FINISHES.join(', ')}`);
  list(e.rewards, 'rewards').forEach((r, i) => {
    const reward = record(r, `rewards[${i}]`);
    int(reward.at, `rewards[${i}].at`, 0, Math.max(0, length - 1));
    num(reward.r, `rewards[${i}].r`);
  });
  if (e.reward !== null) num(e.reward, 'reward');
  if (!REWARD_SOURCES[e.rewardSource as RolloutRewardSource]) fail('rewardSource', `must be one of ${Object.keys(REWARD_SOURCES).join(', ')}`);
  if (e.teacherGap !== undefined) numbers(e.teacherGap, 'teacherGap', generated);
  checkSummary(e.summary);
}

/** Why `value` is not an Episode, naming the first field that is wrong; null when it is one. */
export function episodeProblem(value: unknown): string | null {
  try {
    checkEpisode(value);
    return null;
  } catch (err) {
    if (err instanceof ShapeProblem) return err.message;
    throw err;
  }
}

/**
 * The message each generated span belongs to: span j is the j-th assistant message after the
 * prompt (each assistant turn is generated in one piece). Null when the counts differ, so
 * nothing is placed on the wrong turn.
 */
export function spanMessages(e: Episode): number[] | null {
  const assistants = e.messages.map((m, i) => (i >= e.promptMessages && m.role === 'assistant' ? i : -1)).filter((i) => i >= 0);
  return assistants.length === e.tokens.generated.length ? assistants : null;
}

/** Each reward on the assistant message whose generated span [start, end) holds its position. */
export function placeRewards(e: Episode): TurnReward[] {
  const owners = spanMessages(e);
  return e.rewards.map(({ at, r }) => {
    const span = e.tokens.generated.findIndex((s) => s.start <= at && at < s.end);
    return { at, r, message: owners && span >= 0 ? owners[span]! : -1 };
  });
}

/**
 * An OPD episode's gap per generated token, grouped by assistant message (all under message
 * −1 when the spans do not match the messages). `text(k)` is the k-th generated token's text.
 */
export function gapByTurn(e: Episode, text: (generatedIndex: number, id: number) => string): TurnGap[] | null {
  const gap = e.teacherGap;
  if (!gap) return null;
  const owners = spanMessages(e);
  const groups: TurnGap[] = [];
  let k = 0;
  e.tokens.generated.forEach((span, j) => {
    const message = owners ? owners[j]! : -1;
    let group = groups.at(-1);
    if (!group || group.message !== message) groups.push((group = { message, tokens: [], mean: 0 }));
    for (let pos = span.start; pos < span.end; pos++, k++) {
      const id = e.tokens.inputIds[pos]!;
      const old = e.tokens.logprobs[k]!;
      group.tokens.push({ id, text: text(k, id), from: old, to: old + gap[k]!, value: gap[k]! });
    }
  });
  for (const group of groups) group.mean = group.tokens.length ? group.tokens.reduce((a, t) => a + t.value, 0) / group.tokens.length : 0;
  return groups;
}
