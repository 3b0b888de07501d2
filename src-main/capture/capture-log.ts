/**
 * The capture log: an append-only JSONL file beside the database, under its name
 * (`<db>.capture-log.jsonl`, ../store/db-companions.ts), readable by the owner only (0600):
 * the source of truth of live capture. The database is rebuilt from it (replay is idempotent),
 * so whatever the log holds survives a crash of the process or a lost database save.
 *
 * Durability: `append` writes one line and fsyncs before it returns, and the endpoint calls
 * it before it finishes the HTTP response. So a reply the client has received complete is on
 * disk; a crash loses at most the request in flight. A crash mid-write can leave a torn last
 * line: reading skips it (and the next append starts on a fresh line), never failing.
 *
 * Privacy: deleting a session rewrites the log without that session's records (compaction,
 * through a temporary file, fsync and rename), so its text leaves the disk rather than being
 * merely marked deleted.
 *
 * Size: a request, or a rollout's prompt, that begins as its session's previous one did is
 * written as the length of that shared beginning and the rest (./log-prefixes.ts), so a
 * session's log grows with what is new in each turn, not with the whole conversation again.
 * Settled sessions move to the archive (./log-archive.ts), leaving a stub each, so the log
 * read at every start holds the sessions that may still go on.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { adoptFolderFile, captureLogPathFor, folderFilePath, FOLDER_CAPTURE_LOG_FILE, otherDatabasesBeside } from '../store/db-companions.js';
import { PRIVATE_FILE_MODE, sweepStaleTempFiles, writeFileAtomicSync } from '../store/atomic-file.js';
import { appendLineSync, endsMidLine } from '../store/jsonl-file.js';
import type { CaptureRecord } from './capture-records.js';
import { parseRecord, recordSession } from './capture-records.js';
import { LogPrefixes } from './log-prefixes.js';

export { captureLogPathFor };

/**
 * Moves a folder-level `capture-log.jsonl` (earlier versions kept one per folder) to the
 * database at `dbPath`, when it is that database's: the database holds sessions the log
 * recorded, or, holding none of them, it is the only database in the folder. Otherwise the
 * log is a neighbour's and stays. Returns whether it moved.
 */
export function adoptFolderCaptureLog(dbPath: string, capturedSessionIds: readonly string[]): boolean {
  const from = folderFilePath(dbPath, FOLDER_CAPTURE_LOG_FILE);
  return adoptFolderFile(from, captureLogPathFor(dbPath), () => {
    const held = new Set(capturedSessionIds);
    if (readCaptureLog(from).records.some((r) => held.has(recordSession(r) ?? ''))) return true;
    return otherDatabasesBeside(dbPath).length === 0;
  });
}

export interface ReadResult {
  records: CaptureRecord[];
  /** Lines that could not be used, each named by its line number (a torn last line after a crash). */
  skipped: string[];
}

export class CaptureLog {
  private fd: number;
  /** Whether the file ends mid-line (a torn write): the next record starts with a newline. */
  private needsNewline = false;
  /** The sessions' last records as the file has them, which the next ones may share a beginning with. */
  private prefixes = new LogPrefixes();
  /** The file's size in bytes, as this process wrote it. */
  private bytes: number;

  private constructor(readonly filePath: string) {
    fs.mkdirSync(path.dirname(filePath), { recursive: true });
    sweepStaleTempFiles(filePath); // a rewrite killed mid-write (rotation) left its temp file
    try {
      this.fd = fs.openSync(filePath, 'a', 0o600);
    } catch (err) {
      throw new UserError(`cannot open the capture log ${filePath}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    this.needsNewline = endsMidLine(filePath);
    this.bytes = fs.fstatSync(this.fd).size;
  }

  /** The log's size in bytes. */
  get size(): number {
    return this.bytes;
  }

  static open(filePath: string): CaptureLog {
    return new CaptureLog(filePath);
  }

  /**
   * Every well-formed record in order, whole; a bad line is skipped and reported, never fatal.
   * The records appended after it may share beginnings with these (a log not read first is
   * appended to with whole records).
   */
  read(): ReadResult {
    const prefixes = new LogPrefixes();
    const result = readCaptureLog(this.filePath, prefixes);
    this.prefixes = prefixes;
    return result;
  }

  /**
   * Appends one record and fsyncs: when this returns, the record survives a crash. Returns the
   * record to keep in memory, whose messages shared with its session's last request are that
   * request's own objects.
   */
  append(record: CaptureRecord): CaptureRecord {
    const encoded = this.prefixes.encode(record);
    const line = (this.needsNewline ? '\n' : '') + JSON.stringify(encoded.line) + '\n';
    try {
      appendLineSync(this.fd, line);
    } catch (err) {
      this.needsNewline = true; // the next record starts on a line of its own; the torn one is skipped on reading
      this.bytes = fs.fstatSync(this.fd).size;
      throw err;
    }
    this.needsNewline = false;
    this.bytes += Buffer.byteLength(line);
    this.prefixes.note(encoded.record);
    return encoded.record;
  }

  /** Rewrites the log keeping only the records `keep` accepts (atomic: temp file, fsync, rename). */
  compact(keep: (record: CaptureRecord) => boolean): { removed: number } {
    let removed = 0;
    this.rewrite((records) => {
      const kept = records.filter(keep);
      removed = records.length - kept.length;
      return kept;
    });
    return { removed };
  }

  /**
   * Rewrites the log as `change` makes its records over (atomic: temp file, fsync, rename; a
   * full disk or a kill leaves the old log whole); `change` returning null leaves it as it is.
   */
  rewrite(change: (records: CaptureRecord[]) => CaptureRecord[] | null): void {
    const next = change(this.read().records);
    if (next === null) return;
    // Written afresh: a kept record whose base was dropped is written whole, or against an earlier one kept.
    const { text, prefixes } = encodeRecords(next);
    fs.closeSync(this.fd);
    try {
      writeFileAtomicSync(this.filePath, Buffer.from(text, 'utf8'), PRIVATE_FILE_MODE);
    } finally {
      this.fd = fs.openSync(this.filePath, 'a', PRIVATE_FILE_MODE);
      this.bytes = fs.fstatSync(this.fd).size;
    }
    this.needsNewline = false;
    this.prefixes = prefixes;
  }

  close(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

/** Records as log lines, each written as what it adds to its session's earlier ones (./log-prefixes.ts). */
export function encodeRecords(records: readonly CaptureRecord[]): { text: string; prefixes: LogPrefixes } {
  const prefixes = new LogPrefixes();
  const lines = records.map((r) => {
    const encoded = prefixes.encode(r);
    prefixes.note(encoded.record);
    return JSON.stringify(encoded.line) + '\n';
  });
  return { text: lines.join(''), prefixes };
}

/** The records of a capture log file, whole, without opening it for writing (a missing file has none). */
export function readCaptureLog(filePath: string, prefixes = new LogPrefixes()): ReadResult {
  let text: string;
  try {
    text = fs.readFileSync(filePath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], skipped: [] };
    throw new UserError(`cannot read the capture log ${filePath}: ${(err as Error).message}`);
  }
  const records: CaptureRecord[] = [];
  const skipped: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      records.push(prefixes.decode(parseRecord(JSON.parse(line))));
    } catch (err) {
      skipped.push(`${filePath}:${i + 1}: ${(err as Error).message.split('\n')[0]}`);
    }
  });
  return { records, skipped };
}
