// The Sessions list's sort order and bulk actions (src-main/store/overview-reads.ts,
// src-main/workspace/bulk-edits.ts): label every sample of chosen sessions, delete them, each
// in one transaction; and the API validates the calls (src-shared/sessions-api.ts).
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSqlJs } from '../../src-main/store/sql-js.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { CALLS } from '../../src-shared/contract.js';
import { conv, fakeExport, SESSION_001, SESSION_002, SESSION_003, SORTING, tempWorkspace } from './helpers.js';

async function fourSessions() {
  const { ws } = await tempWorkspace();
  await ws.importExport(
    fakeExport('four.jsonl', [
      conv('geo', SESSION_001, { title: 'geography', createdAt: 300 }),
      conv('rec', SESSION_002, { title: 'Recursion', createdAt: 100 }),
      conv('web', SESSION_003, { title: 'web frameworks', createdAt: 200 }),
      conv('sort', SORTING, { title: 'Sorting', createdAt: undefined }),
    ]),
  );
  return ws;
}

const ids = (ws: Awaited<ReturnType<typeof fourSessions>>, filter = {}) => ws.listSessions(filter).sessions.map((s) => s.id.replace('openai:', ''));

describe('sorting the sessions list', () => {
  it('sorts by each column in both directions, undated sessions last by date', async () => {
    const ws = await fourSessions();
    expect(ids(ws)).toEqual(['geo', 'web', 'rec', 'sort']);
    expect(ids(ws, { sort: 'created', order: 'asc' })).toEqual(['rec', 'web', 'geo', 'sort']);
    expect(ids(ws, { sort: 'title' })).toEqual(['geo', 'rec', 'sort', 'web']); // case-insensitive
    expect(ids(ws, { sort: 'title', order: 'desc' })).toEqual(['web', 'sort', 'rec', 'geo']);
    expect(ids(ws, { sort: 'turns', order: 'desc' })).toEqual(['sort', 'web', 'geo', 'rec']);
    expect(ids(ws, { sort: 'samples' })).toEqual(['geo', 'rec', 'web', 'sort']); // ties: newest first, undated last
    // Paging keeps the order.
    expect([...ids(ws, { sort: 'title', limit: 2 }), ...ids(ws, { sort: 'title', offset: 2, limit: 2 })]).toEqual(['geo', 'rec', 'sort', 'web']);
    ws.close();
  });

  it('sorts by the share of samples labelled', async () => {
    const ws = await fourSessions();
    ws.labelSessions(['openai:web'], 1);
    const [first] = ws.getSession('openai:geo').samples;
    ws.setLabel('openai:geo', first!.responseTurn, { reward: -1 });
    expect(ids(ws, { sort: 'labels', order: 'desc' }).slice(0, 2)).toEqual(['web', 'geo']);
    ws.close();
  });

  it('refuses an unknown sort key at the API', () => {
    expect(() => CALLS.listSessions.input.parse({ sort: 'title; DROP TABLE sessions' }, 'input')).toThrow();
    expect(CALLS.listSessions.input.parse({ sort: 'turns', order: 'desc' }, 'input')).toEqual({ sort: 'turns', order: 'desc' });
  });
});

