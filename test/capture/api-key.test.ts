// The stable API key of live-capture clients (issue 34 item 6, docs/design.md §API key): made
// once beside the database, 0600, the same after a restart; regenerating revokes the old key at
// once (401, one line of JSON); a key file that is a link, not a regular file, open to others or
// malformed is refused in one line that never carries a key; the key is never logged; /v1 and
// /v1/feedback take it, the UI's calls do not.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apiKeyPathFor } from '../../src-main/store/db-companions.js';
import { API_KEY_PREFIX, readApiKey, readOrCreateApiKey, replaceApiKey } from '../../src-main/store/api-key-file.js';
import type { CaptureKeyView } from '../../src-shared/capture-api.js';
import { api } from '../helpers/api.js';
import { startCapture, tempDir, TEST_TIMEOUT_MS } from './helpers.js';

const POSIX = process.platform !== 'win32';
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function folder(): string {
  const d = tempDir();
  dirs.push(d);
  return d;
}

/** GET /v1/models with `key` as the Bearer secret (none when null): status, body and the raw text. */
async function models(base: string, key: string | null): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${base}v1/models`, { headers: key === null ? {} : { Authorization: `Bearer ${key}` } });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text };
}

describe('the API key file', () => {
  it('is made once, 0600, one line; read again it is the same', () => {
    const file = path.join(folder(), 'a.db.api-key');
    const made = readOrCreateApiKey(file);
    expect(made.key.startsWith(API_KEY_PREFIX)).toBe(true);
    expect(made.key).toMatch(/^hsk-[0-9a-f]{48}$/);
    expect(fs.readFileSync(file, 'utf8')).toBe(`${made.key}\n`);
    if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(readOrCreateApiKey(file).key).toBe(made.key);
    // No temporary file is left beside it.
    expect(fs.readdirSync(path.dirname(file))).toEqual(['a.db.api-key']);
  });

  it('is 0600 whatever the umask', () => {
    if (!POSIX) return;
    const old = process.umask(0o000);
    try {
      const file = path.join(folder(), 'umask.db.api-key');
      readOrCreateApiKey(file);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      replaceApiKey(file);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(old);
    }
  });

  it('refuses a symbolic link, a folder, a file open to others and a malformed one, in one line without the key', () => {
    const dir = folder();
    const real = path.join(dir, 'real-key');
    fs.writeFileSync(real, 'hsk-0123456789abcdef0123456789abcdef\n', { mode: 0o600 });
    const link = path.join(dir, 'link.db.api-key');
    fs.symlinkSync(real, link);
    const refusal = (file: string) => {
      try {
        readApiKey(file);
      } catch (err) {
        return (err as Error).message;
      }
      return null;
    };
    const linkSays = refusal(link)!;
    expect(linkSays).toMatch(/^refusing the API key file .*link\.db\.api-key: it is a symbolic link, not a regular file; /);
    expect(linkSays).not.toContain('\n');
    expect(linkSays).not.toContain('0123456789abcdef');
    expect(() => readOrCreateApiKey(link)).toThrow(/symbolic link/);

    const dirKey = path.join(dir, 'dir.db.api-key');
    fs.mkdirSync(dirKey);
    expect(refusal(dirKey)).toMatch(/it is not a regular file/);
    expect(() => replaceApiKey(dirKey)).toThrow(/a folder has its name/);

    if (POSIX) {
      const open = path.join(dir, 'open.db.api-key');
      fs.writeFileSync(open, 'hsk-0123456789abcdef0123456789abcdef\n');
      fs.chmodSync(open, 0o644);
      const says = refusal(open)!;
      expect(says).toMatch(/can be read or written by other users \(mode 644\); run chmod 600 /);
      expect(says).not.toContain('0123456789abcdef');
    }

    const bad = path.join(dir, 'bad.db.api-key');
    fs.writeFileSync(bad, 'two words\n', { mode: 0o600 });
    expect(refusal(bad)).toMatch(/does not hold an API key/);
  });

  it('regenerating writes a new key, and replaces a link with a regular 0600 file (the link’s target untouched)', () => {
    const dir = folder();
    const file = path.join(dir, 'r.db.api-key');
    const first = readOrCreateApiKey(file).key;
    const second = replaceApiKey(file).key;
    expect(second).not.toBe(first);
    expect(readApiKey(file)!.key).toBe(second);
    const target = path.join(dir, 'elsewhere');
    fs.writeFileSync(target, 'hsk-0123456789abcdef0123456789abcdef\n', { mode: 0o600 });
    fs.rmSync(file);
    fs.symlinkSync(target, file);
    replaceApiKey(file);
    expect(fs.lstatSync(file).isFile()).toBe(true);
    if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(target, 'utf8')).toBe('hsk-0123456789abcdef0123456789abcdef\n');
  });
});

describe('serve: the API key of capture clients', { timeout: TEST_TIMEOUT_MS }, () => {
  it('survives a restart; the launch token changes; regenerating revokes the old key at once', async () => {
    const dir = folder();
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    let server = await startCapture({ log }, {}, dir);
    const file = apiKeyPathFor(server.dbPath);
    const view = await api<CaptureKeyView>(server, 'captureKey', { reveal: true });
    expect(view).toMatchObject({ available: true, error: null, path: file });
    const key = view.key!;
    expect(view.hint).toBe(`hsk-…${key.slice(-4)}`);
    expect((await api<CaptureKeyView>(server, 'captureKey')).key).toBeNull(); // only when asked
    if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect((await models(server.url, key)).status).toBe(200);
    expect((await models(server.url, server.token)).status).toBe(200); // the launch token too
    // The key opens /v1 only: the app's own calls refuse it.
    const asUi = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` }, body: '{}' });
    expect(asUi.status).toBe(401);
    const oldToken = server.token;
    await server.close();

    server = await startCapture({ log }, {}, dir);
    try {
      expect(server.token).not.toBe(oldToken);
      expect((await models(server.url, key)).status).toBe(200);
      expect((await models(server.url, oldToken)).status).toBe(401);

      const fresh = await api<CaptureKeyView>(server, 'captureKeyRegenerate');
      expect(fresh.key).not.toBe(key);
      expect(fs.readFileSync(file, 'utf8').trim()).toBe(fresh.key);
      if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      const revoked = await models(server.url, key);
      expect(revoked.status).toBe(401);
      expect(revoked.text).not.toContain('\n');
      expect(revoked.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
      expect(revoked.body.error.message).toMatch(/^this API key was revoked \(a new one was made\): configure the client with the API key shown in Hindsight's Settings → Live capture \(kept in .*test\.db\.api-key\)$/);
      const feedback = await fetch(`${server.url}v1/feedback`, {
        method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ id: 'x', reward: 1 }),
      });
      expect(feedback.status).toBe(401);
      expect((await models(server.url, fresh.key)).status).toBe(200);
      const missing = await models(server.url, null);
      expect(missing.status).toBe(401);
      expect(missing.body.error.message).toMatch(/^missing API key: send 'Authorization: Bearer <key>'/);
      expect((await models(server.url, 'hsk-guess')).body.error.message).toMatch(/^wrong API key/);
    } finally {
      await server.close();
    }
    // Never logged: the start-up line names the file only.
    expect(lines.some((l) => l.includes(`API key: the one in Settings → Live capture, kept in ${file}`))).toBe(true);
    for (const line of lines) expect(line).not.toMatch(/hsk-[0-9a-f]{48}/);
  });

  it('a key file that cannot be trusted: /v1 answers 503 in one line, the launch token still works, Settings can regenerate it', async () => {
    if (!POSIX) return;
    const dir = folder();
    const server = await startCapture({}, {}, dir);
    try {
      const file = apiKeyPathFor(server.dbPath);
      const key = (await api<CaptureKeyView>(server, 'captureKey', { reveal: true })).key!;
      fs.chmodSync(file, 0o644);
      const refused = await models(server.url, key);
      expect(refused.status).toBe(503);
      expect(refused.text).not.toContain('\n');
      expect(refused.body.error.code).toBe('api_key_unavailable');
      expect(refused.body.error.message).toMatch(/^refusing the API key file .*: it can be read or written by other users \(mode 644\)/);
      expect(refused.text).not.toContain(key);
      expect((await models(server.url, server.token)).status).toBe(200);
      const view = await api<CaptureKeyView>(server, 'captureKey', { reveal: true });
      expect(view.key).toBeNull();
      expect(view.error).toMatch(/^Refusing the API key file .*Run chmod 600 on it, or press Regenerate key/);
      const fresh = await api<CaptureKeyView>(server, 'captureKeyRegenerate');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect((await models(server.url, fresh.key)).status).toBe(200);
      // A key replaced by hand is followed without a restart.
      fs.rmSync(file);
      fs.writeFileSync(file, 'hsk-my-own-key-of-enough-length\n', { mode: 0o600 });
      expect((await models(server.url, 'hsk-my-own-key-of-enough-length')).status).toBe(200);
      expect((await models(server.url, fresh.key)).status).toBe(401);
    } finally {
      await server.close();
    }
  });
});
