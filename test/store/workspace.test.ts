import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UserError } from '../../src-shared/types.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import { SESSION_001, SESSION_002, SESSION_003, SORTING, conv, fakeExport, tempWorkspace, trainOnEverySession } from './helpers.js';

/** The heuristic judge over every sample, re-scoring what it judged before. */
const judgeHeuristic = (ws: Workspace) => runJudge(ws, new HeuristicJudge(), { hints: true, force: true });

describe('import into the store', () => {
  it('imports sessions, turns and samples, and counts them', async () => {
    const { ws } = await tempWorkspace();
    const summary = await ws.importExport(fakeExport('three.jsonl', [conv('s1', SESSION_001), conv('s2', SESSION_002), conv('s3', SESSION_003)]));
    expect(summary).toMatchObject({ sessions_added: 3, sessions_updated: 0, sessions_unchanged: 0, turns: 18, samples: 7, warnings: [] });
    expect(summary.added_ids).toHaveLength(3);
    expect(summary.files).toEqual([
      { path: 'three.jsonl', outcome: 'imported', format: expect.any(String), reason: null, sessions_added: 3, sessions_updated: 0, sessions_unchanged: 0, turns: 18, samples: 7, warnings: 0 },
    ]);
    expect(ws.stats()).toEqual({
      sessions: 3, turns: 18, samples: 7, labeled: { pos: 0, neg: 0, neutral: 0, unlabeled: 7 }, sessions_without_samples: 0,
    });
    expect(ws.listSamples('openai:s1').map((s) => s.responseTurn)).toEqual([2, 4]);
    ws.close();
  });

  it('gives a session without an id a stable content-hash id', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('a.json', [conv(undefined, SORTING)], { format: 'sharegpt' }));
    const [session] = ws.listSessions().sessions;
    expect(session.id).toMatch(/^sharegpt:[0-9a-f]{16}$/);
    const again = await ws.importExport(fakeExport('b.json', [conv(undefined, SORTING)], { format: 'sharegpt' }));
    expect(again.sessions_unchanged).toBe(1);
    ws.close();
  });

  it('re-importing the same export adds nothing and leaves the database file untouched', async () => {
    const { ws, dbPath } = await tempWorkspace();
    const make = () => fakeExport('x.jsonl', [conv('s1', SESSION_001), conv('s2', SESSION_002)]);
    await ws.importExport(make());
    const stats = ws.stats();
    const bytes = fs.readFileSync(dbPath);
    const again = await ws.importExport(make());
    expect(again).toMatchObject({ sessions_added: 0, sessions_updated: 0, sessions_unchanged: 2, turns: 11, samples: 4 });
    expect(ws.stats()).toEqual(stats);
    expect(fs.readFileSync(dbPath).equals(bytes)).toBe(true);
    expect(ws.query('SELECT COUNT(*) AS n FROM sources')[0]).toEqual({ n: 1 });
    ws.close();
  });

  it('a failure mid-import rolls everything back and leaves the file byte-for-byte as it was', async () => {
    const { ws, dbPath } = await tempWorkspace();
    await ws.importExport(fakeExport('good.jsonl', [conv('s1', SESSION_001)]));
    const bytes = fs.readFileSync(dbPath);
    const stats = ws.stats();
    const bad = fakeExport('/data/broken.jsonl', [conv('s2', SESSION_002), conv('s3', SESSION_003)], { failAfter: 1 });
    await expect(ws.importExport(bad)).rejects.toThrow(UserError);
    await expect(ws.importExport(fakeExport('/data/broken.jsonl', [conv('s2', SESSION_002), conv('s3', SESSION_003)], { failAfter: 1 }))).rejects.toThrow(
      /\/data\/broken\.jsonl: unexpected end of JSON input/,
    );
    expect(ws.stats()).toEqual(stats);
    ws.close();
    expect(fs.readFileSync(dbPath).equals(bytes)).toBe(true);
  });

  it('importFiles is all-or-nothing across its inputs and names the bad one', async () => {
    const { ws, dbPath } = await tempWorkspace();
    const good = fakeExport('good.jsonl', [conv('s1', SESSION_001)]);
    const bad = fakeExport('bad.jsonl', [conv('s2', SESSION_002)], { failAfter: 0 });
    const byName = new Map([['good.jsonl', good], ['bad.jsonl', bad]]);
    ws.close();
    const before = fs.readFileSync(dbPath);
    const ws2 = await Workspace.open(dbPath, { openExport: async (p) => byName.get(p)! });
    await expect(ws2.importFiles(['good.jsonl', 'bad.jsonl'])).rejects.toThrow(/^bad\.jsonl: /);
    expect(ws2.stats().sessions).toBe(0);
    ws2.close();
    expect(fs.readFileSync(dbPath).equals(before)).toBe(true);
  });

  it('a newer export updates the session and keeps the labels whose reply and context still match', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('v1.jsonl', [conv('sort', SORTING.slice(0, 6))]));
    expect(ws.listSamples().map((s) => s.responseTurn)).toEqual([2, 4]);
    ws.setLabel('openai:sort', 2, { reward: -1, hint: 'Write it in Python.' });
    ws.setLabel('openai:sort', 4, { reward: 1 });
    // The newer export continues the chat: both old samples are unchanged, one is new.
    const v2 = await ws.importExport(fakeExport('v2.jsonl', [conv('sort', SORTING)]));
    expect(v2).toMatchObject({ sessions_added: 0, sessions_updated: 1, turns: 8, samples: 3 });
    const labels = ws.listSamples().map((s) => [s.responseTurn, s.label.reward, s.label.hint, s.label.source]);
    expect(labels).toEqual([[2, -1, 'Write it in Python.', 'manual'], [4, 1, null, 'manual'], [6, null, null, null]]);
    // An export in which the second reply was edited drops only that label, and says so.
    const edited = SORTING.map((t, i) => (i === 4 ? (['assistant', 'def sort_list(xs): return sorted(xs)'] as typeof t) : t));
    const v3 = await ws.importExport(fakeExport('v3.jsonl', [conv('sort', edited)]));
    expect(v3.warnings).toEqual(['openai:sort: 1 label(s) dropped because their reply or its context changed in the newer export']);
    expect(ws.listSamples().map((s) => s.label.reward)).toEqual([-1, null, null]);
    ws.close();
  });
});

