/**
 * The API key live-capture clients send to serve's /v1 (docs/design.md §API key): the key of the
 * open database, kept in `<db>.api-key` (src-main/store/api-key-file.ts), made on first use and
 * the same across launches. Settings shows it (copy, regenerate); regenerating revokes the old key
 * at once: the next request that sends it gets 401, and this launch still tells it apart from a
 * key that was never valid ("revoked", by its SHA-256 only).
 *
 * The file is looked at on every check (an lstat; it is read again only when it changed), so a key
 * the user replaced or deleted by hand is followed without a restart. Comparison is in constant
 * time; no message carries the key.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { CaptureKeyView } from '../../src-shared/capture-api.js';
import { appWording, SurfaceError } from '../../src-shared/types.js';
import { sameSecret, type KeyRefusal } from '../http/access.js';
import { keyHint, readOrCreateApiKey, replaceApiKey, type ApiKeyRecord } from '../store/api-key-file.js';

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest('hex');

/** What identifies the file's current content without reading it. */
function stampOf(file: string): string | null {
  try {
    const st = fs.lstatSync(file);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.mode}:${st.isFile()}`;
  } catch {
    return null;
  }
}

export class CaptureKeys {
  private cached: { file: string; stamp: string; record: ApiKeyRecord } | null = null;
  /** `<file>\0<sha256 of a key>` of the keys regenerated away during this launch. */
  private readonly revoked = new Set<string>();

  /** `file()`: the key file of the open database (it changes when the app opens another one). */
  constructor(private readonly file: () => string) {}

  /** The key, made when the database has none yet; throws a SurfaceError when its file is refused. */
  current(): ApiKeyRecord {
    const file = this.file();
    const stamp = stampOf(file);
    if (this.cached && this.cached.file === file && stamp !== null && this.cached.stamp === stamp) return this.cached.record;
    const record = readOrCreateApiKey(file);
    this.cached = { file, stamp: stampOf(file) ?? '', record };
    return record;
  }

  /** A new key in place of the old one, which stops working at once. */
  regenerate(): ApiKeyRecord {
    const file = this.file();
    let old: string | null = null;
    try {
      old = this.current().key;
    } catch { /* a refused file is replaced all the same */ }
    this.cached = null;
    const record = replaceApiKey(file);
    if (old !== null) this.revoked.add(`${file}\0${sha256(old)}`);
    this.cached = { file, stamp: stampOf(file) ?? '', record };
    return record;
  }

  /** The /v1 check for this key: null lets the request in. */
  check(given: string | null): KeyRefusal | null {
    let record: ApiKeyRecord;
    try {
      record = this.current();
    } catch (err) {
      return { status: 503, code: 'api_key_unavailable', message: (err as Error).message };
    }
    if (sameSecret(given, record.key)) return null;
    const where = `the API key shown in Hindsight's Settings → Live capture (kept in ${record.path})`;
    if (given === null) return { status: 401, code: 'invalid_api_key', message: `missing API key: send 'Authorization: Bearer <key>' with ${where}` };
    if (this.revoked.has(`${record.path}\0${sha256(given)}`)) {
      return { status: 401, code: 'invalid_api_key', message: `this API key was revoked (a new one was made): configure the client with ${where}` };
    }
    return { status: 401, code: 'invalid_api_key', message: `wrong API key: send 'Authorization: Bearer <key>' with ${where}` };
  }

  /** What Settings shows; the key itself only with `reveal`. */
  view(reveal: boolean): CaptureKeyView {
    try {
      return viewOf(this.current(), reveal);
    } catch (err) {
      if (!(err instanceof SurfaceError)) throw err;
      return { available: true, error: appWording(err), path: this.file(), hint: null, key: null, createdAt: null };
    }
  }

  /** Regenerate, answered with the new key (the user copies it now). */
  regenerateView(): CaptureKeyView {
    return viewOf(this.regenerate(), true);
  }
}

function viewOf(record: ApiKeyRecord, reveal: boolean): CaptureKeyView {
  return { available: true, error: null, path: record.path, hint: keyHint(record.key), key: reveal ? record.key : null, createdAt: record.createdAt };
}
