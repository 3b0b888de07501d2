// The held-out split (docs/design.md §Evaluation): the rule (deterministic, about 10% of the
// samples, topped up to a minimum, never one giant session), the user's choices winning and stored in the database, and held-out samples
// kept out of every training set.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { validateCall } from '../../src-shared/contract.js';
import { decideSplit, heldOutTarget, splitValue } from '../../src-main/pipeline/split-rule.js';
import { MIN_HELD_OUT_SAMPLES } from '../../src-shared/eval-stats.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const sessions = (ids: string[], samples = 1) => ids.map((id) => ({ id, samples }));
const heldOut = (m: Map<string, { heldOut: boolean }>) => [...m].filter(([, d]) => d.heldOut).map(([id]) => id).sort();

describe('the split rule', () => {
  it('reads the first 8 hex digits of sha256(id) as an unsigned integer, mod 100', () => {
    const hex = crypto.createHash('sha256').update('openai:n2').digest('hex');
    expect(splitValue('openai:n2')).toBe(parseInt(hex.slice(0, 8), 16) % 100);
    // Fixed values, so a change of the rule cannot go unnoticed.
    expect(['openai:p1', 'openai:n2', 'capture:rated'].map(splitValue)).toEqual([95, 25, 14]);
  });

  it('is deterministic and holds out about 10% of many sessions', () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `chatgpt:session-${i}`);
    const a = heldOut(decideSplit(sessions(ids), 10, new Map()));
    expect(heldOut(decideSplit(sessions([...ids].reverse()), 10, new Map()))).toEqual(a);
    expect(a.length / ids.length).toBeGreaterThan(0.08);
    expect(a.length / ids.length).toBeLessThan(0.12);
    // Below 10 by the rule; a few more with the next values when those fall short of a tenth.
    const d = decideSplit(sessions(ids), 10, new Map());
    expect(a.every((id) => splitValue(id) < 10 || d.get(id)!.why === 'minimum')).toBe(true);
    expect(a.filter((id) => splitValue(id) >= 10).every((id) => splitValue(id) < 12)).toBe(true);
    expect(heldOut(decideSplit(sessions(ids), 25, new Map())).length / ids.length).toBeGreaterThan(0.22);
  });

  it('holds out at least one session once two have samples: the smallest value (a quarter of 4 samples)', () => {
    // None of these falls below 10 (values 95, 38, 33, 25).
    const ids = ['openai:p1', 'openai:p2', 'openai:n1', 'openai:n2'];
    const d = decideSplit(sessions(ids), 10, new Map());
    expect(heldOut(d)).toEqual(['openai:n2']);
    expect(d.get('openai:n2')).toEqual({ heldOut: true, why: 'minimum' });
    // One session with samples: nothing is held out; sessions without samples do not count.
    expect(heldOut(decideSplit(sessions(['openai:p1']), 10, new Map()))).toEqual([]);
    expect(heldOut(decideSplit([{ id: 'openai:p1', samples: 1 }, { id: 'openai:n2', samples: 0 }], 10, new Map()))).toEqual([]);
  });

  it('holds out about a tenth of the samples, topped up to the minimum of 20 (issue 34: 48 sessions held out 2 samples)', () => {
    const ids = Array.from({ length: 48 }, (_, i) => `chatgpt:s${i}`);
    const d = decideSplit(sessions(ids, 2), 10, new Map());
    const held = heldOut(d);
    expect(held.length * 2).toBeGreaterThanOrEqual(MIN_HELD_OUT_SAMPLES);
    expect(held.length * 2).toBeLessThanOrEqual(2 * MIN_HELD_OUT_SAMPLES);
    expect(held.some((id) => d.get(id)!.why === 'minimum')).toBe(true);
    // Many samples: about a tenth of them, not a tenth of the sessions.
    const many = Array.from({ length: 400 }, (_, i) => ({ id: `chatgpt:m${i}`, samples: 1 + (i % 9) }));
    const total = many.reduce((a, s) => a + s.samples, 0);
    const m = decideSplit(many, 10, new Map());
    const heldSamples = many.filter((s) => m.get(s.id)!.heldOut).reduce((a, s) => a + s.samples, 0);
    expect(heldSamples / total).toBeGreaterThan(0.08);
    expect(heldSamples / total).toBeLessThan(0.2);
    expect(heldOutTarget(total, 10)).toBe(Math.ceil(total / 10));
    expect(heldOutTarget(30, 10)).toBe(7); // too few for the minimum: a quarter, and the page says "too few to tell"
  });

  it('never holds out one giant session whole: it is trained on and says why', () => {
    const ids = Array.from({ length: 48 }, (_, i) => `chatgpt:s${i}`);
    // The session with the smallest split value holds 499 samples (a 1,000-turn chat).
    const giant = [...ids].sort((a, b) => splitValue(a) - splitValue(b))[0]!;
    const d = decideSplit(ids.map((id) => ({ id, samples: id === giant ? 499 : 2 })), 10, new Map());
    expect(d.get(giant)).toEqual({ heldOut: false, why: 'too-large' });
    expect(heldOut(d).length).toBeGreaterThanOrEqual(10);
    // The user can still hold it out.
    expect(decideSplit(ids.map((id) => ({ id, samples: id === giant ? 499 : 2 })), 10, new Map([[giant, true]])).get(giant)).toEqual({ heldOut: true, why: 'user' });
  });

  it("lets the user's choices win, and picks another session when the user trains on the pick", () => {
    const ids = ['openai:p1', 'openai:p2', 'openai:n1', 'openai:n2'];
    const trainN2 = decideSplit(sessions(ids), 10, new Map([['openai:n2', false]]));
    expect(heldOut(trainN2)).toEqual(['openai:n1']);
    expect(trainN2.get('openai:n2')).toEqual({ heldOut: false, why: 'user' });
    expect(heldOut(decideSplit(sessions(ids), 10, new Map([['openai:p1', true]])))).toEqual(['openai:p1']);
    const all = new Map(ids.map((id) => [id, false]));
    expect(heldOut(decideSplit(sessions(ids), 10, all))).toEqual([]);
    expect(() => decideSplit(sessions(ids), 101, new Map())).toThrow(/between 0 and 100/);
  });
});

