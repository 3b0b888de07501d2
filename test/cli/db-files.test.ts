// The files around a database: an export never overwrites the database or a file it keeps
// (however the path is spelled), saves keep the file's permissions and new private files are
// 0600, and a command that only reads, or that fails, creates nothing.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CaptureLog, captureLogPathFor } from '../../src-main/capture/capture-log.js';
import { lockPathFor } from '../../src-main/store/db-lock.js';
import { SettingsStore, settingsPathFor } from '../../src-main/store/settings-file.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../store/helpers.js';

const CHATGPT = fileURLToPath(new URL('../fixtures/chatgpt-branches.json', import.meta.url));
const SESSION = 'chatgpt:6a1f0c2e-fixture-chatgpt-branches';
const isPosix = process.platform !== 'win32';

async function importedDb(): Promise<{ dir: string; db: string }> {
  const dir = tempDir();
  const db = path.join(dir, 'my.db');
  const r = await runCli('import', CHATGPT, '--db', db);
  expect(r.code).toBe(0);
  return { dir, db };
}

const mode = (file: string) => fs.statSync(file).mode & 0o777;

describe('export never writes over the database or its files', () => {
  it('refuses the database through a symlinked folder, and by a hard link', async () => {
    const { dir, db } = await importedDb();
    const before = fs.readFileSync(db);
    const linkdir = path.join(tempDir(), 'linkdir');
    fs.symlinkSync(dir, linkdir);
    const viaLink = await runCli('export', '--format', 'samples', '--out', path.join(linkdir, 'my.db'), '--db', db);
    expect(viaLink.code).toBe(1);
    expect(viaLink.stderr).toMatch(/that is the database itself; choose another output file/);
    fs.linkSync(db, path.join(dir, 'hard.db'));
    const viaHardLink = await runCli('export', '--format', 'samples', '--out', path.join(dir, 'hard.db'), '--db', db);
    expect(viaHardLink.code).toBe(1);
    expect(fs.readFileSync(db).equals(before)).toBe(true);
  });

  it('refuses its capture log, settings, lock and temporary files, its list of training runs, and its capture adapters and archive folders and what is in them', async () => {
    const { dir, db } = await importedDb();
    fs.writeFileSync(captureLogPathFor(db), '{"keep":"me"}\n');
    const cases: [string, RegExp][] = [
      [captureLogPathFor(db), /that is the database's capture log/],
      [path.join(dir, 'capture-log.jsonl'), /that is the folder's capture log/],
      [settingsPathFor(db), /that is the database's settings file/],
      [lockPathFor(db), /that is the database's lock file/],
      [`${db}.tmp-4242-1`, /that is the database's temporary file/],
      [`${db}.capture-adapters`, /that is the database's capture adapters folder/],
      [`${db}.capture-adapters/run-1/adapter_config.json`, /that is a file in the database's capture adapters; choose another output file/],
      [`${db}.capture-archive`, /that is the database's capture archive folder/],
      [`${db}.capture-archive/20261128-000000-abcd1234.jsonl`, /that is a file in the database's capture archive/],
      [`${db}.training-runs.json`, /that is the database's list of training runs/],
    ];
    for (const [out, message] of cases) {
      const r = await runCli('export', '--format', 'samples', '--out', out, '--db', db);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(message);
    }
    expect(fs.readFileSync(captureLogPathFor(db), 'utf8')).toBe('{"keep":"me"}\n');
    const fine = await runCli('export', '--format', 'samples', '--out', path.join(dir, 'samples.jsonl'), '--db', db);
    expect(fine.code).toBe(0);
  });
});

describe.runIf(isPosix)('permissions', () => {
  it('keeps a database 0600 (or 0640) across saves', async () => {
    const { db } = await importedDb();
    for (const bits of [0o600, 0o640]) {
      fs.chmodSync(db, bits);
      const r = await runCli('label', SESSION, '3', '--reward', '1', '--db', db);
      expect(r.code).toBe(0);
      expect(mode(db)).toBe(bits);
    }
  });

  it('creates new databases, capture logs and settings as 0600', async () => {
    const { db } = await importedDb();
    expect(mode(db)).toBe(0o600);
    const settings = new SettingsStore(settingsPathFor(db), '/no/model');
    settings.update({ judgeVotes: 5 });
    expect(mode(settingsPathFor(db))).toBe(0o600);
    const log = CaptureLog.open(captureLogPathFor(db));
    log.close();
    expect(mode(captureLogPathFor(db))).toBe(0o600);
  });

  it('creates exports and a hand-off\'s datasets as 0600 (chat text); an export written over keeps its mode', async () => {
    const { dir, db } = await importedDb();
    const out = path.join(dir, 'kto.jsonl');
    expect((await runCli('export', '--format', 'kto', '--out', out, '--db', db)).code).toBe(0);
    expect(mode(out)).toBe(0o600);
    fs.chmodSync(out, 0o640);
    expect((await runCli('export', '--format', 'kto', '--out', out, '--db', db)).code).toBe(0);
    expect(mode(out)).toBe(0o640);
    const handoff = path.join(dir, 'handoff');
    expect((await runCli('handoff', '--db', db, '--to', 'trl', '--base-model', 'Qwen/Qwen3-14B', '--out', handoff)).code).toBe(0);
    const datasets = fs.readdirSync(handoff, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.jsonl'));
    expect(datasets.length).toBeGreaterThan(0);
    for (const file of datasets) expect([file, mode(path.join(handoff, file))]).toEqual([file, 0o600]);
  });

  it('writes eval --out (contexts and replies) and score --out as 0600', async () => {
    const { dir, db } = await importedDb();
    const model = fileURLToPath(new URL('../../resources/models/stories260K', import.meta.url));
    const report = path.join(dir, 'report.json');
    const evaluated = await runCli('eval', '--model', model, '--db', db, '--split', 'all', '--metrics', 'likelihood', '--json', '--out', report);
    expect(evaluated.code).toBe(0);
    expect(mode(report)).toBe(0o600);
    const samples = path.join(dir, 'samples.jsonl');
    expect((await runCli('export', '--format', 'samples', '--out', samples, '--db', db)).code).toBe(0);
    const scored = path.join(dir, 'scored.jsonl');
    expect((await runCli('score', '--model', model, '--input', samples, '--out', scored)).code).toBe(0);
    expect(mode(scored)).toBe(0o600);
  });
});

describe('stray files', () => {
  it('a reading command on a missing database says so, exits 1 and creates nothing', async () => {
    const dir = tempDir();
    const typo = path.join(dir, 'no/such/dir/typo.db');
    const out = path.join(dir, 'out.jsonl');
    for (const args of [['stats'], ['samples'], ['export', '--format', 'kto', '--out', out]]) {
      const r = await runCli(...args, '--db', typo);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`hindsight ${args[0]}: no database at ${typo}`);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a failing writer leaves no database, lock or folder behind', async () => {
    const dir = tempDir();
    for (const db of [path.join(dir, 'new.db'), path.join(dir, 'deep/er/new.db')]) {
      const label = await runCli('label', 'chatgpt:nope', '3', '--reward', '1', '--db', db);
      expect(label.code).toBe(1);
      expect(label.stderr).toMatch(/no session 'chatgpt:nope'/);
      const imported = await runCli('import', path.join(dir, 'missing.json'), '--db', db);
      expect(imported.code).toBe(1);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
