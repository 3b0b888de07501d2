// A stored session brought to a newer version of its conversation changes only the rows that
// differ when no labelled reply moves (live capture's next turn, a later export of a chat that
// went on), and ends exactly as the full rewrite would leave it: the same turns, samples,
// labels and alternatives as a database that imported the newer version first. Where a
// labelled reply's context changed, the rewrite runs as before and drops that label.
import { describe, expect, it } from 'vitest';
import type { ImportedConversation, ImportedTurn } from '../../src-shared/types.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { conv, fakeExport, tempWorkspace } from './helpers.js';

const SESSION = 'openai:grow';
const T = (role: ImportedTurn['role'], text: string, extra: Partial<ImportedTurn> = {}): ImportedTurn => ({ role, text, timestamp: 100, ...extra });

const FIRST: ImportedTurn[] = [
  T('system', 'Be brief.'),
  T('user', 'Sort a list in Python.'),
  T('assistant', 'Use sorted(xs).'),
  T('user', 'No, in place please.'),
  T('assistant', 'Then xs.sort().'),
];

/** The session's rows in every table a session write touches (labels without their times). */
function rows(ws: Workspace): Record<string, unknown[]> {
  const store = ws.storage;
  const all = (sql: string) => store.all(sql, [SESSION]);
  return {
    session: all('SELECT format, external_id, title, created_at, metadata, content_hash, no_sample_reason FROM sessions WHERE id = ?'),
    turns: all('SELECT * FROM turns WHERE session_id = ? ORDER BY idx'),
    samples: all('SELECT * FROM samples WHERE session_id = ? ORDER BY response_turn'),
    labels: all('SELECT response_turn, reward, hint, source FROM labels WHERE session_id = ? ORDER BY response_turn'),
    alternatives: all('SELECT * FROM alternatives WHERE session_id = ? ORDER BY at_turn, ord'),
  };
}

async function importOne(ws: Workspace, c: ImportedConversation, name: string): Promise<void> {
  await ws.importExport(fakeExport(name, [c]));
}

/** Imports `before`, labels its first reply, writes `after` over it; returns its rows and the journal lines that write took. */
async function update(before: ImportedConversation, after: ImportedConversation): Promise<{ rows: Record<string, unknown[]>; statements: number }> {
  const { ws } = await tempWorkspace();
  await importOne(ws, before, 'before.json');
  ws.setLabel(SESSION, 2, { reward: -1, hint: 'In place.' });
  const runs: string[] = [];
  const store = ws.storage;
  const run = store.run.bind(store);
  store.run = ((sql: string, params?: unknown[]) => (runs.push(sql), run(sql, params as never))) as typeof store.run;
  await importOne(ws, after, 'after.json');
  store.run = run;
  const out = { rows: rows(ws), statements: runs.filter((s) => /^\s*(INSERT INTO|UPDATE|DELETE FROM)\s+(turns|samples|labels|alternatives)\b/i.test(s)).length };
  ws.close();
  return out;
}

/** The rows of a database that imported `after` alone, with the same label set on it. */
async function fresh(after: ImportedConversation): Promise<Record<string, unknown[]>> {
  const { ws } = await tempWorkspace();
  await importOne(ws, after, 'after.json');
  ws.setLabel(SESSION, 2, { reward: -1, hint: 'In place.' });
  const out = rows(ws);
  ws.close();
  return out;
}

describe('a session written over by a newer version of its conversation', () => {
  it('grown by a turn pair: a few rows change, and the result is the rewrite’s', async () => {
    const grown = [...FIRST, T('user', 'Thanks, that works.'), T('assistant', 'Glad to help.')];
    const { rows: got, statements } = await update(conv('grow', FIRST), conv('grow', grown));
    expect(got).toEqual(await fresh(conv('grow', grown)));
    // Two new turns, the sample the new user turn made of the last reply, and at most one earlier
    // row the new turns changed; the rewrite deletes the session and writes 7 turns, 2 samples and the label again.
    expect(statements).toBeLessThanOrEqual(4);
  });

  it('an earlier turn’s time and tool call changed, a title and an alternative: the rewrite’s rows', async () => {
    const changed = [...FIRST.slice(0, 3), T('user', 'No, in place please.', { timestamp: 101 }), T('assistant', 'Then xs.sort().', { toolCalls: [{ id: 'c', name: 'run', arguments: '{}' }] })];
    const after = conv('grow', [...changed, T('user', 'Good.')], { title: 'Sorting', alternatives: [{ atTurn: 4, turn: T('assistant', 'xs.sort() sorts in place.') }] });
    expect((await update(conv('grow', FIRST), after)).rows).toEqual(await fresh(after));
  });

  it('shorter: the turns past its end go, the label stays', async () => {
    const shorter = FIRST.slice(0, 4);
    const { rows: got } = await update(conv('grow', FIRST), conv('grow', shorter));
    expect(got).toEqual(await fresh(conv('grow', shorter)));
    expect(got.labels).toHaveLength(1);
  });

  it('a labelled reply’s context changed: rewritten as before, the label dropped', async () => {
    const edited = [FIRST[0]!, T('user', 'Sort a list in Rust.'), ...FIRST.slice(2)];
    const { rows: got } = await update(conv('grow', FIRST), conv('grow', edited));
    expect(got.labels).toEqual([]);
    const { labels: _, ...rest } = await fresh(conv('grow', edited));
    expect({ ...got, labels: undefined }).toEqual({ ...rest, labels: undefined });
  });
});
