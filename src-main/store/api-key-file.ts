// The stable API key of live-capture clients (`/v1` and `/v1/feedback` of `hindsight serve`):
// one line of text in `<db>.api-key` beside the database (db-companions.ts), created once,
// readable by its owner only (0600), replaced only when the user regenerates it.
//
// The browser's session token stays per launch (src-main/api/http-server.ts); this key is what a
// chat client is configured with once, so it must outlive restarts, and it opens only /v1.
//
// Safety of the file:
//   - written atomically: a private temporary file (0600, set exactly whatever the umask),
//     fsynced, then linked into place on creation (a file someone else made first is kept and
//     read) or renamed over the old one on regeneration, then the folder fsynced;
//   - read without following a symbolic link (O_NOFOLLOW where the system has it), and refused,
//     with one line saying why and what to do, when it is a link, not a regular file, belongs to
//     another user, is open to other users (any group or other permission bit), or does not
//     hold one key of 16–256 printable characters. Windows has no POSIX modes or owners: only
//     the link and file-type checks apply there;
//   - the key itself never appears in a message.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SurfaceError } from '../../src-shared/types.js';
import { fsyncDir, PRIVATE_FILE_MODE } from './atomic-file.js';

/** A recognisable prefix (secret scanners, a user telling keys apart); hex after it, never a leading '-'. */
export const API_KEY_PREFIX = 'hsk-';
const KEY_PATTERN = /^[\x21-\x7e]{16,256}$/;
const MAX_FILE_BYTES = 1024;
const POSIX = process.platform !== 'win32';

export interface ApiKeyRecord {
  key: string;
  /** The file it is kept in. */
  path: string;
  /** When the key was written (the file's modification time), ms since the epoch. */
  createdAt: number;
}

/** A fresh key: 24 random bytes as hex after the prefix. */
export function newApiKey(): string {
  return API_KEY_PREFIX + crypto.randomBytes(24).toString('hex');
}

/** The last characters of a key, enough to tell two apart on a page without showing it. */
export function keyHint(key: string): string {
  return `${key.startsWith(API_KEY_PREFIX) ? API_KEY_PREFIX : ''}…${key.slice(-4)}`;
}

function refused(file: string, problem: string, fix: 'replace' | 'chmod' = 'replace'): SurfaceError {
  const chmod = fix === 'chmod';
  const cli = `refusing the API key file ${file}: it ${problem}; ${chmod ? `run chmod 600 ${file}, or ` : ''}run \`hindsight api-key --regenerate\` or press Regenerate key in Settings → Live capture (a new key is made)`;
  const app = `Refusing the API key file ${file}: it ${problem}. ${chmod ? 'Run chmod 600 on it, or press' : 'Press'} Regenerate key to replace it with a new key.`;
  return new SurfaceError(cli, app);
}

/** The file could not be written (a folder without write permission, a full disk). */
function failed(file: string, doing: 'create' | 'replace', err: unknown): SurfaceError {
  const code = (err as NodeJS.ErrnoException).code;
  const folder = code === 'EISDIR' || code === 'ENOTEMPTY';
  const why = folder ? 'a folder has its name: move that folder away' : 'the folder of the database must be writable';
  const message = `cannot ${doing} the API key file ${file} (${code ?? (err as Error).message}): ${why}`;
  return new SurfaceError(message, message.charAt(0).toUpperCase() + message.slice(1) + '.');
}

/** The key in `file`, or null when there is no file; throws (one line) when the file cannot be trusted. */
export function readApiKey(file: string): ApiKeyRecord | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw refused(file, `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (st.isSymbolicLink()) throw refused(file, 'is a symbolic link, not a regular file');
  if (!st.isFile()) throw refused(file, 'is not a regular file');
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: it became a link between the two looks.
    throw refused(file, code === 'ELOOP' ? 'is a symbolic link, not a regular file' : `cannot be read (${code ?? (err as Error).message})`);
  }
  try {
    const fst = fs.fstatSync(fd);
    if (!fst.isFile()) throw refused(file, 'is not a regular file');
    if (POSIX && typeof process.getuid === 'function' && fst.uid !== process.getuid()) throw refused(file, 'belongs to another user');
    if (POSIX && (fst.mode & 0o077) !== 0) throw refused(file, `can be read or written by other users (mode ${(fst.mode & 0o777).toString(8)})`, 'chmod');
    if (fst.size > MAX_FILE_BYTES) throw refused(file, 'does not hold an API key (one line of 16–256 printable characters)');
    const buf = Buffer.alloc(fst.size);
    let read = 0;
    while (read < buf.length) {
      const n = fs.readSync(fd, buf, read, buf.length - read, read);
      if (n === 0) break;
      read += n;
    }
    const key = buf.subarray(0, read).toString('utf8').trim();
    if (!KEY_PATTERN.test(key)) throw refused(file, 'does not hold an API key (one line of 16–256 printable characters)');
    return { key, path: file, createdAt: fst.mtimeMs };
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes `key` to a private temporary file beside `file` and returns its path (fsynced, closed). */
function writePrivateTemp(file: string, key: string, doing: 'create' | 'replace'): string {
  const tmp = `${file}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  let fd: number;
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fd = fs.openSync(tmp, 'wx', PRIVATE_FILE_MODE);
  } catch (err) {
    throw failed(file, doing, err);
  }
  try {
    try {
      fs.fchmodSync(fd, PRIVATE_FILE_MODE); // exactly 0600, whatever the umask left
    } catch { /* Windows: no POSIX modes */ }
    fs.writeSync(fd, `${key}\n`);
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  return tmp;
}

/** The key in `file`; the first call on a database creates it. */
export function readOrCreateApiKey(file: string): ApiKeyRecord {
  const existing = readApiKey(file);
  if (existing) return existing;
  const tmp = writePrivateTemp(file, newApiKey(), 'create');
  try {
    // A hard link fails when the name exists: a key another process made meanwhile is kept.
    // Where the file system has no hard links, a rename (the check above just found no file).
    try {
      fs.linkSync(tmp, file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS' && code !== 'EOPNOTSUPP') throw err;
      fs.renameSync(tmp, file);
    }
    fsyncDir(path.dirname(file));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw failed(file, 'create', err); // EEXIST: read (or refuse) theirs
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  const made = readApiKey(file);
  if (!made) throw refused(file, 'vanished as it was created');
  return made;
}

/**
 * Replaces the key with a new one (the old one stops working at once for whoever checks
 * against this file). A link or a file in the way is replaced by the new regular file; a
 * folder in the way is an error.
 */
export function replaceApiKey(file: string): ApiKeyRecord {
  const tmp = writePrivateTemp(file, newApiKey(), 'replace');
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw failed(file, 'replace', err);
  }
  fsyncDir(path.dirname(file));
  return readApiKey(file)!;
}
