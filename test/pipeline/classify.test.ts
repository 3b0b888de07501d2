import { describe, expect, it } from 'vitest';
import { analyseSession, classifyTurns, isMetadataText, windowContext, fullContext } from '../../src-main/pipeline/classify.js';
import type { ImportedTurn } from '../../src-shared/types.js';
import { SESSION_001, SESSION_002, SESSION_003, SORTING, conv, type TurnSpec } from '../store/helpers.js';

const turns = (spec: TurnSpec[]): ImportedTurn[] => conv('x', spec).turns;

describe('the sample examples of docs/design.md §Samples and next states', () => {
  it('the 8-turn sorting conversation gives exactly 3 samples with the three user replies as feedback', () => {
    const t = turns(SORTING);
    expect(t).toHaveLength(8);
    const { samples } = analyseSession(t);
    expect(samples).toHaveLength(3);
    expect(samples.map((s) => t[s.feedbackTurn].text)).toEqual([
      'No, I said Python not JavaScript. Please use Python.',
      'Perfect, thanks! Can you also add a reverse parameter?',
      'Great, exactly what I needed!',
    ]);
    expect(samples.map((s) => s.responseTurn)).toEqual([2, 4, 6]);
    expect(samples[0].contextTurns.map((i) => t[i].role)).toEqual(['system', 'user']);
    expect(samples.every((s) => s.nextStateRole === 'user')).toBe(true);
  });

  it('the three-session example gives 2, 2 and 3 samples', () => {
    expect(SESSION_001).toHaveLength(6);
    expect(turns(SESSION_001)[0].role).toBe('system');
    expect(SESSION_002).toHaveLength(5);
    expect(SESSION_003).toHaveLength(7);
    expect(analyseSession(turns(SESSION_001)).samples).toHaveLength(2);
    expect(analyseSession(turns(SESSION_002)).samples).toHaveLength(2);
    expect(analyseSession(turns(SESSION_003)).samples).toHaveLength(3);
  });

  it('the minimal conversations each give at least one sample', () => {
    const a = analyseSession(turns([['user', 'hi'], ['assistant', 'Hello!'], ['user', 'thanks']]));
    const b = analyseSession(turns([['system', 'Be brief.'], ['user', 'hi'], ['assistant', 'Hello!'], ['user', 'thanks']]));
    expect(a.samples.length).toBeGreaterThanOrEqual(1);
    expect(b.samples.length).toBeGreaterThanOrEqual(1);
    expect(b.samples[0].contextTurns).toEqual([0, 1]);
    expect(a.noSampleReason).toBeNull();
  });
});

