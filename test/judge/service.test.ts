// The app's Judge action over `hindsight serve`'s HTTP API: the settings choose the
// backend, judgeRun runs the judge runner, judge.progress events arrive over SSE, and
// cancel({ job: 'judge' }) stops a run midway.
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { closedPort, manyChats, scriptedServer, tempDir, workspaceWith, type ScriptedServer } from './helpers.js';
import { waitUntil } from '../helpers/deadlines.js';

const cleanup: (ServeHandle | ScriptedServer)[] = [];
afterAll(async () => {
  for (const c of cleanup) await c.close();
});

async function appWithSamples(chats: number): Promise<{ app: ServeHandle; call: (name: string, input?: unknown) => Promise<any> }> {
  const dbPath = path.join(tempDir(), 'app.db');
  (await workspaceWith(manyChats(chats), dbPath)).close();
  const app = await serveApp({ dbPath, port: 0, buildRenderer: false });
  cleanup.push(app);
  const call = async (name: string, input: unknown = {}) => {
    const res = await fetch(`http://127.0.0.1:${app.port}/api/${name}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${app.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(input),
    });
    return res.json();
  };
  return { app, call };
}

/** Collects the payloads of one SSE event name until `stop()`. */
function listen(app: ServeHandle, name: string) {
  const seen: any[] = [];
  const abort = new AbortController();
  let markOpen: () => void = () => {};
  /** Resolves once the server has answered the event stream's request: events flow from then on. */
  const open = new Promise<void>((resolve) => (markOpen = resolve));
  const done = fetch(`http://127.0.0.1:${app.port}/api/events`, { headers: { Authorization: `Bearer ${app.token}` }, signal: abort.signal })
    .then(async (res) => {
      markOpen();
      const decoder = new TextDecoder();
      let buffer = '';
      const reader = res.body!.getReader();
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        buffer += decoder.decode(r.value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith('data: ')) {
            const event = JSON.parse(block.slice(6));
            if (event.name === name) seen.push(event.payload);
          }
        }
      }
    })
    .catch(() => {});
  return { seen, open, stop: () => (abort.abort(), done) };
}

describe('the app’s Judge action', () => {
  it('runs the OpenAI-compatible judge chosen in Settings, with progress events', async () => {
    const judgeServer = await scriptedServer(() => ({ content: '\\boxed{-1}' }));
    cleanup.push(judgeServer);
    const { app, call } = await appWithSamples(3);
    const before = await call('appInfo');
    expect(before.value.judges.openai).toMatchObject({ available: false });
    await call('updateSettings', { judgeBackend: 'openai', openaiBaseUrl: judgeServer.baseUrl, openaiModel: 'judge-x', openaiApiKey: 'k' });
    expect((await call('appInfo')).value.judges.openai).toEqual({ available: true, reason: null });
    const events = listen(app, 'judge.progress');
    await events.open;
    const result = await call('judgeRun', { backend: 'openai', hints: false, votes: 1 });
    expect(result).toMatchObject({ ok: true, value: { judged: 6, cancelled: false, model: 'judge-x' } });
    expect(judgeServer.requests[0]!.headers.authorization).toBe('Bearer k');
    const samples = (await call('getSession', { id: 'openai:chat-000' })).value.samples;
    expect(samples.map((s: any) => [s.label.reward, s.label.source])).toEqual([
      [-1, 'judge:judge-x'],
      [-1, 'judge:judge-x'],
    ]);
    await waitUntil('the last judge.progress event', () => events.seen.at(-1)?.done === 6);
    await events.stop();
    expect(events.seen.at(-1)).toEqual({ done: 6, total: 6 });
  });

  it('the judge context in Settings: prompts are fitted to it, and what could not fit is skipped and counted', async () => {
    const judgeServer = await scriptedServer(() => ({ content: '\\boxed{1}' }));
    cleanup.push(judgeServer);
    const { call } = await appWithSamples(1);
    const settings = await call('updateSettings', { judgeBackend: 'openai', openaiBaseUrl: judgeServer.baseUrl, openaiModel: 'judge-x', openaiContextTokens: 256 });
    expect(settings.value.judge.openaiContextTokens).toBe(256);
    // 256 tokens cannot hold the reward judge's instructions: nothing is sent, both samples are counted.
    const result = await call('judgeRun', { backend: 'openai', hints: false, votes: 1 });
    expect(result).toMatchObject({ ok: true, value: { judged: 0, skippedTooLong: 2, judgeContext: 256 } });
    expect(judgeServer.requests).toHaveLength(0);
    expect(await call('updateSettings', { openaiContextTokens: -1 })).toMatchObject({ ok: false });
  });

  it('cancel stops a judge run; an endpoint that is down is a user error naming it', async () => {
    const slow = await scriptedServer(() => ({ content: '\\boxed{1}', delayMs: 200 }));
    cleanup.push(slow);
    const { app, call } = await appWithSamples(5);
    await call('updateSettings', { openaiBaseUrl: slow.baseUrl, openaiModel: 'judge-x' });
    const events = listen(app, 'judge.progress');
    await events.open;
    const run = call('judgeRun', { backend: 'openai', hints: false, votes: 1 });
    await waitUntil('a first sample judged', () => events.seen.some((e) => e.done >= 1));
    await events.stop();
    expect(await call('judgeRun', { backend: 'openai', hints: false, votes: 1 })).toMatchObject({ ok: false, error: { kind: 'user', message: expect.stringMatching(/already under way/) } });
    expect(await call('cancel', { job: 'judge' })).toEqual({ ok: true, value: { cancelled: true } });
    const summary = (await run).value;
    expect(summary.cancelled).toBe(true);
    expect(summary.judged).toBeGreaterThan(0);
    expect(summary.judged).toBeLessThan(10);
    expect(await call('cancel', { job: 'judge' })).toEqual({ ok: true, value: { cancelled: false } });

    const port = await closedPort();
    await call('updateSettings', { openaiBaseUrl: `http://127.0.0.1:${port}/v1` });
    const down = await call('judgeRun', { backend: 'openai', hints: false, votes: 1 });
    expect(down).toMatchObject({ ok: false, error: { kind: 'user', message: expect.stringContaining(`http://127.0.0.1:${port}/v1/chat/completions failed after 4 attempt(s): cannot reach it: connection refused`) } });
  });

  it('runs the local judge on the demo model (the default judge model)', async () => {
    const { call } = await appWithSamples(1);
    expect((await call('appInfo')).value.judges.local).toEqual({ available: true, reason: null });
    const result = await call('judgeRun', { backend: 'local', hints: false, votes: 1 });
    // Its 512 positions cannot hold the judge's instructions: both samples are skipped and counted.
    expect(result).toMatchObject({ ok: true, value: { judged: 0, skippedTooLong: 2, judgeContext: 512, backend: 'local', model: 'stories260K' } });
  });
});
