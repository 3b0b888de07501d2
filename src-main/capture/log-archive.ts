/**
 * The capture log's archive (docs/design.md §Capture log rotation): `<db>.capture-archive/`
 * beside the database, a folder (0700) of files (0600) in the log's own format, each holding
 * every record of some settled sessions: sessions idle for six hours. Most can take no more
 * requests (closed, keyless, or not their key's latest segment); a key's open latest segment
 * can, and its stub keeps what joining it needs (ArchivedContinuation: how many messages a
 * continuing request begins with and their hash, and when they were first sent). A request
 * that continues it is logged after the stub, whole: a client resends the whole conversation,
 * so the session's conversation is that request's again and the archive is not read back.
 *
 * Every start reads and replays the capture log, and live sessions hold its text in memory, so
 * a log that only grew would make both grow with everything ever captured. Rotation moves the
 * settled sessions' records to a new archive file, then rewrites the log with one `archived`
 * stub per session where its first record was (its id, next sequence number and file), so
 * resolving a request still sees every segment of a key in order and the replay still knows the
 * session exists. The database already holds what the archive holds; the archive is read again
 * only to rebuild a database that lost archived sessions, and rewritten to delete one.
 *
 * Crash safety: the archive file is written whole (temp file, fsync, rename) before the log is
 * rewritten (the same, atomic). A crash between leaves a file no stub names, holding sessions
 * the log still has whole; the next open removes it (`sweep`).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PRIVATE_FILE_MODE, sweepStaleTempFiles, writeFileAtomicSync } from '../store/atomic-file.js';
import { captureArchivePathFor } from '../store/db-companions.js';
import { encodeRecords, readCaptureLog, type CaptureLog, type ReadResult } from './capture-log.js';
import { ARCHIVE_FILE_NAME, recordSession, type ArchivedContinuation, type ArchivedRecord, type CaptureRecord } from './capture-records.js';

export class CaptureArchive {
  constructor(readonly dir: string) {}

  static forDatabase(dbPath: string): CaptureArchive {
    return new CaptureArchive(captureArchivePathFor(dbPath));
  }

  private pathOf(file: string): string {
    if (!ARCHIVE_FILE_NAME.test(file)) throw new Error(`not an archive file name: ${file}`);
    return path.join(this.dir, file);
  }

  /** Writes the records to a new archive file (atomic); returns its name. */
  write(records: readonly CaptureRecord[]): string {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
    const file = `${stamp}-${crypto.randomBytes(4).toString('hex')}.jsonl`;
    this.writeRecords(file, records);
    return file;
  }

  /** Replaces an archive file with `records` (atomic: temp file, fsync, rename). */
  private writeRecords(file: string, records: readonly CaptureRecord[]): void {
    writeFileAtomicSync(this.pathOf(file), Buffer.from(encodeRecords(records).text, 'utf8'), PRIVATE_FILE_MODE);
  }

  /** An archive file's records, whole (a missing file has none). */
  read(file: string): ReadResult {
    return readCaptureLog(this.pathOf(file));
  }

  /** Rewrites an archive file without the sessions' records (atomic), or removes it when nothing is left. */
  removeSessions(file: string, sessions: ReadonlySet<string>): void {
    const { records } = this.read(file);
    const kept = records.filter((r) => !sessions.has(recordSession(r) ?? ''));
    if (kept.length === records.length) return;
    if (kept.length === 0) fs.rmSync(this.pathOf(file), { force: true });
    else this.writeRecords(file, kept);
  }

  /**
   * Removes the archive files no stub names (a rotation cut short between writing the file and
   * rewriting the log: the log still has those sessions whole), and the temporary files a killed
   * writer left (the atomic writer's own sweep, which spares a live process's). Returns the
   * archive files removed.
   */
  sweep(named: ReadonlySet<string>): string[] {
    let names: string[];
    try {
      names = fs.readdirSync(this.dir);
    } catch {
      return [];
    }
    const orphans = names.filter((name) => ARCHIVE_FILE_NAME.test(name) && !named.has(name));
    for (const name of orphans) fs.rmSync(path.join(this.dir, name), { force: true });
    const tempTargets = new Set(names.flatMap((name) => /^(.+\.jsonl)\.tmp-/.exec(name)?.[1] ?? []));
    for (const target of tempTargets) sweepStaleTempFiles(path.join(this.dir, target));
    return orphans;
  }
}

/**
 * Moves the records of the `settled` sessions (LiveSessions.settled: each with what continuing
 * it needs, if it may go on) from the log to a new archive file, leaving a stub for each where
 * its first record was. Stubs stay; so does the feedback on a session that may go on, for a
 * reply that is no sample yet waits in the log for its next message (docs/design.md §Feedback
 * endpoint). Returns the stubs written (none when the log holds no record of those sessions).
 */
export function rotateCaptureLog(log: CaptureLog, archive: CaptureArchive, settled: ReadonlyMap<string, ArchivedContinuation | undefined>): ArchivedRecord[] {
  const stubs: ArchivedRecord[] = [];
  log.rewrite((records) => {
    const moving = (r: CaptureRecord) => {
      const session = recordSession(r) ?? '';
      return r.t !== 'archived' && settled.has(session) && !(r.t === 'feedback' && settled.get(session));
    };
    const moved = records.filter(moving);
    if (moved.length === 0) return null;
    const file = archive.write(moved);
    const bySession = new Map<string, ArchivedRecord>();
    for (const r of moved) {
      const session = recordSession(r)!;
      let stub = bySession.get(session);
      if (!stub) {
        const open = settled.get(session);
        bySession.set(session, (stub = { v: 1, t: 'archived', session, at: 0, file, nextSeq: 0, conversation: false, ...(open ? { open } : {}) }));
      }
      stub.at = Math.max(stub.at, r.at);
      if (r.t === 'request') {
        stub.nextSeq = Math.max(stub.nextSeq, r.seq + 1);
        stub.conversation ||= r.kind === 'main';
      }
    }
    const next: CaptureRecord[] = [];
    for (const r of records) {
      if (!moving(r)) {
        next.push(r);
        continue;
      }
      const session = recordSession(r)!;
      const stub = bySession.get(session);
      if (!stub) continue; // written at the session's first record already
      bySession.delete(session);
      stubs.push(stub);
      next.push(stub);
    }
    return next;
  });
  return stubs;
}
