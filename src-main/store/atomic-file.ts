// Crash-safe file replacement: write a temporary file beside the target, fsync it, rename
// it over the target, then fsync the directory so the rename itself is durable. A process
// killed at any moment leaves either the old file or the new one, never a torn mix,
// because rename(2) within one directory is atomic on POSIX file systems (and
// MoveFileEx-replace on Windows).
import fs from 'node:fs';
import path from 'node:path';

let tempCounter = 0;

/** The most one write call is given: Node refuses more than 2 GiB at once (a large fp32 embedding is more). */
const WRITE_CALL_MAX = 1 << 30;

/**
 * Writes all of `data` at the file's position (or at `position`), continuing short writes (a
 * disk filling up writes part and says so) and splitting what one call cannot take.
 */
export function writeAllSync(fd: number, data: Uint8Array, position?: number): void {
  for (let done = 0; done < data.byteLength; ) {
    const length = Math.min(WRITE_CALL_MAX, data.byteLength - done);
    done += fs.writeSync(fd, data, done, length, position === undefined ? null : position + done);
  }
}

/** Databases, capture logs and settings hold private chats: only their owner may read them. */
export const PRIVATE_FILE_MODE = 0o600;

/** The permission bits of the file a save replaces, or null when there is none yet. */
function existingMode(target: string): number | null {
  try {
    return fs.statSync(target).mode & 0o7777;
  } catch {
    return null;
  }
}

/** A temp name beside `target` that names its writer's pid, so stale ones can be swept. */
function tempPathFor(target: string): string {
  tempCounter += 1;
  return `${target}.tmp-${process.pid}-${tempCounter}`;
}

/** fsync a directory so a rename in it survives a power cut. Not possible on Windows. */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EACCES' && code !== 'EINVAL') throw err;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** Replaces `target` with `data` atomically and durably, keeping its permission bits. */
export function writeFileAtomicSync(target: string, data: Uint8Array, newFileMode = 0o644): void {
  const writer = new AtomicFileWriter(target, newFileMode);
  try {
    writer.write(data);
    writer.commit();
  } catch (err) {
    writer.abort();
    throw err;
  }
}

/**
 * Streams a file to a temp path and renames it into place on `commit()`. Writes are
 * buffered into large chunks so many small JSONL lines do not cost one syscall each.
 */
export class AtomicFileWriter {
  readonly tempPath: string;
  private fd: number | null;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private static readonly CHUNK = 1 << 20;

  constructor(readonly target: string, newFileMode = 0o644) {
    fs.mkdirSync(path.dirname(path.resolve(target)), { recursive: true });
    this.tempPath = tempPathFor(target);
    // A replacement keeps the replaced file's permission bits (a database the user made 0600
    // stays 0600): created owner-only, then set exactly, since open() applies the umask. A
    // new file gets `newFileMode` under the umask.
    const keep = existingMode(target);
    this.fd = fs.openSync(this.tempPath, 'wx', keep === null ? newFileMode : 0o600);
    if (keep !== null) {
      try {
        fs.fchmodSync(this.fd, keep);
      } catch { /* Windows: no POSIX modes */ }
    }
  }

  write(data: string | Uint8Array): void {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.pending.push(buf);
    this.pendingBytes += buf.length;
    if (this.pendingBytes >= AtomicFileWriter.CHUNK) this.drain();
  }

  private drain(): void {
    if (this.fd === null) throw new Error(`${this.target}: writer already closed`);
    const all = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
    writeAllSync(this.fd, all);
    this.pending = [];
    this.pendingBytes = 0;
  }

  /** Flushes, fsyncs and renames the temp file over the target. */
  commit(): void {
    this.drain();
    const fd = this.fd!;
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    this.fd = null;
    fs.renameSync(this.tempPath, this.target);
    fsyncDir(path.dirname(path.resolve(this.target)));
  }

  /** Drops the temp file; the target is untouched. Safe to call after a failed commit. */
  abort(): void {
    if (this.fd !== null) {
      try { fs.closeSync(this.fd); } catch { /* already closed */ }
      this.fd = null;
    }
    try { fs.unlinkSync(this.tempPath); } catch { /* never created or already renamed */ }
  }
}

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
export function pidIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes temp files left beside each target by writers that were killed mid-save. Files of
 * a writer that is still running are left alone.
 */
export function sweepStaleTempFiles(...targets: string[]): number {
  return targets.reduce((removed, target) => removed + sweepStaleTempFilesOf(target), 0);
}

function sweepStaleTempFilesOf(target: string): number {
  const dir = path.dirname(path.resolve(target));
  const prefix = path.basename(target) + '.tmp-';
  let removed = 0;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split('-')[0]);
    if (!Number.isInteger(pid) || (pid !== process.pid && pidIsAlive(pid))) continue;
    if (pid === process.pid) continue;
    try {
      fs.unlinkSync(path.join(dir, name));
      removed += 1;
    } catch { /* raced with another sweeper */ }
  }
  return removed;
}