describe('labels and judging', () => {
  it('the heuristic judge labels every sample, with provenance', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING), conv('s3', SESSION_003)]));
    const summary = await judgeHeuristic(ws);
    expect(summary.judged).toBe(6);
    const samples = ws.listSamples('openai:sort');
    expect(samples.map((s) => s.label.reward)).toEqual([-1, 1, 1]);
    expect(samples[0].label.hint).toBe('I said Python not JavaScript. Please use Python.');
    expect(samples[0].label.source).toBe('heuristic');
    expect(ws.listSamples().every((s) => s.label.reward !== null)).toBe(true);
    const row = ws.query<{ judge_backend: string; judge_model: string | null; prompt_version: string }>(
      "SELECT judge_backend, judge_model, prompt_version FROM labels WHERE session_id = 'openai:sort' AND response_turn = 2",
    )[0];
    expect(row).toEqual({ judge_backend: 'heuristic', judge_model: null, prompt_version: 'heuristic-v2+hints' });
    // "I don't know much about either…" is a new question (0: "know" is not "no"); "No, I meant…" corrects.
    expect(ws.listSamples('openai:s3').map((s) => s.label.reward)).toEqual([0, -1, 1]);
    ws.close();
  });

  it('a manual label wins: it survives re-judging and re-importing', async () => {
    const { ws, dbPath } = await tempWorkspace();
    const make = () => fakeExport('x.jsonl', [conv('sort', SORTING)]);
    await ws.importExport(make());
    await judgeHeuristic(ws);
    const manual = ws.setLabel('openai:sort', 2, { reward: 1, hint: 'Keep answering in the language the user names.' });
    expect(manual.source).toBe('manual');
    const summary = await judgeHeuristic(ws);
    expect(summary).toMatchObject({ judged: 2, skippedManual: 1 });
    await ws.importExport(make());
    ws.close();
    const reopened = await Workspace.open(dbPath);
    const label = reopened.listSamples('openai:sort')[0].label;
    expect(label).toMatchObject({ reward: 1, hint: 'Keep answering in the language the user names.', source: 'manual' });
    reopened.close();
  });

  it('setLabel keeps fields not in the patch, validates, and names a missing sample', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING)]));
    await judgeHeuristic(ws);
    const l = ws.setLabel('openai:sort', 2, { repair: 'def sort_list(items):\n    return sorted(items)' });
    expect(l).toMatchObject({ reward: -1, hint: 'I said Python not JavaScript. Please use Python.', source: 'manual' });
    expect(ws.setLabel('openai:sort', 2, { hint: '' }).hint).toBeNull();
    expect(() => ws.setLabel('openai:sort', 3, { reward: 1 })).toThrow(/no sample at turn 3; its samples are at turns 2, 4, 6/);
    expect(() => ws.setLabel('nope', 1, { reward: 1 })).toThrow(/no session 'nope'/);
    expect(() => ws.setLabel('openai:sort', 2, { reward: 5 as never })).toThrow(/reward must be/);
    ws.close();
  });

  it('label edits are saved coalesced, shortly after the last one', async () => {
    const { ws, dbPath } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING)]));
    const saves = ws.storage.persistStats.saves;
    for (let i = 0; i < 30; i++) ws.setLabel('openai:sort', 2, { notes: `edit ${i}` });
    expect(ws.storage.persistStats.saves).toBe(saves);
    await new Promise((r) => setTimeout(r, 120));
    expect(ws.storage.persistStats.saves).toBe(saves + 1);
    const other = await Workspace.open(dbPath);
    expect(other.listSamples('openai:sort')[0].label.notes).toBe('edit 29');
    other.close();
    ws.close();
  });

  it('the judge runner is incremental, cancellable, and leaves LLM-judge labels to outrank the heuristic', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING)]));
    const calls: number[] = [];
    const llm = {
      provenance: { backend: 'openai' as const, model: 'tiny', promptVersion: 'v1' },
      labelSource: 'judge:tiny' as const,
      async judge(input: { responseTurn: number }) {
        calls.push(input.responseTurn);
        return { reward: 1 as const, hint: null, votes: [{ reward: 1 as const, raw: '\\boxed{1}' }] };
      },
    };
    const controller = new AbortController();
    const first = await runJudge(ws, llm, { hints: false, onProgress: ({ done }) => done === 1 && controller.abort(), signal: controller.signal });
    expect(first).toMatchObject({ judged: 1, cancelled: true });
    const second = await runJudge(ws, llm, { hints: false });
    expect(second).toMatchObject({ judged: 2, skippedUnchanged: 1 });
    expect(calls).toEqual([2, 4, 6]);
    const heuristic = await judgeHeuristic(ws);
    expect(heuristic).toMatchObject({ judged: 0, skippedHigher: 3 });
    expect(ws.listSamples().map((s) => s.label.source)).toEqual(['judge:tiny', 'judge:tiny', 'judge:tiny']);
    ws.close();
  });
});

