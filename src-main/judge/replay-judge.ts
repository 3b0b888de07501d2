/**
 * The replay judge (docs/design.md §Evaluation): labels a reply generated for a held-out
 * context, knowing how the user really reacted to the original. m votes, read and counted
 * with the reward judge's rules (./parse.ts, ./votes.ts); every vote keeps the prompt version.
 *
 *     const { reward, votes } = await judgeReplay(completer, input, { votes: 3, seed: 42 });
 *
 * The prompt is fitted to the judge model's context (./prompt-fit.ts): the conversation before
 * the reply is cut from the left, oldest turns first, keeping the replies, the reaction and the
 * hint whole. When even no conversation does not fit, the prompt without it is sent as it is
 * (a local judge then cuts it from the left with a note, as before fitting existed).
 */
import type { Reward } from '../../src-shared/types.js';
import type { ReplayVote } from '../../src-shared/eval-replay.js';
import { DEFAULT_JUDGE_MAX_TOKENS, JUDGE_TEMPERATURE, type ChatCompleter } from './llm-judge.js';
import { parseRewardAnswer } from './parse.js';
import { REPLAY_PROMPT_VERSION, replayPrompt, type PromptMessage, type ReplayJudgeInput } from './prompts.js';
import { fitPrompt, PromptTooLongError } from './prompt-fit.js';
import { rewardFromVotes } from './votes.js';

export interface ReplayJudgeOptions {
  votes: number;
  /** Vote i is asked with seed + i. */
  seed: number;
  temperature?: number;
  maxTokens?: number;
  signal?: AbortSignal;
}

export async function judgeReplay(
  completer: ChatCompleter, input: ReplayJudgeInput, o: ReplayJudgeOptions,
): Promise<{ reward: Reward; votes: ReplayVote[] }> {
  const { messages, maxTokens } = fittedReplayPrompt(completer, input, o.maxTokens ?? DEFAULT_JUDGE_MAX_TOKENS);
  const raws = await Promise.all(Array.from({ length: Math.max(1, o.votes) }, (_, i) =>
    completer.complete(messages, {
      temperature: o.temperature ?? JUDGE_TEMPERATURE, maxTokens,
      seed: (o.seed + i) & 0x7fffffff, signal: o.signal,
    })));
  const votes: ReplayVote[] = raws.map((raw) => {
    const reward = parseRewardAnswer(raw);
    return { raw, ...(reward !== undefined ? { reward } : {}), prompt: REPLAY_PROMPT_VERSION };
  });
  return { reward: rewardFromVotes(votes), votes };
}

/** The replay prompt with as many of the newest conversation turns as the judge's context holds. */
export function fittedReplayPrompt(completer: ChatCompleter, input: ReplayJudgeInput, maxTokens: number): { messages: PromptMessage[]; maxTokens: number; droppedTurns: number } {
  const build = (k: number) => replayPrompt({ ...input, context: input.context.slice(input.context.length - k) });
  if (!completer.contextTokens || !completer.countTokens) return { messages: build(input.context.length), maxTokens, droppedTurns: 0 };
  const measure = { contextTokens: () => completer.contextTokens!(), countTokens: (m: PromptMessage[]) => completer.countTokens!(m) };
  try {
    return fitPrompt(build, input.context.length, measure, maxTokens);
  } catch (err) {
    if (!(err instanceof PromptTooLongError)) throw err;
    return { messages: build(0), maxTokens, droppedTurns: input.context.length };
  }
}
