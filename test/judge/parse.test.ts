// The judge's answer parsing and docs/design.md §Votes's vote and hint rules, on crafted judge outputs.
import { describe, expect, it } from 'vitest';
import type { Vote } from '../../src-shared/types.js';
import { lastBoxed, parseHintAnswer, parseRewardAnswer, stripReasoning } from '../../src-main/judge/parse.js';
import { hintFromVotes, rewardFromVotes } from '../../src-main/judge/votes.js';
import { clip, hintPrompt, promptVersionFor, REWARD_PROMPT_VERSION, rewardPrompt } from '../../src-main/judge/prompts.js';
import { voteSeed } from '../../src-main/judge/llm-judge.js';

describe('reward answers: the last \\boxed{} after any reasoning', () => {
  it('reads 1, -1 and 0, in the usual spellings', () => {
    expect(parseRewardAnswer('\\boxed{1}')).toBe(1);
    expect(parseRewardAnswer('The user thanked the assistant. \\boxed{+1}')).toBe(1);
    expect(parseRewardAnswer('\\boxed{-1}')).toBe(-1);
    expect(parseRewardAnswer('\\boxed{ −1 }')).toBe(-1); // Unicode minus, spaces
    expect(parseRewardAnswer('$\\boxed{0}$')).toBe(0);
    expect(parseRewardAnswer('\\boxed{\\text{-1}}')).toBe(-1);
  });

  it('takes the last of several boxed values', () => {
    expect(parseRewardAnswer('At first \\boxed{1} seemed right, but the user corrected it: \\boxed{-1}')).toBe(-1);
    expect(parseRewardAnswer('\\boxed{-1} \\boxed{0} \\boxed{1}')).toBe(1);
  });

  it('ignores \\boxed{} inside the reasoning', () => {
    expect(parseRewardAnswer('<think>Maybe \\boxed{1}? No: the user says "no".</think>\nFinal: \\boxed{-1}')).toBe(-1);
    // a template that opened <think> in the prompt: only a lone </think> appears
    expect(parseRewardAnswer('the user moved on, so \\boxed{-1} is wrong</think>\\boxed{1}')).toBe(1);
    // reasoning with a boxed value and no answer after it: unparseable, not the reasoning's value
    expect(parseRewardAnswer('<think>clearly \\boxed{1}</think>\nI cannot decide.')).toBeUndefined();
    // generation cut off mid-thought
    expect(parseRewardAnswer('<think>so the answer is \\boxed{1} unless')).toBeUndefined();
  });

  it('gives undefined (unparseable) for garbage, other values, or a broken last box', () => {
    expect(parseRewardAnswer('Once upon a time there was a little bird.')).toBeUndefined();
    expect(parseRewardAnswer('boxed{1}')).toBeUndefined();
    expect(parseRewardAnswer('\\boxed{2}')).toBeUndefined();
    expect(parseRewardAnswer('\\boxed{yes}')).toBeUndefined();
    expect(parseRewardAnswer('\\boxed{1} then \\boxed{maybe}')).toBeUndefined(); // the last one decides
    expect(parseRewardAnswer('\\boxed{1} and \\boxed{-1')).toBeUndefined(); // last box cut off
    expect(parseRewardAnswer('')).toBeUndefined();
  });

  it('strips reasoning and finds boxes with balanced braces', () => {
    expect(stripReasoning('<think>a</think>b')).toBe('b');
    expect(stripReasoning('a<think>b')).toBe('a');
    expect(stripReasoning('plain')).toBe('plain');
    expect(lastBoxed('\\boxed{\\frac{1}{2}} and \\boxed {x}')).toBe('x');
    expect(lastBoxed('\\boxed{\\frac{1}{2}}')).toBe('\\frac{1}{2}');
    expect(lastBoxed('nothing')).toBeNull();
  });
});

describe('hint answers', () => {
  it('reads the answer and the tagged hint after the reasoning', () => {
    expect(parseHintAnswer('\\boxed{1}\n[HINT_START]Use Python, not JavaScript.[HINT_END]')).toEqual({ answer: 1, hint: 'Use Python, not JavaScript.' });
    expect(parseHintAnswer('<think>[HINT_START]draft[HINT_END] \\boxed{1}</think>\\boxed{-1}')).toEqual({ answer: -1 });
    expect(parseHintAnswer('[HINT_START]first[HINT_END] [HINT_START]Write the code in Python.[HINT_END] \\boxed{1}')).toEqual({
      answer: 1,
      hint: 'Write the code in Python.',
    });
  });

  it('missing tags give no hint; only 1 and -1 are answers', () => {
    expect(parseHintAnswer('\\boxed{1}\n[HINT_START]Use Python instead of JavaScript')).toEqual({ answer: 1 }); // cut off: no end tag
    expect(parseHintAnswer('\\boxed{1}\nUse Python instead.[HINT_END]')).toEqual({ answer: 1 }); // no start tag
    expect(parseHintAnswer('\\boxed{1}\n[HINT_START]   [HINT_END]')).toEqual({ answer: 1 }); // empty
    expect(parseHintAnswer('\\boxed{0}')).toEqual({});
    expect(parseHintAnswer('a story about a cat')).toEqual({});
  });
});

const votes = (...rewards: (1 | -1 | 0 | undefined)[]): Vote[] => rewards.map((reward, i) => ({ raw: `vote ${i}`, ...(reward !== undefined ? { reward } : {}) }));

