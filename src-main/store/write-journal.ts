/**
 * The database's write journal, `<db>.journal.jsonl` (docs/design.md §Write journal). sql.js holds
 * the database in memory and a save rewrites the whole file (./database.ts), so saves are
 * coalesced, a few hundred milliseconds after a change; the journal is what makes a change
 * durable before then. Every committed transaction (or lone statement) is appended as one line
 * and fsynced before the call that made it returns, so a label edit, a verdict or a saved chat
 * that was acknowledged survives a kill or a power cut. Opening the database replays the journal
 * onto the saved file; the next save starts it anew.
 *
 * - Line 1, `{"journal":1,"save":N}`: the save it follows. That save wrote N into the file's
 *   SQLite header (`user_version`). A journal of another N is stale (the process died between
 *   saving the database and starting its journal): its changes are in the file already.
 * - Every other line: `[[sql, params], …]`, the statements as they ran, with the values they
 *   were bound to (bytes and non-finite numbers tagged, JSON has neither). Replaying them on the
 *   file the save wrote gives the same rows, rowids included.
 * - A last line without its newline is a write the kill cut short: it was never acknowledged,
 *   and is left out. A bad line elsewhere, or one that does not apply, is a one-line error that
 *   names the file; the journal is kept for the user to move away.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { SqlValue } from 'sql.js';
import { UserError } from '../../src-shared/types.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from './atomic-file.js';
import { appendLineSync } from './jsonl-file.js';

export { journalPathFor } from './db-companions.js';

export type JournalParams = SqlValue[] | Record<string, SqlValue>;
/** One statement as it ran: its SQL and what it was bound to. */
export type JournalStatement = [sql: string, params?: JournalParams];

const FORMAT = 1;

/** What a journal that cannot be replayed leaves the user to do (it is kept). */
const MOVE_AWAY = 'move it away to open the database without the changes it holds';

/**
 * A new save's number for the file's header. Random, not counted: a file put back from an older
 * copy could have the count of the journal beside it, but hardly (1 in 2³¹) its random number.
 */
export function newSaveNumber(previous: number): number {
  for (;;) {
    const n = 1 + Math.floor(Math.random() * 0x7ffffffe);
    if (n !== previous) return n;
  }
}

function encodeValue(value: SqlValue): unknown {
  if (value instanceof Uint8Array) return { bytes: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  if (typeof value === 'number' && !Number.isFinite(value)) return { number: String(value) };
  return value;
}

function decodeValue(value: unknown): SqlValue {
  if (value === null || typeof value !== 'object') return value as SqlValue;
  const tagged = value as { bytes?: string; number?: string };
  if (typeof tagged.bytes === 'string') return new Uint8Array(Buffer.from(tagged.bytes, 'base64'));
  if (typeof tagged.number === 'string') return Number(tagged.number);
  throw new Error('an unknown tagged value');
}

function mapParams(params: unknown, map: (value: unknown) => unknown): unknown {
  if (params === undefined) return undefined;
  if (Array.isArray(params)) return params.map(map);
  if (params && typeof params === 'object') return Object.fromEntries(Object.entries(params).map(([k, v]) => [k, map(v)]));
  throw new Error('params are neither a list nor an object');
}

function encodeEntry(statements: JournalStatement[]): string {
  return JSON.stringify(statements.map(([sql, params]) => (params === undefined ? [sql] : [sql, mapParams(params, (v) => encodeValue(v as SqlValue))])));
}

function decodeEntry(line: string): JournalStatement[] {
  const value: unknown = JSON.parse(line);
  if (!Array.isArray(value)) throw new Error('not a list of statements');
  return value.map((s: unknown) => {
    if (!Array.isArray(s) || typeof s[0] !== 'string' || s.length > 2) throw new Error('a statement is not [sql, params]');
    return s.length === 1 ? [s[0]] : [s[0], mapParams(s[1], decodeValue) as JournalParams];
  });
}

/** The journal's changes to replay onto a file whose header holds `save`: none when there is no journal or it is stale. */
export function readJournal(file: string, save: number): JournalStatement[][] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new UserError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const lines = text.split('\n');
  // The last piece has no newline: empty after a whole line, else a write cut short.
  lines.pop();
  if (!lines.length) return [];
  const damaged = (line: number, why: string) =>
    new UserError(`${file}:${line}: the write journal is damaged (${why}); ${MOVE_AWAY}`);
  let header: { journal?: unknown; save?: unknown };
  try {
    header = JSON.parse(lines[0]!) as typeof header;
  } catch (err) {
    throw damaged(1, (err as Error).message);
  }
  if (header?.journal !== FORMAT || typeof header.save !== 'number') throw damaged(1, 'not a Hindsight write journal');
  if (header.save !== save) return [];
  return lines.slice(1).map((line, i) => {
    try {
      return decodeEntry(line);
    } catch (err) {
      throw damaged(i + 2, (err as Error).message);
    }
  });
}

/**
 * Applies the changes of the journal `file` that follow save `save`, each entry through `apply`
 * (one transaction); returns whether there were any. An entry that fails is a one-line error.
 */
export function replayJournal(file: string, save: number, apply: (statements: JournalStatement[]) => void): boolean {
  const entries = readJournal(file, save);
  entries.forEach((statements, i) => {
    try {
      apply(statements);
    } catch (err) {
      throw new UserError(`${file}:${i + 2}: the write journal does not apply to this database (${(err as Error).message}); ${MOVE_AWAY}`);
    }
  });
  return entries.length > 0;
}

/** The journal being written: started after each save, appended to after each commit. */
export class JournalWriter {
  /** A write failed partway: the file may end in part of a line, after which nothing may go (it would join it). */
  private torn = false;

  private constructor(private fd: number | null, readonly file: string) {}

  /** Replaces the journal with an empty one that follows save `save` (atomic: the old one stays until the new one is whole). */
  static start(file: string, save: number, previous?: JournalWriter): JournalWriter {
    previous?.close();
    writeFileAtomicSync(file, Buffer.from(`${JSON.stringify({ journal: FORMAT, save })}\n`), PRIVATE_FILE_MODE);
    return new JournalWriter(fs.openSync(file, 'a', PRIVATE_FILE_MODE), file);
  }

  /** Appends one committed change and fsyncs: when this returns, it survives a crash. */
  append(statements: JournalStatement[]): void {
    if (this.fd === null) throw new Error(`${path.basename(this.file)} is closed`);
    // The caller saves instead (which starts a journal anew): a line after a torn one would be damaged.
    if (this.torn) throw new Error(`${path.basename(this.file)} ends in a line a failed write cut short`);
    try {
      appendLineSync(this.fd, `${encodeEntry(statements)}\n`);
    } catch (err) {
      this.torn = true;
      throw err;
    }
  }

  close(): void {
    if (this.fd === null) return;
    fs.closeSync(this.fd);
    this.fd = null;
  }
}

/** Removes the journal: after a clean close's save, or beside a database never saved yet (so an older one's). */
export function removeJournal(file: string): void {
  fs.rmSync(file, { force: true });
}
