// search_history over a small imported database (src-main/store/history-search.ts and the
// tool in src-main/rollout/builtin-tools.ts): hits carry their session's title and a snippet,
// every word must occur, a model's stray FTS syntax cannot break the query, the index follows
// new turns, survives a save (which drops sql.js's TEMP schema), and is never saved itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { Store, DEFAULT_PERSIST } from '../../src-main/store/database.js';
import { ftsQuery, searchHistory } from '../../src-main/store/history-search.js';
import { searchHistoryTool } from '../../src-main/rollout/builtin-tools.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';

let dir: string;
let dbPath: string;

beforeAll(async () => {
  const t = await tempWorkspace();
  dir = t.dir;
  dbPath = t.dbPath;
  await t.ws.importExport(fakeExport('history.jsonl', [
    conv('trip', [['user', 'Plan a weekend trip to Lyon by train.'], ['assistant', 'Take the TGV from Paris; Lyon is two hours away.'], ['user', 'Thanks!']], { title: 'Lyon weekend', createdAt: 1_700_000_000 }),
    conv('bread', [['user', 'How long should sourdough bread proof?'], ['assistant', 'Proof the dough 4 to 6 hours, or overnight in the fridge.']], { title: 'Sourdough', createdAt: 1_700_100_000 }),
    conv('trains', [['user', 'Which train goes from Lyon to Geneva? Lyon Geneva Lyon.'], ['assistant', 'The TER Léman Express line.']], { title: 'Swiss trains', createdAt: 1_690_000_000 }),
  ]));
  t.ws.close();
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('search_history', () => {
  it('finds the turns with every word, with titles and snippets, most matches first', async () => {
    const store = await Store.open(dbPath, DEFAULT_PERSIST, 'read');
    try {
      const lyon = searchHistory(store, 'Lyon', 10);
      expect(lyon[0]).toMatchObject({ title: 'Swiss trains', role: 'user', turn: 0 });
      expect(lyon[0]!.snippet).toContain('[Lyon]');
      expect(lyon.map((h) => h.title)).toEqual(['Swiss trains', 'Lyon weekend', 'Lyon weekend']);
      expect(searchHistory(store, 'lyon TRAIN').map((h) => `${h.title}/${h.turn}`)).toEqual(['Swiss trains/0', 'Lyon weekend/0']);
      expect(searchHistory(store, 'sourdough fridge')).toEqual([]);
      expect(searchHistory(store, 'fridge overnight')).toMatchObject([{ title: 'Sourdough', turn: 1, role: 'assistant' }]);
      expect(searchHistory(store, 'Lyon', 1)).toHaveLength(1);
      expect(searchHistory(store, 'leman')).toMatchObject([{ title: 'Swiss trains' }]);
      // FTS syntax from a model is words, nothing more.
      expect(ftsQuery('Lyon" OR * NEAR(')).toBe('"Lyon" "OR" "NEAR"');
      // "-train" would exclude in FTS syntax; here it is one more word that must occur.
      expect(searchHistory(store, 'Lyon" -train *')).toEqual(searchHistory(store, 'Lyon train'));
      expect(searchHistory(store, '"Geneva"')).toMatchObject([{ title: 'Swiss trains' }]);
      expect(searchHistory(store, ' !? ')).toEqual([]);

      const tools = new ToolRegistry([searchHistoryTool(store)]);
      const r = await tools.execute('search_history', { query: 'proof dough' });
      expect(r).toMatchObject({ ok: true, result: '1. "Sourdough" (assistant, turn 1): [Proof] the [dough] 4 to 6 hours, or overnight in the fridge.' });
      expect(await tools.execute('search_history', { query: 'quantum' })).toMatchObject({ ok: true, result: 'no conversation mentions "quantum"' });
      expect(await tools.execute('search_history', { query: '***' })).toMatchObject({ ok: false, result: expect.stringMatching(/no words/) });
      expect(await tools.execute('search_history', { query: 'Lyon', limit: 50 })).toMatchObject({ ok: false, result: expect.stringMatching(/"limit" must be a whole number from 1 to 10/) });

      // New turns are found: the index is rebuilt when the turns change.
      store.run("INSERT INTO turns (session_id, idx, role, text, classification) VALUES ('trip', 3, 'user', 'What about Grenoble?', 'main')".replace("'trip'", `'${store.get<{ id: string }>("SELECT id FROM sessions WHERE title = 'Lyon weekend'")!.id}'`));
      expect(searchHistory(store, 'Grenoble')).toMatchObject([{ title: 'Lyon weekend', turn: 3 }]);
    } finally {
      store.close();
    }
  });

  it('never shows a hidden session (a training run hides the held-out split)', async () => {
    const store = await Store.open(dbPath, DEFAULT_PERSIST, 'read');
    try {
      const swiss = store.get<{ id: string }>("SELECT id FROM sessions WHERE title = 'Swiss trains'")!.id;
      expect(searchHistory(store, 'Lyon', 10, [swiss]).map((h) => h.title)).toEqual(['Lyon weekend', 'Lyon weekend']);
      expect(searchHistory(store, 'Geneva', 10, [swiss])).toEqual([]);
      const tools = new ToolRegistry([searchHistoryTool(store, [swiss])]);
      expect(await tools.execute('search_history', { query: 'Geneva' })).toMatchObject({ ok: true, result: 'no conversation mentions "Geneva"' });
    } finally {
      store.close();
    }
  });

  it('a save drops the index with the TEMP schema; the next search rebuilds it, and the file never holds it', async () => {
    const copy = path.join(dir, 'copy.db');
    fs.copyFileSync(dbPath, copy);
    const store = await Store.open(copy);
    try {
      expect(searchHistory(store, 'sourdough')).toHaveLength(1);
      store.flush(true);
      expect(searchHistory(store, 'sourdough')).toHaveLength(1);
    } finally {
      store.close();
    }
    const reopened = await Store.open(copy, DEFAULT_PERSIST, 'read');
    try {
      expect(reopened.all("SELECT name FROM sqlite_master WHERE name LIKE '%turn_search%'")).toEqual([]);
    } finally {
      reopened.close();
    }
  });
});
