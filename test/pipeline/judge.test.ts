import { describe, expect, it } from 'vitest';
import { heuristicReward, isRefusal, looksLikeToolError, scoreFeedback } from '../../src-main/judge/heuristic.js';
import { extractHint, givesDirection, isUsefulHint } from '../../src-main/judge/hint-rules.js';
import { HeuristicJudge, majorityVote } from '../../src-main/judge/verdicts.js';
import { enhancedContext, HINT_PREFIX } from '../../src-main/pipeline/hint-context.js';

const user = (text: string) => ({ role: 'user' as const, text });
const reward = (feedback: string, reply = 'Here you go.') => heuristicReward(reply, user(feedback)).reward;

describe('heuristic reward', () => {
  it('scores the seed feedbacks: correction −1, thanks +1, praise +1', () => {
    expect(reward('No, I said Python not JavaScript. Please use Python.')).toBe(-1);
    expect(reward('Perfect, thanks! Can you also add a reverse parameter?')).toBe(1);
    expect(reward('Great, exactly what I needed!')).toBe(1);
  });

  it('matches whole words only: "no" is not in "know", "nothing" or "another"', () => {
    expect(scoreFeedback("I don't know. Tell me about another topic; nothing else.").score).toBe(0);
    expect(reward('No, that is not it.')).toBe(-1);
    expect(reward('know-how matters')).toBe(0);
  });

  it('takes care of negation', () => {
    expect(reward('not bad')).toBe(1);
    expect(reward("it's not working")).toBe(-1);
    expect(reward('that is not correct')).toBe(-1);
    expect(reward("this doesn't work")).toBe(-1);
    expect(reward('not great')).toBe(-1);
    expect(reward('No problem, thanks a lot')).toBe(1);
  });

  it('counts change and redo requests as negative, and new questions as ambiguous', () => {
    expect(reward('Can you make it shorter?')).toBe(-1);
    expect(reward('Too verbose.')).toBe(-1);
    expect(reward('Use TypeScript instead.')).toBe(-1);
    expect(reward('tell me a joke')).toBe(0);
    expect(reward('hi again')).toBe(0);
  });

  it('detects refusals in the reply as −1 whatever the user said', () => {
    expect(isRefusal("I'm sorry, but I cannot help with that.")).toBe(true);
    expect(isRefusal('I am unable to browse the internet.')).toBe(true);
    expect(isRefusal("I can't help with that request.")).toBe(true);
    expect(isRefusal('Here is the code you asked for.')).toBe(false);
    expect(heuristicReward('I cannot do that.', user('thanks anyway')).reward).toBe(-1);
  });

  it('judges tool output: an error is −1, a result is +1', () => {
    expect(looksLikeToolError('Traceback (most recent call last):\n  File "x.py"\nZeroDivisionError: division by zero')).toBe(true);
    expect(looksLikeToolError('bash: foo: command not found')).toBe(true);
    expect(looksLikeToolError('process exited with exit code 2')).toBe(true);
    expect(looksLikeToolError('compiled: 0 errors, 0 warnings')).toBe(false);
    expect(looksLikeToolError('a.txt  b.txt')).toBe(false);
    expect(heuristicReward('', { role: 'tool', text: 'ENOENT: no such file' }).reward).toBe(-1);
    expect(heuristicReward('', { role: 'tool', text: '42' }).reward).toBe(1);
  });
});

describe('rule-based hints', () => {
  it('extracts the directive of a correction', () => {
    expect(extractHint(user('No, I said Python not JavaScript. Please use Python.'))).toBe('I said Python not JavaScript. Please use Python.');
    expect(extractHint(user('Use pathlib instead of os.path.'))).toBe('Use pathlib instead of os.path.');
    expect(extractHint(user('Way too verbose.'))).toBe('Be more concise: the previous reply was too long.');
    expect(extractHint(user('Hmm, you should check for an empty list first'))).toBe('You should check for an empty list first.');
    expect(extractHint(user('no, I meant the metric system'))).toBe('I meant the metric system.');
    expect(extractHint(user('Could you rewrite it without recursion?'))).toBe('Rewrite it without recursion.');
  });

  it('gives no hint for praise, follow-ups, or purely negative reactions', () => {
    expect(extractHint(user('Perfect, thanks! Can you also add a reverse parameter?'))).toBeNull();
    expect(extractHint(user('Great, exactly what I needed!'))).toBeNull();
    expect(extractHint(user('That was wrong.'))).toBeNull();
    expect(extractHint(user('No, not what I asked for.'))).toBeNull();
    expect(extractHint(user('Please also add tests.'))).toBeNull();
  });

  it('applies the quality filter: longer than 10 characters and gives a direction', () => {
    expect(isUsefulHint('Use X.')).toBe(false);
    expect(isUsefulHint('that was totally wrong')).toBe(false);
    expect(givesDirection('that was wrong')).toBe(false);
    expect(isUsefulHint('Use a dict for the lookup.')).toBe(true);
  });

  it('names a tool error as the hint', () => {
    const hint = extractHint({ role: 'tool', text: 'Traceback (most recent call last):\nKeyError: missing key "id"' }, true);
    expect(hint).toBe('The tool call failed: KeyError: missing key "id"');
    expect(extractHint({ role: 'tool', text: 'ok' }, false)).toBeNull();
  });
});

describe('votes and hint choice (docs/design.md §Votes)', () => {
  it('majority vote drops unparseable votes and gives 0 on a tie or no valid vote', () => {
    expect(majorityVote([{ reward: 1, raw: '' }, { reward: 1, raw: '' }, { reward: -1, raw: '' }])).toBe(1);
    expect(majorityVote([{ reward: 1, raw: '' }, { reward: -1, raw: '' }, { raw: 'garbage' }])).toBe(0);
    expect(majorityVote([{ raw: 'a' }, { raw: 'b' }])).toBe(0);
    expect(majorityVote([{ reward: -1, raw: '' }, { raw: 'x' }])).toBe(-1);
  });

  it('the heuristic backend returns one vote with its evidence', async () => {
    const verdict = await new HeuristicJudge().judge(
      { sessionId: 's', responseTurn: 2, context: [], response: 'function f() {}', responseMessage: { role: 'assistant', content: '' }, nextState: user('No, I said Python.') },
      { hints: true, votes: 3 },
    );
    expect(verdict.reward).toBe(-1);
    expect(verdict.hint).toBe('I said Python.');
    expect(verdict.votes).toHaveLength(1);
    expect(verdict.votes[0].raw).toMatch(/I said/);
  });
});

describe('enhanced (teacher) context', () => {
  it('appends the hint to the last user message', () => {
    const ctx = [
      { role: 'system' as const, content: 's' },
      { role: 'user' as const, content: 'first' },
      { role: 'assistant' as const, content: 'a' },
      { role: 'user' as const, content: 'second' },
    ];
    const out = enhancedContext(ctx, 'Use Python.');
    expect(out[3].content).toBe("second\n\n[user's hint / instruction]\nUse Python.");
    expect(out[1].content).toBe('first');
    expect(ctx[3].content).toBe('second');
  });

  it('falls back to the last message, or a new user message', () => {
    expect(enhancedContext([{ role: 'system', content: 's' }], 'hint text')[0].content).toBe('s' + HINT_PREFIX + 'hint text');
    expect(enhancedContext([], 'hint text')).toEqual([{ role: 'user', content: "[user's hint / instruction]\nhint text" }]);
  });
});