const talk = (id: string, reply: string) => conv(id, [['user', 'Tell me about cats.'], ['assistant', reply], ['user', 'Thanks!']]);

describe('the split in a database', () => {
  it('keeps held-out samples out of training, stores the choices, and shows them', async () => {
    const { ws, dbPath } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', ['p1', 'p2', 'n1', 'n2'].map((id) => talk(id, `A cat story ${id}.`))));
    for (const id of ['p1', 'p2', 'n1', 'n2']) ws.setLabel(`openai:${id}`, 1, { reward: 1 });
    expect(ws.split()).toMatchObject({ percent: 10, sessions: 4, samples: 4, heldOut: { sessions: 1, samples: 1 } });
    expect(ws.split().listed).toEqual([{ id: 'openai:n2', title: 'n2', samples: 1, heldOut: true, why: 'minimum' }]);
    const trained = () => ws.trainingSamples({ method: 'rl' }).map((s) => s.sessionId).sort();
    expect(trained()).toEqual(['openai:n1', 'openai:p1', 'openai:p2']);
    expect(ws.evaluationSamples('heldout').map((s) => s.sessionId)).toEqual(['openai:n2']);
    expect(ws.evaluationSamples('all')).toHaveLength(4);
    expect(ws.listSessions().sessions.find((s) => s.id === 'openai:n2')!.split).toEqual({ heldOut: true, why: 'minimum' });
    expect(ws.getSession('openai:p1').split).toEqual({ heldOut: false, why: 'rule' });

    ws.setHeldOut(['openai:n2'], false);
    ws.setHeldOut(['openai:p1'], true);
    expect(trained()).toEqual(['openai:n1', 'openai:n2', 'openai:p2']);
    expect(() => ws.setHeldOut(['openai:nope'], true)).toThrow(/no session 'openai:nope'/);
    ws.close();

    const again = await Workspace.open(dbPath, { access: 'read' });
    expect(again.heldOutSessionIds()).toEqual(['openai:p1']);
    expect(again.split().listed.map((s) => [s.id, s.heldOut, s.why])).toEqual([['openai:n2', false, 'user'], ['openai:p1', true, 'user']]);
    again.close();

    let r = await runCli('split', '--db', dbPath, '--reset', '--hold-out', 'openai:p2', '--json');
    expect(r.code).toBe(0);
    expect(r.json().listed.map((s: { id: string; heldOut: boolean }) => [s.id, s.heldOut])).toEqual([['openai:p2', true]]);
    r = await runCli('split', '--db', dbPath, '--show');
    expect(r.stdout).toMatch(/held out: 1 of 4 sessions with samples, 1 of 4 samples/);
    expect(r.stdout).toMatch(/held out {2}openai:p2 {2}1 samples {2}\(your choice\)/);
    r = await runCli('split', '--db', dbPath, '--hold-out', 'openai:p1', '--train', 'openai:p1');
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/both --hold-out and --train/)]);
  });

  it('says so when the only signal is in held-out sessions', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', [talk('p1', 'A cat.'), talk('p2', 'Two cats.')]));
    ws.setHeldOut(['openai:p1'], true);
    ws.setLabel('openai:p1', 1, { reward: 1 });
    expect(ws.nothingToTrain('rl')).toMatch(/0 of 1 are.*held-out sessions are not counted/);
    ws.setLabel('openai:p2', 1, { reward: -1 });
    expect(ws.nothingToTrain('rl')).toBeNull();
    ws.close();
  });
});

describe('the split in the API contract', () => {
  it('validates setHeldOut: some sessions, and true, false or null', () => {
    expect(validateCall('setHeldOut', { sessionIds: ['openai:a'], heldOut: null })).toEqual({ sessionIds: ['openai:a'], heldOut: null });
    expect(() => validateCall('setHeldOut', { sessionIds: [], heldOut: true })).toThrow(/sessionIds/);
    expect(() => validateCall('setHeldOut', { sessionIds: ['openai:a'], heldOut: 'yes' })).toThrow(/heldOut/);
    expect(validateCall('split', undefined)).toEqual({});
  });
});
