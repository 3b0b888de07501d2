// Settings and the capture log belong to their database, not to its folder (issue 11,
// item 14): `<db>.settings.json` and `<db>.capture-log.jsonl`, private (0600), and the
// background loop's adapters go to `<db>.capture-adapters/`. Two databases in one folder
// share nothing, and a folder in the earlier layout (one `settings.json` and one
// `capture-log.jsonl` for the folder) is migrated to the database it came from; adapters in
// the folder's old `capture-adapters/` stay there and are still served.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serveApp, type ServeOptions } from '../../src-main/api/serve-app.js';
import { captureLogPathFor } from '../../src-main/capture/capture-log.js';
import { settingsPathFor } from '../../src-main/store/settings-file.js';
import { chat, DEMO_MODEL, tempDir } from './helpers.js';

async function serve(dbPath: string, options: Partial<ServeOptions> = {}) {
  const lines: string[] = [];
  const server = await serveApp({ dbPath, port: 0, buildRenderer: false, openaiModelDir: DEMO_MODEL, log: (l) => lines.push(l), ...options });
  return Object.assign(server, { lines, counts: () => server.service.currentWorkspace.captureCounts() });
}

/** Serves `dbPath` with capture on and records one reply with its reaction: one captured sample. */
async function captureOneChat(dbPath: string, sessionId: string): Promise<void> {
  const server = await serve(dbPath, { capture: true });
  try {
    const base = `${server.url}v1`;
    const h = { headers: { 'X-Session-Id': sessionId } };
    const first = [{ role: 'user', content: 'Tell me about a dog.' }];
    const r1 = await chat(base, server.token, first, h);
    expect(r1.status).toBe(200);
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'No, a cat.' }], h);
    expect(server.counts()).toMatchObject({ exchanges: 2, sessionIds: [`capture:${sessionId}`] });
  } finally {
    await server.close();
  }
}

const mode = (file: string) => fs.statSync(file).mode & 0o777;

/** Puts a database's own files back where earlier versions kept them: once per folder. */
function toFolderLayout(dbPath: string): void {
  const dir = path.dirname(dbPath);
  fs.renameSync(settingsPathFor(dbPath), path.join(dir, 'settings.json'));
  fs.renameSync(captureLogPathFor(dbPath), path.join(dir, 'capture-log.jsonl'));
}

describe('two databases in one folder', () => {
  it('capture on for a: b sees capture off and none of a’s chats; a’s files are its own and private', async () => {
    const dir = tempDir();
    const a = path.join(dir, 'a.db');
    const b = path.join(dir, 'b.db');
    await captureOneChat(a, 'a-chat');
    expect(mode(settingsPathFor(a))).toBe(0o600);
    expect(mode(captureLogPathFor(a))).toBe(0o600);
    expect(fs.readFileSync(captureLogPathFor(a), 'utf8')).toContain('No, a cat.');

    const other = await serve(b);
    try {
      expect(other.service.settings.raw.captureEnabled).toBe(false);
      expect(other.lines.join('\n')).not.toMatch(/live capture is ON/);
      expect(other.counts()).toMatchObject({ exchanges: 0, sessionIds: [] });
      expect(other.capture.status().logPath).toBe(captureLogPathFor(b));
      expect(other.capture.status().adaptersDir).toBe(`${b}.capture-adapters`);
    } finally {
      await other.close();
    }
    expect(fs.readdirSync(dir).filter((f) => f === 'settings.json' || f === 'capture-log.jsonl')).toEqual([]);

    const again = await serve(a);
    try {
      expect(again.service.settings.raw.captureEnabled).toBe(true);
      expect(again.lines.join('\n')).toMatch(/live capture is ON/);
      expect(again.counts().sessionIds).toEqual(['capture:a-chat']);
      expect(again.capture.status().adaptersDir).toBe(`${a}.capture-adapters`);
    } finally {
      await again.close();
    }
  }, 120_000);
});

