// One writer per database (store/db-lock.ts), with real processes: `serve` holds the lock,
// CLI writers are refused with a message naming it while readers still read, and after a
// `kill -9` of the holder the next writer takes the lock over. Concurrent CLI writers never
// lose a write they acknowledged.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { lockPathFor, processStartTime } from '../../src-main/store/db-lock.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { conv, fakeExport, tempDir } from './helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(ROOT, 'bin/hindsight.mjs');
const CHATGPT = path.join(ROOT, 'test/fixtures/chatgpt-branches.json');
const runFile = promisify(execFile);

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await runFile(process.execPath, [BIN, ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Starts `hindsight serve` on `db` and waits until it listens. */
async function startServe(db: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--db', db, '--port', '0', '--api-only', '--json'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += String(chunk);
      if (out.includes('\n')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`serve exited ${code} before listening`)));
  });
  return child;
}

async function sessionWithSamples(db: string, count: number): Promise<string[]> {
  const ws = await Workspace.open(db);
  const conversations = Array.from({ length: count }, (_, i) => conv(`c${i}`, [['user', `question ${i}`], ['assistant', `answer ${i}`], ['user', 'thanks']]));
  await ws.importExport(fakeExport('many.json', conversations));
  ws.close();
  return conversations.map((c) => `openai:${c.externalId}`);
}

describe('one writer per database', () => {
  it('refuses CLI writers while serve holds the database, lets readers read, and takes over after kill -9', async () => {
    const db = path.join(tempDir(), 'held.db');
    const [session] = await sessionWithSamples(db, 1);
    const serve = await startServe(db);

    const label = await cli('label', session, '1', '--reward', '1', '--db', db);
    expect(label.code).toBe(1);
    expect(label.stderr.trim().split('\n')).toHaveLength(1);
    expect(label.stderr).toContain(`${db} is open in Hindsight serve (pid ${serve.pid})`);
    const imported = await cli('import', CHATGPT, '--db', db);
    expect(imported.code).toBe(1);
    expect(imported.stderr).toContain('is open in Hindsight serve');
    const stats = await cli('stats', '--db', db, '--json');
    expect(stats.code).toBe(0);
    expect(JSON.parse(stats.stdout)).toMatchObject({ sessions: 1, samples: 1 });

    serve.kill('SIGKILL');
    await new Promise((resolve) => serve.once('exit', resolve));
    expect(fs.existsSync(lockPathFor(db))).toBe(true); // a kill -9 cannot clean up …
    const after = await cli('label', session, '1', '--reward', '1', '--db', db);
    expect(after.stderr).toBe('');
    expect(after.code).toBe(0); // … but the lock of a dead process is taken over
    expect(fs.existsSync(lockPathFor(db))).toBe(false);
    const samples = await cli('samples', '--db', db);
    expect(JSON.parse(samples.stdout.trim())).toMatchObject({ session_id: session, reward: 1, label_source: 'manual' });
  }, 120_000);

  it('never loses a write that a concurrent CLI writer acknowledged', async () => {
    const db = path.join(tempDir(), 'race.db');
    const sessions = await sessionWithSamples(db, 6);
    const runs = await Promise.all(sessions.map((id) => cli('label', id, '1', '--reward', '-1', '--db', db)));
    for (const r of runs) expect(r.code === 0 || /is open in hindsight label \(pid \d+\)/.test(r.stderr), r.stderr).toBe(true);
    const ws = await Workspace.open(db, { access: 'read' });
    const labelled = new Set(ws.listSamples().filter((s) => s.label.reward === -1).map((s) => s.sessionId));
    ws.close();
    sessions.forEach((id, i) => {
      if (runs[i].code === 0) expect(labelled.has(id)).toBe(true);
    });
  }, 120_000);

  it('takes over the lock of a reused pid (another start time), not of the live holder', async () => {
    const db = path.join(tempDir(), 'reused.db');
    const sleeper = spawn('sleep', ['60']);
    children.push(sleeper);
    await new Promise((resolve) => sleeper.once('spawn', resolve));
    const lock = (startTime: string | null) =>
      fs.writeFileSync(lockPathFor(db), JSON.stringify({ pid: sleeper.pid, startTime, token: 'theirs', holder: 'Hindsight serve', host: os.hostname() }));

    lock(processStartTime(sleeper.pid!));
    await expect(Workspace.open(db)).rejects.toThrow(`${db} is open in Hindsight serve (pid ${sleeper.pid}); stop it`);
    expect(fs.existsSync(db)).toBe(false);

    lock('12345-not-its-start-time');
    const ws = await Workspace.open(db);
    expect(JSON.parse(fs.readFileSync(lockPathFor(db), 'utf8')).pid).toBe(process.pid);
    ws.close();
    expect(fs.existsSync(lockPathFor(db))).toBe(false);
  });

  it('waits out a lock file being written, and takes over one left unreadable', async () => {
    const db = path.join(tempDir(), 'torn.db');
    fs.writeFileSync(lockPathFor(db), '');
    await expect(Workspace.open(db)).rejects.toThrow(/is open in another Hindsight process/);
    const old = new Date(Date.now() - 60_000);
    fs.utimesSync(lockPathFor(db), old, old);
    const ws = await Workspace.open(db);
    ws.close();
  });

  it('follows the file, not its name: a symbolic link gets the same lock and saves into the file it points to; a hard link is refused', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'real.db');
    const [session] = await sessionWithSamples(db, 1);
    const link = path.join(dir, 'link.db');
    fs.symlinkSync(db, link);
    const sleeper = spawn('sleep', ['60']);
    children.push(sleeper);
    await new Promise((resolve) => sleeper.once('spawn', resolve));
    fs.writeFileSync(lockPathFor(db), JSON.stringify({ pid: sleeper.pid, startTime: processStartTime(sleeper.pid!), token: 'theirs', holder: 'Hindsight serve', host: os.hostname() }));
    await expect(Workspace.open(link)).rejects.toThrow(`is open in Hindsight serve (pid ${sleeper.pid})`);
    expect(fs.existsSync(lockPathFor(link))).toBe(false);
    fs.unlinkSync(lockPathFor(db));

    // Saved through the link: the link stays a link, and the database it points to has the label.
    const ws = await Workspace.open(link);
    ws.setLabel(session!, 1, { reward: -1 });
    ws.close();
    expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
    const read = await Workspace.open(db, { access: 'read' });
    expect(read.listSamples(session)[0]!.label).toMatchObject({ reward: -1, source: 'manual' });
    read.close();

    // A hard link is another name for the same file, which a save (a rename) would split in two.
    const hard = path.join(dir, 'hard.db');
    fs.linkSync(db, hard);
    for (const name of [hard, db]) {
      const err = await Workspace.open(name).then(() => null, (e: Error) => e);
      expect(err?.message).toMatch(/has 2 hard links/);
      expect(err?.message.split('\n')).toHaveLength(1);
    }
    expect((await Workspace.open(hard, { access: 'read' })).listSamples(session).length).toBe(1);
  });
});
