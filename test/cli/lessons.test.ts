// `hindsight lessons` (docs/design.md §Lessons): prints, distils, stores and writes the lessons.
// Stored in the database (a reopened workspace, as after a restart, has them); distilled from the
// hints of the sessions trained on only; by rules when the database's Settings name no LLM judge,
// by an OpenAI-compatible judge when they do (a scripted server here).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LESSONS_HEADER } from '../../src-shared/lessons.js';
import { settingsPathFor } from '../../src-main/store/settings-file.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { scriptedServer, type ScriptedServer } from '../judge/helpers.js';
import { conv, fakeExport, tempDir } from '../store/helpers.js';

let dir: string;
let db: string;
let server: ScriptedServer;

beforeAll(async () => {
  dir = tempDir('hindsight-lessons-cli-');
  db = path.join(dir, 'h.db');
  const ws = await Workspace.open(db);
  const chats = ['a', 'b', 'c', 'd'].map((id) => conv(id, [['user', 'Write a sort function.'], ['assistant', 'function sort(xs) { return xs.sort(); }'], ['user', 'No, I said Python.']]));
  await ws.importExport(fakeExport('c.jsonl', chats));
  ws.setLabel('openai:a', 1, { reward: -1, hint: 'I said Python, not JavaScript.' });
  ws.setLabel('openai:b', 1, { reward: -1, hint: 'Use Python. Add type hints.' });
  ws.setLabel('openai:c', 1, { reward: -1, hint: 'I said Python, not JavaScript.' });
  ws.setLabel('openai:d', 1, { reward: -1, hint: 'Answer in French from now on.' }); // held out: never distilled
  ws.setHeldOut(['openai:d'], true);
  ws.setHeldOut(['openai:a', 'openai:b', 'openai:c'], false);
  ws.close();
  server = await scriptedServer(() => ({ content: '[LESSONS_START]\n- Write Python with type hints unless asked otherwise.\n[LESSONS_END]' }));
});
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('hindsight lessons', () => {
  it('says there are none yet, and how many hints there are to distil', async () => {
    const r = await runCli('lessons', '--db', db);
    expect(r).toMatchObject({ code: 0, stdout: '' });
    expect(r.stderr).toBe('no lessons yet: 3 hints to distil them from (hindsight lessons --regenerate); 1 of held-out sessions are left out\n');
    expect((await runCli('lessons', '--db', db, '--json')).json()).toEqual({ lessons: null, hints: 3, heldOutHints: 1, distiller: 'rules' });
  });

  it('distils them by rules from the sessions trained on, stores them in the database, and writes them to a file', async () => {
    const out = path.join(dir, 'lessons.txt');
    const r = await runCli('lessons', '--regenerate', '--db', db, '--out', out);
    expect(r.code).toBe(0);
    const text = `${LESSONS_HEADER}\n- The user said Python, not JavaScript.\n- Add type hints.\n- Use Python.`;
    expect(r.stdout).toBe(`${text}\n`);
    expect(r.stderr).toMatch(/^lessons by rules from 3 hints, \d{4}-\d\d-\d\dT[\d:.]+Z\nwritten to .*lessons\.txt\n$/);
    expect(r.stdout).not.toContain('French');
    expect(fs.readFileSync(out, 'utf8')).toBe(`${text}\n`);
    expect(fs.statSync(out).mode & 0o777).toBe(0o600);
    // In the database: a workspace opened afresh (the app after a restart) reads them.
    const ws = await Workspace.open(db, { access: 'read' });
    expect(ws.lessons()).toMatchObject({ text, source: 'rules', judge: null, hints: 3, note: null });
    ws.close();
  });

  it('stores a text the user wrote, and clears', async () => {
    const file = path.join(dir, 'mine.txt');
    fs.writeFileSync(file, '\n- Keep it short.\n- Use Python 3.12.\n\n');
    const set = await runCli('lessons', '--set', file, '--db', db, '--json');
    expect(set.json().lessons).toMatchObject({ text: '- Keep it short.\n- Use Python 3.12.', source: 'edited', hints: 0 });
    expect((await runCli('lessons', '--db', db)).stderr).toMatch(/^lessons as you wrote them, /);
    expect((await runCli('lessons', '--clear', '--db', db, '--json')).json().lessons).toBeNull();
  });

  it("distils by the database's Settings judge, or the --judge-* flags'", async () => {
    fs.writeFileSync(settingsPathFor(db), JSON.stringify({ judgeBackend: 'openai', openaiBaseUrl: server.baseUrl, openaiModel: 'judge-7b' }));
    const r = await runCli('lessons', '--regenerate', '--db', db, '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({
      distiller: 'openai:judge-7b',
      lessons: { text: `${LESSONS_HEADER}\n- Write Python with type hints unless asked otherwise.`, source: 'judge', judge: 'openai:judge-7b lessons-v1', hints: 3 },
    });
    expect(server.requests.at(-1)!.body.messages[1].content).not.toContain('French');
    const rules = await runCli('lessons', '--regenerate', '--judge-backend', 'heuristic', '--db', db, '--json');
    expect(rules.json().lessons.source).toBe('rules');
    fs.rmSync(settingsPathFor(db));
  });

  it('refuses bad usage in one line', async () => {
    expect((await runCli('lessons', '--regenerate', '--clear', '--db', db)).code).toBe(2);
    expect((await runCli('lessons', '--judge-backend', 'local', '--db', db)).code).toBe(2);
    expect((await runCli('lessons', '--regenerate', '--judge-backend', 'openai', '--db', db)).stderr).toMatch(/needs --judge-model NAME/);
    const missing = await runCli('lessons', '--set', path.join(dir, 'nope.txt'), '--db', db);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/--set .*nope\.txt: cannot read it \(ENOENT\)\n$/);
    const nothing = await runCli('lessons', '--db', path.join(dir, 'none.db'));
    expect(nothing.stderr).toMatch(/no database at .*none\.db: import chats first/);
  });
});
