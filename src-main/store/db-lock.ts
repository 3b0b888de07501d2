// One writer per database (docs/design.md §One writer per database).
//
// sql.js keeps the whole database in memory and replaces the file on every save, so two
// processes writing one database lose each other's changes: the last save wins. A writer
// therefore holds `<db>.lock`, a small JSON file created whole (linked into place) that names it: pid,
// process start time, a random token and what it is ("Hindsight serve", "hindsight label",
// "the Hindsight app"). A second writer is refused with a message naming the holder.
//
// A `kill -9` cannot release the lock, so a lock is stale, and taken over, when its pid is
// dead or belongs to a newer process (a reused pid has another start time). The takeover
// renames the stale file aside first, so two processes taking over at once cannot both win.
// Readers never take the lock.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { UserError } from '../../src-shared/types.js';
import { pidIsAlive } from './atomic-file.js';

interface LockRecord {
  pid: number;
  /** The process start time (from /proc/<pid>/stat), or null where the OS does not tell. */
  startTime: string | null;
  token: string;
  holder: string;
  host: string;
}

/** A lock file this young and still unreadable is being written by its creator. */
const UNREADABLE_GRACE_MS = 5_000;

let processHolder = process.versions.electron ? 'the Hindsight app' : 'another Hindsight process';

/** Names this process in the locks it takes ("Hindsight serve", "hindsight label", …). */
export function setLockHolderName(name: string): void {
  processHolder = name;
}

export function lockPathFor(dbPath: string): string {
  return `${dbPath}.lock`;
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or null. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may hold spaces and parentheses: count after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function readLock(lockPath: string): LockRecord | 'unreadable' | 'absent' {
  let text: string;
  try {
    text = fs.readFileSync(lockPath, 'utf8');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : 'unreadable';
  }
  try {
    const rec = JSON.parse(text) as LockRecord;
    return Number.isInteger(rec.pid) && typeof rec.token === 'string' ? rec : 'unreadable';
  } catch {
    return 'unreadable';
  }
}

/** Whether the process that wrote `rec` is gone (dead, or its pid now names another process). */
function isStale(rec: LockRecord): boolean {
  if (rec.host !== os.hostname()) return false; // cannot look at another machine's processes
  if (!pidIsAlive(rec.pid)) return true;
  const now = processStartTime(rec.pid);
  return rec.startTime !== null && now !== null && now !== rec.startTime;
}

function unreadableIsStale(lockPath: string): boolean {
  try {
    return Date.now() - fs.statSync(lockPath).mtimeMs > UNREADABLE_GRACE_MS;
  } catch {
    return true;
  }
}

function heldError(dbPath: string, rec: LockRecord | null): UserError {
  if (rec && rec.host !== os.hostname()) {
    // Another machine's processes cannot be checked: only the user knows whether it is gone.
    return new UserError(`${dbPath} is open in ${rec.holder} (pid ${rec.pid} on ${rec.host}); stop it there, or delete ${lockPathFor(dbPath)} if it is no longer running`);
  }
  const who = rec ? `${rec.holder} (pid ${rec.pid})` : 'another Hindsight process';
  return new UserError(`${dbPath} is open in ${who}; stop it, or make this change through the app`);
}

/** Locks held by this process, by lock path: a process may open its own database twice. */
const heldHere = new Map<string, { token: string; count: number }>();

/** The lock this process holds on one database; `release()` once per acquire. */
export class DbLock {
  private released = false;

  private constructor(readonly lockPath: string) {}

  /**
   * Takes the lock of `dbPath` (an absolute path whose folder exists), taking over a stale
   * one; throws a UserError naming the holder when another live process has it.
   */
  static acquire(dbPath: string, displayPath = dbPath): DbLock {
    const lockPath = lockPathFor(dbPath);
    const mine = heldHere.get(lockPath);
    if (mine) {
      mine.count++;
      return new DbLock(lockPath);
    }
    const record: LockRecord = {
      pid: process.pid, startTime: processStartTime(process.pid), token: randomBytes(12).toString('hex'),
      holder: processHolder, host: os.hostname(),
    };
    for (let attempt = 0; attempt < 5; attempt++) {
      if (tryCreate(lockPath, record)) {
        heldHere.set(lockPath, { token: record.token, count: 1 });
        return new DbLock(lockPath);
      }
      const found = readLock(lockPath);
      if (found === 'absent') continue;
      if (found === 'unreadable' ? !unreadableIsStale(lockPath) : !isStale(found)) {
        throw heldError(displayPath, found === 'unreadable' ? null : found);
      }
      takeOver(lockPath, found === 'unreadable' ? null : found.token);
    }
    throw heldError(displayPath, null);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    const mine = heldHere.get(this.lockPath);
    if (!mine) return;
    if (--mine.count > 0) return;
    heldHere.delete(this.lockPath);
    removeIfOurs(this.lockPath, mine.token);
  }
}

/**
 * Creates the lock with its record already in it: written to a private file, then linked to the
 * lock's name, which fails if a lock is there. A lock created empty and written after (O_EXCL)
 * would be read, in between, as an unreadable lock by a second writer, which then could not name
 * the holder. Where the file system has no hard links, O_EXCL it is.
 */
function tryCreate(lockPath: string, record: LockRecord): boolean {
  const text = JSON.stringify(record) + '\n';
  const temp = `${lockPath}.new-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    fs.writeFileSync(temp, text, { mode: 0o600, flag: 'wx' });
    fs.linkSync(temp, lockPath);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw new UserError(`cannot lock ${lockPath}: ${code ?? (err as Error).message}`);
  } finally {
    try { fs.unlinkSync(temp); } catch { /* never made */ }
  }
  return tryCreateExclusive(lockPath, text);
}

function tryCreateExclusive(lockPath: string, text: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(lockPath, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new UserError(`cannot lock ${lockPath}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    fs.writeSync(fd, text);
  } finally {
    fs.closeSync(fd);
  }
  return true;
}

/**
 * Moves a stale lock aside and deletes it. If what was moved is not the stale lock (another
 * process took it over in the meantime and created a fresh one), it is put back.
 */
function takeOver(lockPath: string, staleToken: string | null): void {
  const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    fs.renameSync(lockPath, aside);
  } catch {
    return; // already gone: the next attempt creates it
  }
  const moved = readLock(aside);
  const wasStale = staleToken === null ? moved === 'unreadable' || moved === 'absent' : moved !== 'unreadable' && moved !== 'absent' && moved.token === staleToken;
  if (!wasStale) {
    try {
      fs.linkSync(aside, lockPath); // fails if yet another lock appeared: then that one rules
    } catch { /* keep the newer lock */ }
  }
  try { fs.unlinkSync(aside); } catch { /* raced */ }
}

function removeIfOurs(lockPath: string, token: string): void {
  const found = readLock(lockPath);
  if (found !== 'absent' && found !== 'unreadable' && found.token === token) {
    try { fs.unlinkSync(lockPath); } catch { /* already gone */ }
  }
}

// A process that exits without closing its database (Ctrl-C on serve) leaves no lock behind.
process.on('exit', () => {
  for (const [lockPath, { token }] of heldHere) removeIfOurs(lockPath, token);
});
