// The write journal (src-main/store/write-journal.ts, docs/design.md §Write journal): a change
// the store acknowledged survives a kill before the coalesced save, replayed at the next open.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { UserError } from '../../src-shared/types.js';
import { JOURNALED_STATEMENTS_MAX, Store } from '../../src-main/store/database.js';
import { journalPathFor, JournalWriter } from '../../src-main/store/write-journal.js';
import { TEST_TIMEOUT_MS } from '../helpers/deadlines.js';
import { startServe } from '../e2e/helpers.js';
import { tempDir } from './helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const EDIT_LOOP = fileURLToPath(new URL('./fixtures/edit-loop.ts', import.meta.url));
const SLOW = { debounceMs: 60_000, maxWaitMs: 60_000 };

/** A saved database with the tables edit-loop.ts writes. */
async function savedDatabase(): Promise<string> {
  const dbPath = path.join(tempDir(), 'j.db');
  const store = await Store.open(dbPath);
  store.run('CREATE TABLE edits (i INTEGER PRIMARY KEY, note TEXT, blob BLOB, x REAL)');
  store.run('CREATE TABLE counter (n INTEGER NOT NULL)');
  store.run('INSERT INTO counter (n) VALUES (0)');
  store.close();
  return dbPath;
}

/** Runs edit-loop.ts on `dbPath` and SIGKILLs it once it has acknowledged `edits` edits; returns the last edit acknowledged. */
function editAndKill(dbPath: string, edits: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', EDIT_LOOP, dbPath], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if ((out.match(/acked \d+\n/g) ?? []).length >= edits) child.kill('SIGKILL');
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') return reject(new Error(`edit loop ended with ${code}: ${err}`));
      resolve(Math.max(...[...out.matchAll(/acked (\d+)\n/g)].map((m) => Number(m[1]))));
    });
  });
}

