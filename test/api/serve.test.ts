// `hindsight serve` as an attacker and a careless client would meet it: no token, a foreign
// Host or Origin, a non-loopback address, malformed calls; and the events stream working.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { STATE_TIMEOUT_MS, TEST_TIMEOUT_MS } from '../helpers/deadlines.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
let dir: string;
let server: ServeHandle;

function call(name: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${server.url}api/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-api-'));
  server = await serveApp({ dbPath: path.join(dir, 'test.db'), port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('serve: access control', () => {
  it('refuses API calls and pages without the token (401)', async () => {
    const noAuth = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(noAuth.status).toBe(401);
    expect((await noAuth.json()).error.kind).toBe('unauthorized');
    const wrong = await call('stats', {}, { Authorization: 'Bearer not-the-token' });
    expect(wrong.status).toBe(401);
    const page = await fetch(server.url);
    expect(page.status).toBe(401);
    expect(await page.text()).toMatch(/Open the link that <code>hindsight serve<\/code> printed/);
    const events = await fetch(`${server.url}api/events`);
    expect(events.status).toBe(401);
  });

  it('trades the query token for an HttpOnly SameSite=Strict cookie and strips it from the URL', async () => {
    const bad = await fetch(`${server.url}?token=guess`, { redirect: 'manual' });
    expect(bad.status).toBe(401);
    const first = await fetch(server.loginUrl, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/');
    const cookie = first.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const withCookie = await fetch(`${server.url}api/stats`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Cookie: cookie.split(';')[0]! },
      body: '{}',
    });
    expect(withCookie.status).toBe(200);
  });

  it('refuses a foreign Host header (DNS rebinding) and a cross-site Origin', async () => {
    // fetch() will not let us forge Host, so speak HTTP directly.
    const http = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: server.port, path: '/api/stats', method: 'POST', headers: { Host: 'evil.example:80', Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' } }, (res) => resolve(res.statusCode!));
      req.on('error', reject);
      req.end('{}');
    });
    expect(status).toBe(403);
    const crossOrigin = await call('stats', {}, { Origin: 'https://evil.example' });
    expect(crossOrigin.status).toBe(403);
  });

  it('requires application/json for calls (no cross-site form posts)', async () => {
    const res = await call('stats', '{}', { 'Content-Type': 'text/plain' });
    expect(res.status).toBe(415);
  });

  it('sends a strict CSP on every response', async () => {
    const res = await call('stats', {});
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('refuses to listen on a non-loopback address, from the API and from the CLI', async () => {
    await expect(serveApp({ dbPath: path.join(dir, 'other.db'), host: '0.0.0.0', port: 0, buildRenderer: false })).rejects.toThrow(/loopback only/);
    const cli = spawnSync(process.execPath, [path.join(ROOT, 'bin', 'hindsight.mjs'), 'serve', '--host', '0.0.0.0', '--db', path.join(dir, 'cli.db')], {
      encoding: 'utf8',
      timeout: STATE_TIMEOUT_MS, // only a hang: the process refuses and exits, however slowly it starts
    });
    expect(cli.status).toBe(1);
    expect(cli.stderr).toMatch(/refusing to listen on '0\.0\.0\.0'.*loopback only/);
    expect(fs.existsSync(path.join(dir, 'cli.db'))).toBe(false);
  }, TEST_TIMEOUT_MS);
});

describe('serve: the API contract over HTTP', () => {
  it('answers a malformed call with 400 and names the field', async () => {
    const res = await call('setLabel', { sessionId: 's', responseTurn: 1, patch: { reward: 5 } });
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.ok).toBe(false);
    expect(body.error).toMatchObject({ kind: 'validation', field: 'patch.reward' });
    expect(body.error.message).toMatch(/patch\.reward must be one of 1, -1, 0, got 5/);

    const missing = await (await call('getSession', {})).json();
    expect(missing.error).toMatchObject({ kind: 'validation', field: 'id' });
    expect(missing.error.message).toMatch(/id is required/);

    const unknownField = await (await call('stats', { verbose: true })).json();
    expect(unknownField.error.message).toMatch(/verbose is not a known field/);

    const notJson = await call('stats', '{"oops"');
    expect(notJson.status).toBe(400);
    expect((await notJson.json()).error.message).toMatch(/not valid JSON/);

    const unknown = await call('dropTables', {});
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error.kind).toBe('unknown_call');
  });

  it('answers a user error with 422 and a readable message', async () => {
    const res = await call('getSession', { id: 'no-such-session' });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.error.kind).toBe('user');
    expect(body.error.message).toMatch(/no-such-session/);
  });

  it('imports an upload, removes the temporary file, and names the upload in errors', async () => {
    const sample = fs.readFileSync(path.join(ROOT, 'test', 'fixtures', 'chatgpt-branches.json'));
    // A private temporary folder (the server runs in this process), so other tests' uploads do not interfere.
    const tmp = fs.mkdtempSync(path.join(dir, 'tmp-'));
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const res = await call('importUpload', { fileName: 'conversations.json', dataBase64: sample.toString('base64') });
      expect(res.status).toBe(200);
      expect((await res.json()).value.sessions_added).toBe(1);
      expect(fs.readdirSync(tmp)).toEqual([]);
    } finally {
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
    }

    const before = (await (await call('stats', {})).json()).value;
    const truncated = await call('importUpload', { fileName: 'broken.json', dataBase64: sample.subarray(0, 700).toString('base64') });
    expect(truncated.status).toBe(422);
    const error = (await truncated.json()).error;
    expect(error.message).toContain('broken.json');
    expect(error.message).not.toContain('hindsight-upload-');
    expect((await (await call('stats', {})).json()).value).toEqual(before);
  });

  it('delivers events over SSE', async () => {
    const controller = new AbortController();
    const res = await fetch(`${server.url}api/events`, { headers: { Authorization: `Bearer ${server.token}` }, signal: controller.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // The stream is open (first comment read); now cause an event.
    text += decoder.decode((await reader.read()).value);
    expect(text).toContain(': connected');
    const sessions = (await (await call('listSessions', {})).json()).value.sessions;
    const detail = (await (await call('getSession', { id: sessions[0].id })).json()).value;
    await call('setLabel', { sessionId: detail.id, responseTurn: detail.samples[0].responseTurn, patch: { reward: 1 } });
    while (!text.includes('workspace.changed')) text += decoder.decode((await reader.read()).value);
    const frame = text.split('\n').find((l) => l.startsWith('data: ') && l.includes('workspace.changed'))!;
    expect(JSON.parse(frame.slice(6))).toEqual({ name: 'workspace.changed', payload: { reason: 'label' } });
    controller.abort();
  });
});