describe('sessions, checks and the training set', () => {
  it('lists sessions with filters and reports the sessions without samples with their reasons', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(
      fakeExport('x.jsonl', [
        conv('sort', SORTING, { title: 'Sorting in Python', createdAt: 100 }),
        conv('lonely', [['user', 'hello?']], { title: 'Nobody answered', createdAt: 200 }),
        conv('unanswered', [['user', 'hi'], ['assistant', 'Hello!']], { title: 'Left on read', createdAt: 300 }),
      ]),
    );
    expect(ws.listSessions().sessions.map((s) => s.id)).toEqual(['openai:unanswered', 'openai:lonely', 'openai:sort']);
    expect(ws.listSessions({ search: 'python' }).sessions.map((s) => s.id)).toEqual(['openai:sort']);
    expect(ws.listSessions({ search: 'reverse parameter' }).total).toBe(1);
    expect(ws.listSessions({ hasSamples: false }).total).toBe(2);
    expect(ws.listSessions({ limit: 1, offset: 1 })).toMatchObject({ total: 3, sessions: [{ id: 'openai:lonely' }] });
    ws.setLabel('openai:sort', 2, { reward: -1 });
    expect(ws.listSessions({ labelStatus: 'partial' }).sessions.map((s) => s.id)).toEqual(['openai:sort']);
    const report = ws.checks();
    expect(report.stats.sessions_without_samples).toBe(2);
    expect(report.sessionsWithoutSamples).toEqual([
      { id: 'openai:lonely', title: 'Nobody answered', reason: 'no assistant turn' },
      { id: 'openai:unanswered', title: 'Left on read', reason: 'no reaction after any reply' },
    ]);
    expect(report.warnings.join('\n')).toMatch(/2 of 3 samples are unlabeled/);
    const detail = ws.getSession('openai:unanswered');
    expect(detail.noSampleReason).toBe('no reaction after any reply');
    expect(detail.turns[1]).toMatchObject({ classification: 'side', sideReason: 'no user or tool turn follows this reply' });
    ws.close();
  });

  it('trainingSamples keeps ±1 and hinted samples, and one reward-0 sample for a session that has none', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING, { createdAt: 1 }), conv('s1', SESSION_001, { createdAt: 2 })]));
    trainOnEverySession(ws);
    ws.setLabel('openai:sort', 2, { reward: -1 });
    ws.setLabel('openai:sort', 4, { reward: 0, hint: 'Name the parameter reverse, like sorted() does.' });
    ws.setLabel('openai:sort', 6, { reward: 0 });
    ws.setLabel('openai:s1', 2, { reward: 0 });
    ws.setLabel('openai:s1', 4, { reward: 0 });
    const set = ws.trainingSamples();
    expect(set.map((s) => [s.sessionId, s.responseTurn, s.reward, s.keptByAtLeastOne])).toEqual([
      ['openai:sort', 2, -1, false],
      ['openai:sort', 4, 0, false],
      ['openai:s1', 2, 0, true],
    ]);
    expect(set[0].messages).toEqual([
      { role: 'system', content: 'You are a helpful coding assistant.' },
      { role: 'user', content: 'Write me a function to sort a list in Python.' },
    ]);
    expect(set[0].response.role).toBe('assistant');
    expect(set[1].hint).toBe('Name the parameter reverse, like sorted() does.');
    ws.close();
  });

  it('a context window applies to every sample and keeps the labels', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING)]));
    ws.setLabel('openai:sort', 6, { reward: 1 });
    ws.setContextWindow({ lastTurns: 2 });
    const last = ws.trainingSamples()[0];
    expect(last.messages.map((m) => m.role)).toEqual(['system', 'assistant', 'user']);
    expect(ws.contextWindow()).toEqual({ lastTurns: 2 });
    expect(() => ws.setContextWindow({ lastTurns: 0 })).toThrow(/lastTurns must be/);
    ws.close();
  });
});

describe('the database file', () => {
  it('refuses a path that is not a database with a message naming it', async () => {
    const { dir } = await tempWorkspace();
    const p = path.join(dir, 'x.json');
    fs.writeFileSync(p, '[1,2,3]');
    await expect(Workspace.open(p)).rejects.toThrow(/x\.json: not a Hindsight database/);
  });
});