describe('classification', () => {
  it('marks system, tool, hidden and metadata turns side with a reason', () => {
    const t: ImportedTurn[] = [
      { role: 'system', text: 'sys' },
      { role: 'user', text: 'custom instructions', hidden: true },
      { role: 'user', text: 'run ls' },
      { role: 'assistant', text: '', toolCalls: [{ name: 'shell', arguments: '{"cmd":"ls"}' }] },
      { role: 'tool', text: 'a.txt b.txt' },
      { role: 'assistant', text: 'There are two files.' },
      { role: 'user', text: '[METADATA] client=web' },
      { role: 'user', text: 'thanks' },
    ];
    const { classes } = classifyTurns(t);
    expect(classes.map((c) => c.classification)).toEqual(['side', 'side', 'main', 'main', 'side', 'main', 'side', 'main']);
    expect(classes[0].sideReason).toBe('system turn');
    expect(classes[1].sideReason).toMatch(/hidden/);
    expect(classes[4].sideReason).toMatch(/tool output/);
    expect(classes[6].sideReason).toMatch(/metadata/);
  });

  it('a tool turn is the next state of the assistant turn that called the tool', () => {
    const t: ImportedTurn[] = [
      { role: 'user', text: 'what is in the folder?' },
      { role: 'assistant', text: '', toolCalls: [{ name: 'shell', arguments: '{"cmd":"ls"}' }] },
      { role: 'tool', text: 'a.txt' },
      { role: 'assistant', text: 'One file: a.txt.' },
      { role: 'user', text: 'great' },
    ];
    const { samples } = analyseSession(t);
    expect(samples.map((s) => [s.responseTurn, s.feedbackTurn, s.nextStateRole])).toEqual([[1, 2, 'tool'], [3, 4, 'user']]);
    expect(samples[1].contextTurns).toEqual([0, 1, 2]);
  });

  it('an assistant turn with no later reaction is side; so is one followed by another reply', () => {
    const t = turns([['user', 'hi'], ['assistant', 'part one'], ['assistant', 'part two'], ['user', 'ok thanks'], ['assistant', 'bye']]);
    const { classes, nextState } = classifyTurns(t);
    expect(classes[1]).toEqual({ classification: 'side', sideReason: 'another assistant turn follows before any reaction' });
    expect(classes[2].classification).toBe('main');
    expect(nextState[2]).toBe(3);
    expect(classes[4]).toEqual({ classification: 'side', sideReason: 'no user or tool turn follows this reply' });
  });

  it('a user turn is main after a reply or as the first user turn, side after another user turn', () => {
    const t = turns([['system', 's'], ['user', 'one'], ['user', 'two'], ['assistant', 'a'], ['user', 'three']]);
    const { classes } = classifyTurns(t);
    expect(classes.map((c) => c.classification)).toEqual(['side', 'main', 'side', 'main', 'main']);
    expect(classes[2].sideReason).toMatch(/follows another user message/);
  });

  it('recognises metadata prefixes as whole words, case-insensitively', () => {
    for (const text of ['[METADATA] x', '  [internal] note', 'function_call: {"a":1}', 'tool_result {}', 'System: be nice']) expect(isMetadataText(text)).toBe(true);
    for (const text of ['function_calls are neat', 'the system: works', 'metadata is data', 'tool_results']) expect(isMetadataText(text)).toBe(false);
  });

  it('gives each session without samples its reason', () => {
    expect(analyseSession(turns([['user', 'hello?'], ['user', 'anyone?']])).noSampleReason).toBe('no assistant turn');
    expect(analyseSession(turns([['user', 'hi'], ['assistant', 'Hello!']])).noSampleReason).toBe('no reaction after any reply');
    expect(analyseSession(turns([['user', 'hi'], ['assistant', '[INTERNAL] routing'], ['user', 'hello?']])).noSampleReason).toBe('everything side');
  });
});

describe('context window', () => {
  const t = turns([
    ['system', 'sys'], ['user', 'u1'], ['assistant', 'a1'], ['user', 'u2'], ['assistant', 'a2'], ['user', 'u3'], ['assistant', 'a3'], ['user', 'u4'],
  ]);

  it('keeps the system turn plus the last N turns', () => {
    const full = fullContext(t, 6);
    expect(full).toEqual([0, 1, 2, 3, 4, 5]);
    expect(windowContext(t, full, { lastTurns: 2 })).toEqual([0, 4, 5]);
    const { samples } = analyseSession(t, { lastTurns: 1 });
    expect(samples.map((s) => s.contextTurns)).toEqual([[0, 1], [0, 3], [0, 5]]);
    expect(samples[2].fullContextTurns).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('fits a token budget from the newest turn back, always keeping the system turn and the last turn', () => {
    const long = turns([['system', 'x'.repeat(40)], ['user', 'y'.repeat(400)], ['assistant', 'z'.repeat(40)], ['user', 'w'.repeat(40)]]);
    // system 10 tokens + last user 10 + assistant 10 = 30 ≤ 35; the 100-token user does not fit.
    expect(windowContext(long, [0, 1, 2, 3], { tokenBudget: 35 })).toEqual([0, 2, 3]);
    expect(windowContext(long, [0, 1, 2, 3], { tokenBudget: 1 })).toEqual([0, 3]);
  });
});
