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
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { adoptFolderFile, captureLogPathFor, folderFilePath, FOLDER_CAPTURE_LOG_FILE, otherDatabasesBeside } from '../store/db-companions.js';
import type { CaptureRecord } from './capture-records.js';
import { parseRecord, recordSession } from './capture-records.js';

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

  private constructor(readonly filePath: string) {
    fs.mkdirSync(path.dirname(filePath), { recursive: true });
    try {
      this.fd = fs.openSync(filePath, 'a', 0o600);
    } catch (err) {
      throw new UserError(`cannot open the capture log ${filePath}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const size = fs.fstatSync(this.fd).size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      const rfd = fs.openSync(filePath, 'r');
      try {
        fs.readSync(rfd, last, 0, 1, size - 1);
      } finally {
        fs.closeSync(rfd);
      }
      this.needsNewline = last[0] !== 0x0a;
    }
  }

  static open(filePath: string): CaptureLog {
    return new CaptureLog(filePath);
  }

  /** Every well-formed record in order; a bad line is skipped and reported, never fatal. */
  read(): ReadResult {
    return readCaptureLog(this.filePath);
  }

  /** Appends one record and fsyncs: when this returns, the record survives a crash. */
  append(record: CaptureRecord): void {
    const line = (this.needsNewline ? '\n' : '') + JSON.stringify(record) + '\n';
    fs.writeSync(this.fd, line);
    fs.fsyncSync(this.fd);
    this.needsNewline = false;
  }

  /** Rewrites the log keeping only the records `keep` accepts (atomic: temp file, fsync, rename). */
  compact(keep: (record: CaptureRecord) => boolean): { removed: number } {
    const { records } = this.read();
    const kept = records.filter(keep);
    const tmp = `${this.filePath}.${process.pid}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, kept.map((r) => JSON.stringify(r) + '\n').join(''));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.closeSync(this.fd);
    fs.renameSync(tmp, this.filePath);
    syncDir(path.dirname(this.filePath));
    this.fd = fs.openSync(this.filePath, 'a', 0o600);
    this.needsNewline = false;
    return { removed: records.length - kept.length };
  }

  close(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

/** The records of a capture log file, without opening it for writing (a missing file has none). */
export function readCaptureLog(filePath: string): ReadResult {
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
      records.push(parseRecord(JSON.parse(line)));
    } catch (err) {
      skipped.push(`${filePath}:${i + 1}: ${(err as Error).message.split('\n')[0]}`);
    }
  });
  return { records, skipped };
}

/** fsync a folder so a rename in it is durable (a no-op where the platform cannot). */
function syncDir(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Windows cannot open folders for fsync; NTFS renames are journaled anyway.
  }
}
