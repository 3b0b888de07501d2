// Which samples a run learns from (docs/design.md §At-least-one):
// - the at-least-one rule is decided per session AND method, so an rl run keeps a sample of a
//   session whose only signal is a hint, and an opd run one of a session with only rewards;
// - live capture's background training chooses exactly as training from the database does;
// - a hint the user typed is used however short (the length rule is for judges' hints), and
//   the annotator says when it is that short;
// - a run that would learn nothing says what its method needs and what the database has.
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { untrainedSamples, countWithSignal } from '../../src-main/capture/capture-loop.js';
import { hintForTraining } from '../../src-main/judge/hint-rules.js';
import { rowsFromSamples } from '../../src-main/train/batches.js';
import { shortHintNote } from '../../src-shared/training.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
const HINTED = story('hinted', 'The dog ran to the park.', 'Hmm, a cat please.');
const RATED = story('rated', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!');
const picked = (samples: TrainingSample[]) => samples.map((s) => [s.sessionId, s.responseTurn, s.reward, s.hint, s.keptByAtLeastOne]);

describe('the at-least-one rule, per session and method', () => {
  it('rl keeps a sample of a session whose only signal is a hint; opd one of a session with only a reward', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', [HINTED, RATED]));
    trainOnEverySession(ws);
    ws.setLabel('openai:hinted', 1, { hint: 'Write about a cat.' });
    ws.setLabel('openai:rated', 1, { reward: 1 });
    const rl = ws.trainingSamples({ method: 'rl' });
    expect(picked(rl)).toEqual([['openai:hinted', 1, 0, 'Write about a cat.', true], ['openai:rated', 1, 1, null, false]]);
    const rows = rowsFromSamples(rl, ChatTokenizer.load(MODEL), 'rl', 512);
    expect(rows.rows.map((r) => [r.origin, r.reward, !!r.kept, !!r.teacher])).toEqual([['openai:hinted/1', 0, true, false], ['openai:rated/1', 1, false, false]]);
    expect(picked(ws.trainingSamples({ method: 'opd' }))).toEqual([['openai:hinted', 1, 0, 'Write about a cat.', false], ['openai:rated', 1, 1, null, true]]);
    expect(picked(ws.trainingSamples({ method: 'combine' }))).toEqual([['openai:hinted', 1, 0, 'Write about a cat.', false], ['openai:rated', 1, 1, null, false]]);
    ws.close();
  });

  it('live capture trains on the samples training from the database takes, kept ones included', async () => {
    const { ws, dir } = await tempWorkspace();
    ws.applyCapture([], [HINTED, RATED], path.join(dir, 'capture-log.jsonl'));
    trainOnEverySession(ws);
    ws.setLabel('capture:hinted', 1, { hint: 'Write about a cat.' });
    ws.setLabel('capture:rated', 1, { reward: -1 });
    for (const method of ['rl', 'opd', 'combine'] as const) {
      const fromDatabase = ws.trainingSamples({ method, format: 'capture' });
      const fromLoop = untrainedSamples(ws, MODEL, new Set(), method);
      expect(picked(fromLoop), method).toEqual(picked(fromDatabase));
      expect(fromLoop.map((s) => s.keptByAtLeastOne), method).toEqual(method === 'combine' ? [false, false] : method === 'rl' ? [true, false] : [false, true]);
      // Only samples with signal count towards the loop's threshold N.
      expect(countWithSignal(fromLoop), method).toBe(method === 'combine' ? 2 : 1);
    }
    // A sample already trained on is not offered again; its session is not "kept" for it.
    expect(picked(untrainedSamples(ws, MODEL, new Set(['capture:rated/1']), 'rl'))).toEqual([['capture:hinted', 1, 0, 'Write about a cat.', true]]);
    ws.close();
  });
});

describe('hints', () => {
  it('a hint the user typed is trained on however short; a judge hint must pass the filter', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', [HINTED]));
    ws.setLabel('openai:hinted', 1, { reward: -1, hint: 'Use Python' });
    expect(picked(ws.trainingSamples({ method: 'opd' }))).toEqual([['openai:hinted', 1, -1, 'Use Python', false]]);
    const rows = rowsFromSamples(ws.trainingSamples({ method: 'opd' }), ChatTokenizer.load(MODEL), 'opd', 512);
    expect(rows.rows.map((r) => [!!r.teacher, !!r.kept])).toEqual([[true, false]]);
    expect(ws.nothingToTrain('opd')).toBeNull();
    ws.close();

    expect(hintForTraining({ source: 'manual', hint: 'Use Python' })).toBe('Use Python');
    expect(hintForTraining({ source: 'manual', hint: '   ' })).toBeNull();
    expect(hintForTraining({ source: 'heuristic', hint: 'Use Python' })).toBeNull();
    expect(hintForTraining({ source: 'judge:local', hint: 'That was wrong.' })).toBeNull(); // no direction
    expect(hintForTraining({ source: 'judge:local', hint: 'Write it in Python.' })).toBe('Write it in Python.');
  });

  it('the annotator notes a typed hint shorter than a judge hint may be, without dropping it', () => {
    expect(shortHintNote('Use Python')).toBe("10 characters: a judge's hint needs more than 10, but a hint you type is always used for training.");
    expect(shortHintNote('  Go  ')).toMatch(/^2 characters:/);
    expect(shortHintNote('Write it in Python.')).toBeNull();
    expect(shortHintNote('')).toBeNull();
    expect(shortHintNote(null)).toBeNull();
  });
});

describe('nothing to train on', () => {
  it('names what the method needs and what the database has', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', [HINTED, RATED, story('quiet', 'Tom had a red car.', 'Ok.')]));
    trainOnEverySession(ws);
    expect(ws.nothingToTrain('combine')).toBe('combine needs samples labelled ±1 or with a hint: 0 of 3 have either; label some in the annotator or run the judge');
    ws.setLabel('openai:hinted', 1, { reward: 0, hint: 'Write about a cat.' });
    expect(ws.nothingToTrain('rl')).toBe('rl needs samples labelled ±1: 0 of 3 are; label some in the annotator, or use opd/combine with the 1 hinted sample');
    expect(ws.nothingToTrain('opd')).toBeNull();
    expect(ws.nothingToTrain('combine')).toBeNull();
    ws.setLabel('openai:hinted', 1, { hint: null });
    ws.setLabel('openai:rated', 1, { reward: 1 });
    ws.setLabel('openai:quiet', 1, { reward: -1 });
    expect(ws.nothingToTrain('opd')).toBe('opd needs samples with a hint: 0 of 3 have one; add hints in the annotator or run the judge with hints, or use rl/combine with the 2 samples labelled ±1');
    expect(ws.nothingToTrain('rl')).toBeNull();
    ws.close();
    const empty = await tempWorkspace();
    expect(empty.ws.nothingToTrain('rl')).toMatch(/^nothing to train on: the database has no samples yet/);
    empty.ws.close();
  });
});
