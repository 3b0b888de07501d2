// A sample captured live from the model being trained trains its captured reply only with a ±1
// label (docs/design.md §On-policy training): without one the reply has no reward, and a 0
// would join GRPO's group as a real reward of 0.
import { describe, expect, it } from 'vitest';
import type { Reward } from '../../src-shared/types.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { sampleContextLines, stepContexts } from '../../src-main/onpolicy/contexts.js';
import { capturedEpisode, stepRow } from '../../src-main/onpolicy/scoring.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { MODEL, STORY, storySample } from './helpers.js';

const tokenizer = ChatTokenizer.load(MODEL);
const promptIds = tokenizer.encodeChat(STORY, { addGenerationPrompt: true });
const captured = (reward: Reward) => storySample(`r${reward}`, 'A dog named Tim.', { reward, rollout: { promptIds, tokens: [5, 6, 7], logprobs: [-1, -2, -0.5] } });

function contextsOf(rewards: Reward[]) {
  const { lines } = sampleContextLines(rewards.map(captured), 'combine', false, tokenizer, 512);
  return stepContexts(lines, new ToolRegistry([]), 'contexts.jsonl');
}

describe('a captured reply', () => {
  it('is kept with its context only when the user labelled it ±1', () => {
    const contexts = contextsOf([1, 0, -1]);
    expect(contexts.map((c) => [c.id, c.captured !== undefined])).toEqual([['r1/1', true], ['r0/1', false], ['r-1/1', true]]);
  });

  it('becomes an episode with the label as its reward, and no episode without a label', () => {
    const [plus, none, minus] = contextsOf([1, 0, -1]);
    expect(capturedEpisode(plus!, 4, 0)).toMatchObject({ reward: 1, rewardSource: 'label', rewards: [{ at: promptIds.length + 2, r: 1 }] });
    expect(capturedEpisode(minus!, 4, 0)).toMatchObject({ reward: -1, rewards: [{ at: promptIds.length + 2, r: -1 }] });
    expect(capturedEpisode(none!, 4, 0)).toBeNull();
    // A contexts.jsonl written before the rule (captured kept with label 0) still trains nothing from it.
    expect(capturedEpisode({ ...none!, captured: plus!.captured! }, 4, 0)).toBeNull();
  });

  it('without a label and without a hint, gives the sample nothing to train with', () => {
    const { lines, skipped } = sampleContextLines([{ ...captured(0), hint: null }], 'combine', false, tokenizer, 512);
    expect(lines).toEqual([]);
    expect(skipped).toEqual({ 'no hint, no judge and no captured reply with a label': 1 });
  });
});

describe('an episode longer than the run\'s length', () => {
  it('is skipped, never cut from the left: its old log-probs are those of the whole context', () => {
    const [plus] = contextsOf([1]);
    const episode = capturedEpisode(plus!, 4, 0)!;
    const length = episode.tokens.inputIds.length;
    expect(stepRow(episode, plus!, 'combine', length, 'none')).toMatchObject({ row: { inputIds: episode.tokens.inputIds, oldLogprobs: [-1, -2, -0.5] } });
    expect(stepRow(episode, plus!, 'combine', length - 1, 'none')).toBe('over');
    expect(stepRow(episode, plus!, 'rl', 3, 'none')).toBe('over');
    // On a quantised base the rollout's log-probs are not the step's arithmetic: old is the policy's own.
    const quantised = stepRow(episode, plus!, 'combine', length, 'int4');
    expect(quantised).toMatchObject({ row: { rolloutLogprobs: [-1, -2, -0.5] } });
    expect(quantised !== 'over' && quantised?.row.oldLogprobs).toBeUndefined();
  });
});