describe('a folder in the earlier layout', () => {
  it('an adapter the loop wrote to the folder-wide capture-adapters/ is still served; new runs go to the database’s own folder', async () => {
    const dir = tempDir();
    const a = path.join(dir, 'a.db');
    await captureOneChat(a, 'old-run');
    // What an earlier version left: a run in the folder's capture-adapters/, named by the log.
    const old = path.join(dir, 'capture-adapters', 'run-old');
    fs.cpSync(path.resolve('test/fixtures/peft-roundtrip/adapter'), old, { recursive: true });
    const at = Date.now();
    fs.appendFileSync(
      captureLogPathFor(a),
      JSON.stringify({ v: 1, t: 'trained', at, runId: 'run-old', samples: ['capture:old-run/1'], adapterDir: old }) + '\n' +
        JSON.stringify({ v: 1, t: 'adapter', at, dir: old, reason: 'trained' }) + '\n',
    );
    const server = await serve(a, { capture: true });
    try {
      const status = server.capture.status();
      expect(status.adapter.active).toBe(old);
      expect(status.adaptersDir).toBe(`${a}.capture-adapters`);
      const reply = await chat(`${server.url}v1`, server.token, [{ role: 'user', content: 'Hello.' }], { headers: { 'X-Turn-Type': 'side' } });
      expect(reply.status).toBe(200);
      expect(reply.body.model).toBe('stories260K+run-old');
    } finally {
      await server.close();
    }
    expect(fs.existsSync(path.join(old, 'adapter_model.safetensors'))).toBe(true); // left where the log says it is
  }, 120_000);

  it('with one database: its settings and capture log become that database’s, made private', async () => {
    const dir = tempDir();
    const a = path.join(dir, 'a.db');
    await captureOneChat(a, 'only');
    toFolderLayout(a);
    fs.chmodSync(path.join(dir, 'settings.json'), 0o644);
    fs.chmodSync(path.join(dir, 'capture-log.jsonl'), 0o644);

    const server = await serve(a);
    try {
      expect(server.service.settings.raw.captureEnabled).toBe(true);
      expect(server.counts()).toMatchObject({ exchanges: 2, sessionIds: ['capture:only'] });
      expect(server.capture.status().logPath).toBe(captureLogPathFor(a));
    } finally {
      await server.close();
    }
    expect(fs.existsSync(path.join(dir, 'settings.json'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'capture-log.jsonl'))).toBe(false);
    expect(mode(settingsPathFor(a))).toBe(0o600);
    expect(mode(captureLogPathFor(a))).toBe(0o600);
    expect(fs.readFileSync(captureLogPathFor(a), 'utf8')).toContain('No, a cat.');
  }, 120_000);

  it('with two databases: the log goes to the one that holds its chats; settings nobody can place stay put', async () => {
    const dir = tempDir();
    const a = path.join(dir, 'a.db');
    const b = path.join(dir, 'b.db');
    await captureOneChat(a, 'a-chat');
    await captureOneChat(b, 'b-chat'); // b exists as a database too (its own files are removed below)
    fs.rmSync(settingsPathFor(b));
    fs.rmSync(captureLogPathFor(b));
    toFolderLayout(a);

    // b first: the folder's log holds a's chats, not b's; two databases, so the settings are nobody's.
    const other = await serve(b);
    try {
      expect(other.service.settings.raw.captureEnabled).toBe(false);
      expect(other.counts().sessionIds).toEqual(['capture:b-chat']); // kept: its new log never had it
      expect(other.counts().sessionIds).not.toContain('capture:a-chat');
    } finally {
      await other.close();
    }
    expect(fs.existsSync(path.join(dir, 'capture-log.jsonl'))).toBe(true);
    expect(fs.existsSync(captureLogPathFor(a))).toBe(false);

    const owner = await serve(a);
    try {
      expect(owner.counts()).toMatchObject({ exchanges: 2, sessionIds: ['capture:a-chat'] });
      expect(owner.capture.status().logPath).toBe(captureLogPathFor(a));
    } finally {
      await owner.close();
    }
    expect(fs.existsSync(path.join(dir, 'capture-log.jsonl'))).toBe(false);
    expect(fs.readFileSync(captureLogPathFor(a), 'utf8')).toContain('a-chat');
    expect(fs.existsSync(path.join(dir, 'settings.json'))).toBe(true);
    expect(fs.existsSync(settingsPathFor(a))).toBe(false);
  }, 120_000);
});
