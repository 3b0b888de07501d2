// The files of a database on disk: reading it, the folder and lock that opening it for
// writing creates (so a failed command can remove them again), and the companion files
// that an export must never overwrite.
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { DbLock, lockPathFor } from './db-lock.js';
import { settingsPathFor } from './settings-file.js';
import { apiKeyPathFor, captureAdaptersPathFor, captureArchivePathFor, captureLogPathFor, folderFilePath, FOLDER_CAPTURE_LOG_FILE, FOLDER_SETTINGS_FILE, journalPathFor, trainingRunsPathFor } from './db-companions.js';

/** What opening for writing created on disk, so a failed command can leave nothing behind. */
export interface WriterFootprint {
  lock: DbLock;
  /** The database file did not exist when opened. */
  fileIsNew: boolean;
  /** The outermost folder that opening created, or null. */
  createdDir: string | null;
}

/** Reads the database file; null when there is none. Errors name the path as the user gave it. */
export function readDatabaseBytes(resolved: string, displayPath: string): Buffer | null {
  try {
    return fs.readFileSync(resolved);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EISDIR') throw new UserError(`${displayPath}: is a directory, not a database file`);
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new UserError(`${displayPath}: cannot read the database (${(err as Error).message})`);
    return null;
  }
}

/**
 * Creates the database's folder if needed and takes its lock. `resolved` is the real path
 * (symbolic links resolved, realPathOf), so every name of the file shares one lock and a save
 * replaces the file the links point to. A file with several hard links is refused: a save
 * replaces the file by renaming, which would leave the other names with an old copy that
 * another writer could then open under a lock of its own.
 */
export function openForWriting(resolved: string, displayPath: string): WriterFootprint {
  refuseHardLinks(resolved, displayPath);
  let createdDir: string | null = null;
  try {
    createdDir = fs.mkdirSync(path.dirname(resolved), { recursive: true }) ?? null;
  } catch (err) {
    throw new UserError(`${displayPath}: cannot create its folder (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    const lock = DbLock.acquire(resolved, displayPath);
    return { lock, fileIsNew: !fs.existsSync(resolved), createdDir };
  } catch (err) {
    removeCreatedDirs(resolved, createdDir);
    throw err;
  }
}

function refuseHardLinks(resolved: string, displayPath: string): void {
  let links: number;
  try {
    links = fs.statSync(resolved).nlink;
  } catch {
    return; // no file yet (or unreadable: reading it names the problem)
  }
  if (links > 1) {
    throw new UserError(`${displayPath} has ${links} hard links (other names for the same file); a save would split them, so open it under one name after removing the others (or use a symbolic link)`);
  }
}

/** Removes the (empty) folders opening created, innermost first. */
export function removeCreatedDirs(resolved: string, createdDir: string | null): void {
  if (!createdDir) return;
  for (let dir = path.dirname(resolved); dir.length >= createdDir.length; dir = path.dirname(dir)) {
    try {
      fs.rmdirSync(dir);
    } catch {
      return; // not empty: something else lives there now
    }
    if (dir === createdDir) return;
  }
}

/**
 * The real path of `file`: symbolic links resolved in the file itself when it exists, else
 * in its folder (the nearest existing one), so two spellings of one file compare equal.
 */
export function realPathOf(file: string): string {
  const resolved = path.resolve(file);
  try {
    return fs.realpathSync(resolved);
  } catch {
    const parent = path.dirname(resolved);
    return parent === resolved ? resolved : path.join(realPathOf(parent), path.basename(resolved));
  }
}

function sameInode(a: string, b: string): boolean {
  try {
    const sa = fs.statSync(a);
    const sb = fs.statSync(b);
    return sa.ino === sb.ino && sa.dev === sb.dev;
  } catch {
    return false;
  }
}

/**
 * What `candidate` is to the database at `dbPath` when it is one of the files the store
 * keeps (the database, its temporary files, its lock, its settings, its capture log), or
 * null. Paths are compared after resolving symbolic links, and by inode (hard links).
 */
export function databaseFileRole(dbPath: string, candidate: string): string | null {
  const db = realPathOf(dbPath);
  const target = realPathOf(candidate);
  const roles: [string, string][] = [
    [db, 'the database itself'],
    [lockPathFor(db), "the database's lock file"],
    [settingsPathFor(db), "the database's settings file"],
    [captureLogPathFor(db), "the database's capture log"],
    [captureAdaptersPathFor(db), "the database's capture adapters folder"],
    [captureArchivePathFor(db), "the database's capture archive folder"],
    [trainingRunsPathFor(db), "the database's list of training runs"],
    [apiKeyPathFor(db), "the database's API key file"],
    [journalPathFor(db), "the database's write journal"],
    // An earlier version's folder-level files, which the database may still adopt on open.
    [folderFilePath(db, FOLDER_CAPTURE_LOG_FILE), "the folder's capture log"],
    [folderFilePath(db, FOLDER_SETTINGS_FILE), "the folder's settings file"],
  ];
  for (const [file, role] of roles) if (target === file || sameInode(target, file)) return role;
  if (target.startsWith(`${db}.tmp-`)) return "the database's temporary file";
  // The folders' contents are the store's too: archived chats, trained adapters.
  for (const [folder, role] of [[captureArchivePathFor(db), "the database's capture archive"], [captureAdaptersPathFor(db), "the database's capture adapters"]] as const) {
    if (target.startsWith(folder + path.sep)) return `a file in ${role}`;
  }
  return null;
}
