/**
 * The replay judge (docs/design.md §Evaluation): labels a reply generated for a held-out
 * context, knowing how the user really reacted to the original. m votes, read and counted
 * with the reward judge's rules (./parse.ts, ./votes.ts); every vote keeps the prompt version.
 *
 *     const { reward, votes } = await judgeReplay(completer, input, { votes: 3, seed: 42 });
 */
import type { Reward } from '../../src-shared/types.js';
import type { ReplayVote } from '../../src-shared/eval-replay.js';
import { DEFAULT_JUDGE_MAX_TOKENS, JUDGE_TEMPERATURE, type ChatCompleter } from './llm-judge.js';
import { parseRewardAnswer } from './parse.js';
import { REPLAY_PROMPT_VERSION, replayPrompt, type ReplayJudgeInput } from './prompts.js';
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
  const messages = replayPrompt(input);
  const raws = await Promise.all(Array.from({ length: Math.max(1, o.votes) }, (_, i) =>
    completer.complete(messages, {
      temperature: o.temperature ?? JUDGE_TEMPERATURE, maxTokens: o.maxTokens ?? DEFAULT_JUDGE_MAX_TOKENS,
      seed: (o.seed + i) & 0x7fffffff, signal: o.signal,
    })));
  const votes: ReplayVote[] = raws.map((raw) => {
    const reward = parseRewardAnswer(raw);
    return { raw, ...(reward !== undefined ? { reward } : {}), prompt: REPLAY_PROMPT_VERSION };
  });
  return { reward: rewardFromVotes(votes), votes };
}