describe('bulk labelling and deleting', () => {
  it('labels every sample of the chosen sessions by hand, keeping hints, and clears them', async () => {
    const ws = await fourSessions();
    const first = ws.getSession('openai:geo').samples[0]!;
    ws.setLabel('openai:geo', first.responseTurn, { hint: 'Name the river too.' });
    const result = ws.labelSessions(['openai:geo', 'openai:rec'], -1);
    expect(result).toEqual({ sessions: 2, samples: ws.getSession('openai:geo').samples.length + ws.getSession('openai:rec').samples.length });
    for (const id of ['openai:geo', 'openai:rec']) {
      for (const s of ws.getSession(id).samples) expect(s.label).toMatchObject({ reward: -1, source: 'manual' });
    }
    expect(ws.getSession('openai:geo').samples[0]!.label.hint).toBe('Name the river too.');
    expect(ws.getSession('openai:web').samples.every((s) => s.label.reward === null)).toBe(true);
    ws.labelSessions(['openai:geo'], null);
    expect(ws.getSession('openai:geo').samples.every((s) => s.label.reward === null && s.label.source === 'manual')).toBe(true);
    ws.close();
  });

  it('labels nothing when one of the sessions is unknown (one transaction)', async () => {
    const ws = await fourSessions();
    expect(() => ws.labelSessions(['openai:geo', 'openai:missing'], 1)).toThrow(/no session 'openai:missing'/);
    expect(ws.getSession('openai:geo').samples.every((s) => s.label.reward === null)).toBe(true);
    ws.close();
  });

  it('deletes the chosen sessions with their labels and says how many there were', async () => {
    const ws = await fourSessions();
    ws.labelSessions(['openai:geo'], 1);
    expect(ws.deleteSessions(['openai:geo', 'openai:rec', 'openai:never-there'])).toBe(2);
    expect(ids(ws)).toEqual(['web', 'sort']);
    expect(ws.stats().labeled.pos).toBe(0);
    ws.close();
  });

  it('a deleted session’s text leaves the database file, not only its rows (secure_delete)', async () => {
    const { ws, dbPath } = await tempWorkspace();
    const secret = 'The vault code is ' + 'tangerine-4471.';
    await ws.importExport(fakeExport('two.jsonl', [conv('secret', [['user', secret], ['assistant', 'Noted.'], ['user', 'Thanks.']]), conv('geo', SESSION_001)]));
    ws.flush();
    expect(fs.readFileSync(dbPath).includes(secret)).toBe(true);
    expect(ws.deleteSessions(['openai:secret'])).toBe(1);
    ws.close();
    expect(fs.readFileSync(dbPath).includes(secret)).toBe(false);
    expect(fs.readFileSync(dbPath).includes('capital of France')).toBe(true);
  });

  it('a database an earlier version saved, its deleted text in free pages, is rewritten without them at its first open, once', async () => {
    const { ws, dbPath } = await tempWorkspace();
    const secret = 'The alarm code is ' + 'plum-9182.';
    await ws.importExport(fakeExport('two.jsonl', [conv('secret', [['user', secret], ['assistant', 'Noted.'], ['user', 'Thanks.']]), conv('geo', SESSION_001)]));
    ws.close();
    // As an earlier version left it: the session deleted without secure_delete, and no note of a clearing.
    const SQL = await loadSqlJs();
    const db = new SQL.Database(fs.readFileSync(dbPath));
    db.exec("PRAGMA foreign_keys = ON; PRAGMA secure_delete = OFF; DELETE FROM sessions WHERE id = 'openai:secret'; DELETE FROM settings WHERE key = 'free_pages_cleared'");
    fs.writeFileSync(dbPath, db.export());
    db.close();
    expect(fs.readFileSync(dbPath).includes(secret)).toBe(true);
    const reopened = await Workspace.open(dbPath);
    expect(reopened.listSessions({}).sessions.map((x) => x.id)).toEqual(['openai:geo']);
    reopened.close();
    expect(fs.readFileSync(dbPath).includes(secret)).toBe(false);
    const check = new SQL.Database(fs.readFileSync(dbPath));
    expect(check.exec("SELECT value FROM settings WHERE key = 'free_pages_cleared'")[0]?.values).toEqual([['1']]);
    check.close();
  });

  it('validates the calls: ids given, rewards +1, −1 or null only', () => {
    expect(() => CALLS.labelSessions.input.parse({ sessionIds: [], reward: 1 }, 'input')).toThrow();
    expect(() => CALLS.labelSessions.input.parse({ sessionIds: ['a'], reward: 2 }, 'input')).toThrow();
    expect(() => CALLS.labelSessions.input.parse({ sessionIds: ['a'] }, 'input')).toThrow();
    expect(CALLS.labelSessions.input.parse({ sessionIds: ['a'], reward: null }, 'input')).toEqual({ sessionIds: ['a'], reward: null });
    expect(() => CALLS.deleteSessions.input.parse({ sessionIds: [''] }, 'input')).toThrow();
  });
});
