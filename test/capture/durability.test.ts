// Durability of live capture: a real `hindsight serve --capture` child process is killed
// with SIGKILL while requests are in flight; after a restart (log replay) every exchange the
// clients had received is in the database, and a second replay changes nothing. Also the
// capture log itself (torn last line, compaction), and the 503 + Retry-After of a model that
// is still loading.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { CaptureLog } from '../../src-main/capture/capture-log.js';
import type { CaptureRecord } from '../../src-main/capture/capture-records.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { chat, DEMO_MODEL, ROOT, startCapture, tempDir, TEST_TIMEOUT_MS, waitFor, type Message } from './helpers.js';

const children: ChildProcess[] = [];
const exited = (c: ChildProcess) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r)));
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Starts `hindsight serve --capture` on dbPath; resolves with its base URL and token once it listens. */
async function serveChild(dbPath: string): Promise<{ child: ChildProcess; url: string; token: string }> {
  const child = spawn(process.execPath, ['bin/hindsight.mjs', 'serve', '--db', dbPath, '--port', '0', '--json', '--capture', '--model', DEMO_MODEL, '--api-only'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${stderr}`)));
  });
  const info = JSON.parse(line) as { url: string; loginUrl: string };
  return { child, url: info.url, token: new URL(info.loginUrl).searchParams.get('token')! };
}

async function getSession(url: string, token: string, id: string) {
  const res = await fetch(`${url}api/getSession`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify({ id }),
  });
  return (await res.json()) as { ok: boolean; value: { turns: { role: string; text: string }[]; samples: unknown[] } };
}

describe('a SIGKILL during capture', () => {
  it('loses nothing a client had received: restart, replay, compare', async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, 'test.db');
    const first = await serveChild(dbPath);
    const base = `${first.url}v1`;
    // Two clients, each a growing conversation; each acknowledged reply is remembered.
    const acknowledged = new Map<string, Message[]>();
    let killed = false;
    const client = async (id: string) => {
      let messages: Message[] = [{ role: 'user', content: `Story ${id}, part 0.` }];
      for (let i = 1; !killed; i++) {
        try {
          const r = await chat(base, first.token, messages, { headers: { 'X-Session-Id': id }, body: { max_tokens: 8 } });
          if (r.status !== 200) throw new Error(`status ${r.status}`);
          messages = [...messages, { role: 'assistant', content: r.content }];
          acknowledged.set(id, messages);
          messages = [...messages, { role: 'user', content: `Go on with part ${i}.` }];
        } catch (err) {
          if (!killed) throw err;
        }
      }
    };
    const running = [client('a'), client('b')];
    await waitFor('three acknowledged replies in each conversation', () => (acknowledged.get('a')?.length ?? 0) >= 6 && (acknowledged.get('b')?.length ?? 0) >= 6);
    killed = true;
    first.child.kill('SIGKILL'); // mid-request: both clients are always waiting on one
    await Promise.all(running);
    await exited(first.child);

    const second = await serveChild(dbPath);
    const replayed = new Map<string, { role: string; text: string }[]>();
    for (const [id, messages] of acknowledged) {
      const got = await getSession(second.url, second.token, `capture:${id}`);
      expect(got.ok).toBe(true);
      // Every acknowledged turn is there, in order; at most the one request in flight follows.
      expect(got.value.turns.slice(0, messages.length).map((t) => [t.role, t.text])).toEqual(messages.map((m) => [m.role, m.content]));
      expect(got.value.turns.length - messages.length).toBeLessThanOrEqual(2);
      replayed.set(id, got.value.turns);
    }
    second.child.kill('SIGTERM');
    await exited(second.child);

    // Replaying again (a third start) is idempotent.
    const third = await serveChild(dbPath);
    for (const [id, turns] of replayed) expect((await getSession(third.url, third.token, `capture:${id}`)).value.turns).toEqual(turns);
  }, TEST_TIMEOUT_MS);
});

describe('the capture log', () => {
  const request = (id: string, session: string): CaptureRecord => ({ v: 1, t: 'request', id, session, seq: 0, kind: 'main', at: 1, messages: [{ role: 'user', content: id }] });

  it('skips a torn last line and appends after it on a fresh line', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    log.append(request('r1', 'capture:a'));
    log.close();
    fs.appendFileSync(file, '{"v":1,"t":"request","id":"r2","sess'); // a crash mid-write
    const reopened = CaptureLog.open(file);
    expect(reopened.read().records.map((r) => (r as { id: string }).id)).toEqual(['r1']);
    expect(reopened.read().skipped).toEqual([expect.stringMatching(/capture-log\.jsonl:2: /)]);
    reopened.append(request('r3', 'capture:b'));
    expect(reopened.read().records.map((r) => (r as { id: string }).id)).toEqual(['r1', 'r3']);
    reopened.close();
  });

  it('compaction rewrites the file without the removed records', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    for (const [id, s] of [['r1', 'capture:a'], ['r2', 'capture:b'], ['r3', 'capture:a']] as const) log.append(request(id, s));
    expect(log.compact((r) => (r as { session: string }).session !== 'capture:a')).toEqual({ removed: 2 });
    log.append(request('r4', 'capture:c'));
    expect(fs.readFileSync(file, 'utf8')).not.toContain('"capture:a"');
    expect(log.read().records.map((r) => (r as { id: string }).id)).toEqual(['r2', 'r4']);
    log.close();
  });
});

describe('a model that is still loading', () => {
  it('answers 503 with Retry-After instead of waiting past the limit, then serves', async () => {
    const server = await startCapture({ loadWaitMs: 1 });
    try {
      const res = await chat(`${server.url}v1`, server.token, [{ role: 'user', content: 'Hello.' }]);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.body.error).toMatchObject({ code: 'model_loading', message: expect.stringMatching(/still loading; retry in 1 s/) });
      // Retry, as a client told to would, until the model has loaded (however long that takes on this machine).
      const ok = await waitFor('a 200 once the model has loaded', async () => {
        const again = await chat(`${server.url}v1`, server.token, [{ role: 'user', content: 'Hello.' }]);
        if (again.status !== 200) expect(again.status).toBe(503);
        return again.status === 200 ? again : null;
      });
      expect(ok.body.choices[0].message.role).toBe('assistant');
    } finally {
      await server.close();
    }
  }, TEST_TIMEOUT_MS);
});

describe('the queue after a restart', () => {
  it('judges the samples captured before the restart once the loop is on, with no new request', async () => {
    const first = await startCapture();
    const opener = [{ role: 'user', content: 'Tell me about a cow.' }];
    const r = await chat(`${first.url}v1`, first.token, opener, { headers: { 'X-Session-Id': 'cow' } });
    await chat(`${first.url}v1`, first.token, [...opener, { role: 'assistant', content: r.content }, { role: 'user', content: 'Perfect, thanks!' }], {
      headers: { 'X-Session-Id': 'cow' },
    });
    expect(first.capture.status().pendingJudge).toBe(1);
    await first.close();
    const again = await startCapture({}, { captureAutoJudge: true, judgeBackend: 'heuristic', judgeHints: false }, first.dir);
    try {
      const ws = again.service.currentWorkspace as Workspace;
      const label = await waitFor('the resumed judge', () => ws.listSamples('capture:cow')[0]?.label.source);
      expect(label).toBe('heuristic');
      expect(ws.listSamples('capture:cow')[0]!.label.reward).toBe(1);
      expect(again.capture.status().pendingJudge).toBe(0);
    } finally {
      await again.close();
    }
  }, TEST_TIMEOUT_MS);
});