describe('the write journal', () => {
  it('keeps every acknowledged edit through a kill before the save, in a reader too, and the next save empties it', async () => {
    const dbPath = await savedDatabase();
    const acked = await editAndKill(dbPath, 40);
    // The file itself was not saved since (a minute's coalescing): the edits are in the journal alone.
    const reader = await Store.open(dbPath, SLOW, 'read');
    const count = (store: Store) => store.get<{ n: number }>('SELECT COUNT(*) AS n FROM edits')!.n;
    // Every acknowledged edit; the kill may have landed after one more was journaled but before it was said.
    expect([acked + 1, acked + 2]).toContain(count(reader));
    reader.close();
    expect(fs.existsSync(journalPathFor(dbPath))).toBe(true);

    const store = await Store.open(dbPath, SLOW);
    const n = count(store);
    expect(store.get<{ n: number }>('SELECT n FROM counter')!.n).toBe(n);
    const row = store.get<{ note: string; blob: Uint8Array }>('SELECT note, blob FROM edits WHERE i = 7')!;
    expect(row.note).toBe('edit 7');
    expect([...row.blob]).toEqual([7, 0, 255]);
    // Replaying saved the database and started the journal anew: nothing is replayed twice.
    expect(fs.readFileSync(journalPathFor(dbPath), 'utf8').trim().split('\n')).toHaveLength(1);
    store.run('INSERT INTO edits (i, note, x) VALUES (?, ?, ?)', [10_000, 'after', Infinity]);
    const started = vi.spyOn(JournalWriter, 'start');
    store.close();
    expect(fs.existsSync(journalPathFor(dbPath))).toBe(false); // a clean close leaves no journal
    expect(started).not.toHaveBeenCalled(); // nor writes one (and its fsyncs) to remove it
    started.mockRestore();
    const again = await Store.open(dbPath, SLOW, 'read');
    expect(count(again)).toBe(n + 1);
    expect(again.get<{ x: number }>('SELECT x FROM edits WHERE i = 10000')!.x).toBe(Infinity);
    again.close();
  }, TEST_TIMEOUT_MS);

  it('replays bytes, non-finite numbers and named parameters as they were bound', async () => {
    const dbPath = await savedDatabase();
    const store = await Store.open(dbPath, SLOW);
    store.run('INSERT INTO edits (i, note, blob, x) VALUES (?, ?, ?, ?)', [1, 'a "quoted"\nline', new Uint8Array([1, 2, 3]), -Infinity]);
    store.run('INSERT INTO edits (i, note, x) VALUES ($i, $note, $x)', { $i: 2, $note: 'named', $x: 0.1 + 0.2 });
    // A write the process dies after: the journal was fsynced, the file never saved.
    const journal = fs.readFileSync(journalPathFor(dbPath));
    const file = fs.readFileSync(dbPath);
    store.close();
    fs.writeFileSync(dbPath, file);
    fs.writeFileSync(journalPathFor(dbPath), journal);
    const reopened = await Store.open(dbPath, SLOW, 'read');
    expect(reopened.all('SELECT i, note, blob, x FROM edits ORDER BY i')).toEqual([
      { i: 1, note: 'a "quoted"\nline', blob: new Uint8Array([1, 2, 3]), x: -Infinity },
      { i: 2, note: 'named', blob: null, x: 0.1 + 0.2 },
    ]);
    reopened.close();
  });

  it('leaves out a torn last line and a stale journal; refuses a damaged one in one line, keeping it', async () => {
    const dbPath = await savedDatabase();
    const store = await Store.open(dbPath, SLOW);
    store.run('INSERT INTO edits (i) VALUES (1)');
    const journal = fs.readFileSync(journalPathFor(dbPath), 'utf8');
    const file = fs.readFileSync(dbPath);
    store.close();
    const reopen = async (text: string) => {
      fs.writeFileSync(dbPath, file);
      fs.writeFileSync(journalPathFor(dbPath), text);
      const s = await Store.open(dbPath, SLOW, 'read');
      try {
        return s.all<{ i: number }>('SELECT i FROM edits ORDER BY i').map((r) => r.i);
      } finally {
        s.close();
      }
    };
    expect(await reopen(journal)).toEqual([1]);
    expect(await reopen(`${journal}[["INSERT INTO edits (i) VAL`)).toEqual([1]); // cut by a kill: never acknowledged
    const [header, ...entries] = journal.trim().split('\n');
    const stale = JSON.stringify({ ...JSON.parse(header!), save: 12345 });
    expect(await reopen([stale, ...entries].join('\n') + '\n')).toEqual([]); // the file has it already, or not: another save's journal
    const damaged = `${journal}not json\n${entries[0]}\n`;
    await expect(reopen(damaged)).rejects.toThrow(UserError);
    await expect(reopen(damaged)).rejects.toThrow(`${journalPathFor(dbPath)}:3: the write journal is damaged`);
    expect(fs.readFileSync(journalPathFor(dbPath), 'utf8')).toBe(damaged);
    await expect(reopen(`${journal}[["INSERT INTO missing_table (i) VALUES (1)"]]\n`)).rejects.toThrow(/:3: the write journal does not apply to this database \(no such table: missing_table\)/);
  });

  it('saves a transaction too large to journal at its commit, and rolls back what it does not commit', async () => {
    const dbPath = await savedDatabase();
    const store = await Store.open(dbPath, SLOW);
    const saves = store.persistStats.saves;
    expect(() => store.transaction(() => {
      store.run('INSERT INTO edits (i) VALUES (1)');
      throw new Error('changed my mind');
    })).toThrow('changed my mind');
    store.transaction(() => {
      for (let i = 0; i <= JOURNALED_STATEMENTS_MAX; i++) store.run('INSERT INTO edits (i) VALUES (?)', [100 + i]);
    });
    expect(store.persistStats.saves).toBe(saves + 1);
    expect(fs.readFileSync(journalPathFor(dbPath), 'utf8').trim().split('\n')).toHaveLength(1);
    store.transaction(() => store.run('INSERT INTO edits (i) VALUES (7)'));
    expect(fs.readFileSync(journalPathFor(dbPath), 'utf8').trim().split('\n')).toHaveLength(2);
    store.close();
  });

  it('a journal line a full disk cut short: the store saves instead, and nothing is written after the torn part', async () => {
    const dbPath = await savedDatabase();
    const store = await Store.open(dbPath, SLOW);
    const write = fs.writeSync;
    const full = () => Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    // The journal's line gets half-way, then the save that stands in for it fails too.
    const spy = vi
      .spyOn(fs, 'writeSync')
      .mockImplementationOnce(((fd: number, buffer: Buffer) => {
        write(fd, buffer, 0, Math.floor(buffer.length / 2));
        throw full();
      }) as unknown as typeof fs.writeSync)
      .mockImplementationOnce((() => {
        throw full();
      }) as unknown as typeof fs.writeSync);
    expect(() => store.run("INSERT INTO edits (i, note) VALUES (1, 'first')")).toThrow(/ENOSPC/);
    spy.mockRestore();
    // Space again: the next edit is not appended after the torn half-line (that journal would not open); it saves.
    store.run("INSERT INTO edits (i, note) VALUES (2, 'second')");
    const reader = await Store.open(dbPath, SLOW, 'read');
    expect(reader.all('SELECT i, note FROM edits ORDER BY i')).toEqual([{ i: 1, note: 'first' }, { i: 2, note: 'second' }]);
    reader.close();
    expect(fs.readFileSync(journalPathFor(dbPath), 'utf8').trim().split('\n')).toHaveLength(1);
    store.close();
  });

  it('a new database removes a journal left beside its name, which cannot be its own', async () => {
    const dbPath = path.join(tempDir(), 'new.db');
    fs.writeFileSync(journalPathFor(dbPath), `${JSON.stringify({ journal: 1, save: 0 })}\n[["CREATE TABLE intruder (x)"]]\n`);
    const store = await Store.open(dbPath);
    expect(fs.existsSync(journalPathFor(dbPath))).toBe(false);
    store.run('CREATE TABLE t (x)');
    store.flush();
    expect(store.all("SELECT name FROM sqlite_master WHERE name = 'intruder'")).toEqual([]);
    store.close();
  });

  it('serve: labels set through the API just before a kill -9 are there after the restart', async () => {
    const dir = tempDir();
    const chats = Array.from({ length: 6 }, (_, i) => ({ messages: [{ role: 'user', content: `question ${i}` }, { role: 'assistant', content: `answer ${i}` }, { role: 'user', content: 'thanks' }] }));
    fs.writeFileSync(path.join(dir, 'chats.jsonl'), chats.map((c) => JSON.stringify(c)).join('\n') + '\n');
    const dbPath = path.join(dir, 'serve.db');
    let serve = await startServe(dbPath);
    await serve.api('importFiles', { paths: [path.join(dir, 'chats.jsonl')] });
    const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
    // Each answered call is acknowledged; the kill follows the last answer at once, well inside the save's quiet period.
    for (const [i, s] of sessions.entries()) await serve.api('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: i % 2 ? 1 : -1, notes: `note ${i}` } });
    await serve.stop('SIGKILL');
    serve = await startServe(dbPath);
    try {
      for (const [i, s] of sessions.entries()) {
        const { samples } = await serve.api<{ samples: { responseTurn: number; label: { reward: number | null; notes: string | null } }[] }>('getSession', { id: s.id });
        expect(samples.find((x) => x.responseTurn === 1)!.label).toMatchObject({ reward: i % 2 ? 1 : -1, notes: `note ${i}` });
      }
    } finally {
      await serve.stop();
    }
  }, TEST_TIMEOUT_MS);
});
