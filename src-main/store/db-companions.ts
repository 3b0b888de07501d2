/**
 * Files that belong to one database sit beside it under its own name, as its training runs do
 * (`<db>.training-runs.json`): `<db>.settings.json`, `<db>.capture-log.jsonl`, the write journal
 * `<db>.journal.jsonl`, the capture log's archive `<db>.capture-archive/`, the API key of
 * capture clients `<db>.api-key`, and the folder live capture's background runs write their
 * adapters to, `<db>.capture-adapters/`. Two
 * databases in one folder then never share settings, captured chats or trained adapters.
 *
 * Earlier versions kept `settings.json` and `capture-log.jsonl` once per folder, shared by
 * every database in it. `adoptFolderFile` moves such a file to the database it came from, the
 * first time that database is opened; the caller says how it knows the file is this
 * database's (docs/design.md §Files beside the database). A file it cannot place is left alone.
 * See docs/design.md §Files beside the database.
 */
import fs from 'node:fs';
import path from 'node:path';

export const FOLDER_SETTINGS_FILE = 'settings.json';
export const FOLDER_CAPTURE_LOG_FILE = 'capture-log.jsonl';

/** Private data (chats, API keys): readable by the owner only. */
export const PRIVATE_FILE_MODE = 0o600;

export function captureLogPathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.capture-log.jsonl`;
}

/** The stable API key of live-capture clients (/v1), 0600 (src-main/store/api-key-file.ts). */
export function apiKeyPathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.api-key`;
}

/** Changes committed since the database's last save (./write-journal.ts). */
export function journalPathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.journal.jsonl`;
}

/** The list of a database's training runs (src-main/api/training-service.ts). */
export function trainingRunsPathFor(dbPath: string): string {
  return `${dbPath}.training-runs.json`;
}

/**
 * Where live capture's background runs put their adapters, one folder per run. Earlier versions
 * used one `capture-adapters/` per folder; its runs stay where they are, since the capture log
 * names each adapter by its full path (docs/design.md §Files beside the database).
 */
export function captureAdaptersPathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.capture-adapters`;
}

/**
 * Where settled sessions' capture records go when the capture log rotates, a folder of JSONL files
 * (src-main/capture/log-archive.ts).
 */
export function captureArchivePathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.capture-archive`;
}

/** Where an earlier version kept `name` for every database in the folder of `dbPath`. */
export function folderFilePath(dbPath: string, name: string): string {
  return path.join(path.dirname(path.resolve(dbPath)), name);
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

function isSqliteFile(file: string): boolean {
  let fd: number | undefined;
  try {
    if (!fs.lstatSync(file).isFile()) return false;
    fd = fs.openSync(file, 'r');
    const head = Buffer.alloc(SQLITE_HEADER.length);
    return fs.readSync(fd, head, 0, head.length, 0) === head.length && head.equals(SQLITE_HEADER);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** The other SQLite databases in the folder of `dbPath` (an atomic save's temporary files aside). */
export function otherDatabasesBeside(dbPath: string): string[] {
  const self = path.resolve(dbPath);
  const dir = path.dirname(self);
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((name) => !/\.tmp(-\d+-\d+)?$/.test(name))
    .map((name) => path.join(dir, name))
    .filter((file) => file !== self && isSqliteFile(file));
}

/**
 * Moves the folder-level file `from` to the database's own `to` when `to` does not exist yet,
 * `from` does, and `belongs()` says it is this database's; the moved file is made private.
 * Returns whether it moved.
 */
export function adoptFolderFile(from: string, to: string, belongs: () => boolean): boolean {
  if (fs.existsSync(to) || !fs.existsSync(from) || !belongs()) return false;
  fs.renameSync(from, to);
  fs.chmodSync(to, PRIVATE_FILE_MODE);
  return true;
}
