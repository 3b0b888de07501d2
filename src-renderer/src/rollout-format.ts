// Display helpers of the Rollouts view: rewards (any real number, or none) and finish reasons.
import type { EpisodeFinish } from '../../src-shared/rollout.js';

const FINISH_TEXT: Record<EpisodeFinish, string> = {
  answer: 'answered',
  max_turns: 'turn limit',
  max_tokens: 'token limit',
  tool_errors: 'tool errors',
};

export function finishText(finish: EpisodeFinish): string {
  return FINISH_TEXT[finish];
}

/** +1, −0.5, 0, or – for no reward; three significant digits at most. */
export function signedReward(reward: number | null): string {
  if (reward === null) return '–';
  const size = String(Number(Math.abs(reward).toPrecision(3)));
  return reward > 0 ? `+${size}` : reward < 0 ? `−${size}` : '0';
}

/** The reward chip's colour class (styles.css): positive, negative, zero or none. */
export function rewardChipClass(reward: number | null): string {
  return reward === null ? 'unlabeled' : reward > 0 ? 'pos' : reward < 0 ? 'neg' : 'neutral';
}