describe('majority vote (docs/design.md §Votes)', () => {
  it('the most common value wins', () => {
    expect(rewardFromVotes(votes(1, 1, -1))).toBe(1);
    expect(rewardFromVotes(votes(-1, -1, 1))).toBe(-1);
    expect(rewardFromVotes(votes(0, 0, 1))).toBe(0);
    expect(rewardFromVotes(votes(1))).toBe(1);
  });

  it('a tie for the top count gives 0', () => {
    expect(rewardFromVotes(votes(1, -1))).toBe(0);
    expect(rewardFromVotes(votes(1, -1, 0))).toBe(0);
    expect(rewardFromVotes(votes(1, 1, -1, -1, 0))).toBe(0);
    expect(rewardFromVotes(votes(-1, -1, 1, 1))).toBe(0);
  });

  it('unparseable votes are dropped; no valid vote gives 0', () => {
    expect(rewardFromVotes(votes(1, undefined, undefined))).toBe(1);
    expect(rewardFromVotes(votes(-1, undefined, 1, -1))).toBe(-1);
    expect(rewardFromVotes(votes(1, undefined, -1))).toBe(0); // still a tie among the valid ones
    expect(rewardFromVotes(votes(undefined, undefined, undefined))).toBe(0);
    expect(rewardFromVotes([])).toBe(0);
  });
});

describe('hint choice (docs/design.md §Votes)', () => {
  const hintVote = (hintAnswer: 1 | -1 | undefined, hint?: string): Vote => ({ raw: '', hintRaw: '', ...(hintAnswer ? { hintAnswer } : {}), ...(hint ? { hint } : {}) });

  it('needs more than 10 characters: exactly 10 is not enough, 11 is', () => {
    expect('Use Python'.length).toBe(10);
    expect(hintFromVotes([hintVote(1, 'Use Python')])).toBeNull();
    expect(hintFromVotes([hintVote(1, 'Use Python!')])).toBe('Use Python!');
    expect(hintFromVotes([hintVote(1, '   Use Python   ')])).toBeNull(); // length counted after trimming
  });

  it('takes the longest among the votes that answered 1', () => {
    const chosen = hintFromVotes([
      hintVote(1, 'Use Python 3.'),
      hintVote(-1, 'This hint is the longest of them all but the vote said -1.'),
      hintVote(undefined, 'An unparseable vote carries no hint either, however long.'),
      hintVote(1, 'Write the function in Python, not JavaScript.'),
      hintVote(1, 'Answer in Python.'),
    ]);
    expect(chosen).toBe('Write the function in Python, not JavaScript.');
  });

  it('the longest hint that gives a direction wins over a longer one that only says it was wrong (issue 33)', () => {
    const verdictOnly = 'No, that was wrong, that is not what I asked for at all.';
    const chosen = hintFromVotes([hintVote(1, verdictOnly), hintVote(1, 'Use Python 3.'), hintVote(1, 'Answer in Python 3, with type hints.')]);
    expect(chosen).toBe('Answer in Python 3, with type hints.');
    // When none gives a direction, the longest is still kept (training will not use it).
    expect(hintFromVotes([hintVote(1, verdictOnly), hintVote(1, 'That was wrong.')])).toBe(verdictOnly);
  });

  it('no qualifying vote means no hint', () => {
    expect(hintFromVotes([hintVote(-1), hintVote(-1), hintVote(1)])).toBeNull();
    expect(hintFromVotes([])).toBeNull();
  });
});

describe('prompts', () => {
  const input = {
    sessionId: 's',
    responseTurn: 2,
    context: [],
    response: 'function sortList() {}',
    responseMessage: { role: 'assistant' as const, content: 'function sortList() {}', tool_calls: [{ type: 'function' as const, function: { name: 'run', arguments: '{"code":"x"}' } }] },
    nextState: { role: 'user' as const, text: 'No, I said Python.' },
  };

  it('show the reply (with its tool calls) and the next state, and ask for the boxed answer', () => {
    const [system, user] = rewardPrompt(input);
    expect(system!.role).toBe('system');
    expect(system!.content).toContain('\\boxed{-1}');
    expect(user!.content).toContain('function sortList() {}');
    expect(user!.content).toContain('[tool call] run({"code":"x"})');
    expect(user!.content).toContain("Next state (the user's next message)\nNo, I said Python.");
    expect(hintPrompt({ ...input, nextState: { role: 'tool', text: 'Error' } })[1]!.content).toContain('output of the tool');
    expect(hintPrompt(input)[0]!.content).toContain('[HINT_START]');
    // As OpenClaw-RL's: a successful tool output is not hindsight, and a hint never pastes it.
    expect(hintPrompt(input)[0]!.content).toMatch(/When the tool succeeded \(its output is not an error\), the call was the right move and its output is not hindsight: answer \\boxed\{-1\}\./);
    expect(hintPrompt(input)[0]!.content).toContain('it never repeats or pastes what a tool returned');
  });

  it('are versioned, and clip long texts keeping both ends', () => {
    expect(promptVersionFor(false)).toBe(REWARD_PROMPT_VERSION);
    expect(promptVersionFor(true)).toBe('reward-v1+hint-v2');
    const long = 'a'.repeat(5000) + 'END';
    const clipped = clip(long, 1000);
    expect(clipped.length).toBeLessThan(1100);
    expect(clipped.endsWith('END')).toBe(true);
    expect(clipped).toContain('characters omitted');
  });

  it('seeds differ per vote and judge, and are stable', () => {
    const seeds = new Set([0, 1, 2].flatMap((i) => [voteSeed('s', 2, 'reward', i), voteSeed('s', 2, 'hint', i)]));
    expect(seeds.size).toBe(6);
    expect(voteSeed('s', 2, 'reward', 0)).toBe(voteSeed('s', 2, 'reward', 0));
  });
});
