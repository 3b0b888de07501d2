/**
 * An episode as a training row, in the `--data` line format (docs/design.md §Rollouts):
 *
 *     {"input_ids":[…], "response_start":k, "old_logprobs":[…], "response_mask":[…],
 *      "rewards":[{"at":i,"r":1}], "reward":1, "group":"tasks.jsonl:3@0", "episode_id":"tasks.jsonl:3#0@0"}
 *
 * - `response_start`: the first generated token; everything from there to the end is the
 *   response, tool turns included;
 * - `old_logprobs`, `response_mask`: one per response token; the rollout's log-prob and 1 on
 *   generated tokens, 0 and 0 on the tool turns' template tokens (they are context, not actions);
 * - `rewards`: the episode's rewards at positions of `input_ids` (the last token of the
 *   rewarded assistant turn); `reward`: the episode's reward (0 without one), for estimators
 *   that give every response token the same advantage;
 * - `group`: `contextId@step`, the K episodes of one context in one step (GRPO's group).
 */
import type { Episode } from '../../src-shared/rollout.js';

export interface EpisodeRow {
  input_ids: number[];
  response_start: number;
  old_logprobs: number[];
  response_mask: number[];
  rewards: { at: number; r: number }[];
  reward: number;
  group: string;
  episode_id: string;
}

/** The episode's training row, or null when it generated nothing (nothing to train). */
export function episodeRow(episode: Episode): EpisodeRow | null {
  const { inputIds, generated, logprobs } = episode.tokens;
  if (!generated.length) return null;
  const start = generated[0]!.start;
  // A trailing tool turn never comes after the last reply (nothing was generated after it), but cut defensively.
  const end = generated.at(-1)!.end;
  const oldLogprobs = new Array<number>(end - start).fill(0);
  const mask = new Array<number>(end - start).fill(0);
  let k = 0;
  for (const span of generated) {
    for (let t = span.start; t < span.end; t++) {
      oldLogprobs[t - start] = logprobs[k++]!;
      mask[t - start] = 1;
    }
  }
  return {
    input_ids: inputIds.slice(0, end),
    response_start: start,
    old_logprobs: oldLogprobs,
    response_mask: mask,
    rewards: episode.rewards.filter((r) => r.at < end),
    reward: episode.reward ?? 0,
    group: `${episode.contextId}@${episode.step}`,
    episode_id: episode.id,
  };
}
