// `hindsight api-key` (docs/design.md §API key): prints the database's capture key from the same
// file the app keeps it in (made on the first look, 0600), replaces it with --regenerate, refuses
// a key file it cannot trust in the app's one line (never the key), and replaces that file too.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readApiKey } from '../../src-main/store/api-key-file.js';
import { apiKeyPathFor } from '../../src-main/store/db-companions.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../store/helpers.js';

const POSIX = process.platform !== 'win32';
let dir: string;
let db: string;
let file: string;

beforeAll(async () => {
  dir = tempDir('hindsight-api-key-cli-');
  db = path.join(dir, 'h.db');
  (await Workspace.open(db)).close();
  file = apiKeyPathFor(db);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('hindsight api-key', () => {
  it("prints the database's key, made on the first look and the same on the next", async () => {
    expect(fs.existsSync(file)).toBe(false);
    const first = await runCli('api-key', '--db', db);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^hsk-[0-9a-f]{48}\n$/);
    expect(first.stderr).toBe(`the API key in ${file}, made ${new Date(readApiKey(file)!.createdAt).toISOString()}\n`);
    expect(`${readApiKey(file)!.key}\n`).toBe(first.stdout);
    if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect((await runCli('api-key', '--db', db)).stdout).toBe(first.stdout);
    expect((await runCli('api-key', '--db', db, '--json')).json()).toEqual({ key: first.stdout.trim(), path: file, createdAt: readApiKey(file)!.createdAt, regenerated: false });
  });

  it('--regenerate replaces it with a new key, kept in the same file', async () => {
    const old = readApiKey(file)!.key;
    const r = await runCli('api-key', '--db', db, '--regenerate', '--json');
    expect(r.code, r.stderr).toBe(0);
    const fresh = r.json();
    expect(fresh).toMatchObject({ path: file, regenerated: true });
    expect(fresh.key).toMatch(/^hsk-[0-9a-f]{48}$/);
    expect(fresh.key).not.toBe(old);
    expect(readApiKey(file)!.key).toBe(fresh.key);
    if (POSIX) expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const plain = await runCli('api-key', '--db', db, '--regenerate');
    expect(plain.stderr).toBe(`a new API key, in ${file}: clients sending the old one now get 401\n`);
    expect(plain.stdout.trim()).not.toBe(fresh.key);
  });

  it.skipIf(!POSIX)('refuses a key file open to other users in one line without the key; --regenerate replaces it', async () => {
    const key = readApiKey(file)!.key;
    fs.chmodSync(file, 0o644);
    const refused = await runCli('api-key', '--db', db);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(`hindsight api-key: refusing the API key file ${file}: it can be read or written by other users (mode 644); ` +
      `run chmod 600 ${file}, or run \`hindsight api-key --regenerate\` or press Regenerate key in Settings → Live capture (a new key is made)\n`);
    expect(refused.stderr).not.toContain(key);
    const replaced = await runCli('api-key', '--db', db, '--regenerate');
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect((await runCli('api-key', '--db', db)).stdout).toBe(replaced.stdout);
  });

  it('makes no key where there is no database', async () => {
    const none = path.join(dir, 'none.db');
    const r = await runCli('api-key', '--db', none);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`hindsight api-key: no database at ${none}: 'hindsight serve' or 'hindsight import' makes one\n`);
    expect(fs.existsSync(apiKeyPathFor(none))).toBe(false);
  });
});
