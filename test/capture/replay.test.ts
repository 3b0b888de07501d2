// `hindsight handoff --to openclaw-rl` (docs/design.md §Hand-off) against Hindsight's own
// `serve --capture`, which speaks the same headers as OpenClaw-RL's server: recorded sessions
// are replayed turn by turn, the server's replies become the history, the user's real
// follow-ups arrive as next states, side turns stay side, and an interrupted replay resumes
// without sending any turn twice (a turn in flight at a kill is never resent). Held-out
// sessions are skipped, and counted, unless --include-heldout.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openclawHandoff, PROGRESS_FILE } from '../../src-main/openai/openclaw-handoff.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { SESSION_001, SESSION_002, SESSION_003, SORTING, conv, fakeExport, tempDir } from '../store/helpers.js';
import { api, startCapture } from './helpers.js';

const META = [
  ['user', 'Tell me a story about a fox.'],
  ['assistant', 'A fox lived in the woods.'],
  ['user', '[METADATA] give this chat a title'],
  ['assistant', 'Fox story'],
  ['user', 'Make it shorter please.'],
  ['assistant', 'A fox. The end.'],
] as const;
const KILLED = [['user', 'This one was in flight when the replay was killed.'], ['assistant', 'ok']] as const;

let server: Awaited<ReturnType<typeof startCapture>>;
let dir: string;
let dbPath: string;
let out: string;
const captured = () => server.service.currentWorkspace as Workspace;

beforeAll(async () => {
  dir = tempDir('hindsight-replay-');
  dbPath = path.join(dir, 'recorded.db');
  const ws = await Workspace.open(dbPath);
  await ws.importExport(
    fakeExport('x.jsonl', [
      conv('sort', SORTING, { createdAt: 10 }),
      conv('rec', SESSION_002, { createdAt: 20 }),
      conv('meta', META.map(([r, t]) => [r, t]), { createdAt: 30 }),
      conv('killed', KILLED.map(([r, t]) => [r, t]), { createdAt: 40 }),
    ]),
  );
  // This test is about the replay itself: every session is one the cluster may train on
  // (held-out sessions are the next describe's).
  ws.setHeldOut(['openai:sort', 'openai:rec', 'openai:meta', 'openai:killed'], false);
  ws.close();
  server = await startCapture();
  out = path.join(dir, 'handoff');
}, 60_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the replay plan', () => {
  it('one request per recorded reply, side when it adds only side turns, the trailing next state last', async () => {
    const ws = await Workspace.open(dbPath);
    const plans = ws.replayPlan({ includeHeldOut: true }).sessions;
    ws.close();
    const sort = plans.find((p) => p.sessionId === 'openai:sort')!;
    expect(sort.requests.map((r) => [r.turnType, r.messages.map((m) => m.role), r.replyTurn, r.last])).toEqual([
      ['main', ['system', 'user'], 2, false],
      ['main', ['user'], 4, false],
      ['main', ['user'], 6, false],
      ['main', ['user'], null, true],
    ]);
    const meta = plans.find((p) => p.sessionId === 'openai:meta')!;
    expect(meta.requests.map((r) => r.turnType)).toEqual(['main', 'side', 'main']);
  });
});

describe('replaying into serve --capture', () => {
  it('resumes after an interruption without sending a turn twice, and never resends a turn in flight at a kill', async () => {
    const endpoint = `${server.url}v1`;
    fs.mkdirSync(out, { recursive: true });
    // A previous run was killed while the 'killed' session's first turn was in flight.
    fs.writeFileSync(path.join(out, PROGRESS_FILE), JSON.stringify({ t: 'sent', session: 'openai:killed', index: 0 }) + '\n');

    const controller = new AbortController();
    const ws = await Workspace.open(dbPath);
    const first = await openclawHandoff(
      ws,
      { endpoint, apiKey: server.token, outDir: out, concurrency: 1, paceMs: 5, maxTokens: 8, method: 'combine', baseModel: 'Qwen/Qwen3-14B', judgeUrl: 'http://prm:8000/v1' },
      { signal: controller.signal, onProgress: (c) => c.sent >= 2 && controller.abort() },
    );
    ws.close();
    expect(first.summary).toMatchObject({ stopped: true, sent: 2, total: 11, abandoned: 1, failures: [] });
    expect(captured().captureExchanges().length).toBe(2);

    const second = await runCli('handoff', '--db', dbPath, '--to', 'openclaw-rl', '--endpoint', endpoint, `--api-key=${server.token}`, '--out', out, '--concurrency', '2', '--max-tokens', '8', '--json');
    expect(second.code, second.stderr).toBe(0);
    expect(second.json()).toMatchObject({ sent: 10, total: 11, sessionsDone: 3, sessions: 4, abandoned: 1, stopped: false });
    expect(second.stderr).toMatch(/10\/11 turns · 3\/4 sessions · 1 abandoned/);

    const bySession = new Map<string, { kind: string }[]>();
    for (const x of captured().captureExchanges()) bySession.set(x.sessionId, [...(bySession.get(x.sessionId) ?? []), x]);
    // Every planned request arrived exactly once; the killed session's turn was not resent.
    expect(Object.fromEntries([...bySession].map(([k, v]) => [k, v.length]))).toEqual({ 'capture:openai:sort': 4, 'capture:openai:rec': 3, 'capture:openai:meta': 3 });
    expect(bySession.get('capture:openai:meta')!.map((x) => x.kind)).toEqual(['main', 'side', 'main']);

    // Next states linked: each of the server's replies has the user's real follow-up as its next state.
    const sort = await api(server, 'getSession', { id: 'capture:openai:sort' });
    const users = (turns: { role: string; text: string }[]) => turns.filter((t) => t.role === 'user').map((t) => t.text);
    const recorded = SORTING as [string, string][];
    expect(users(sort.turns)).toEqual(recorded.filter((t) => t[0] === 'user').map((t) => t[1]));
    expect(sort.samples.map((s: { feedback: string }) => s.feedback)).toEqual([recorded[3]![1], recorded[5]![1], recorded[7]![1]]);
    expect(sort.turns.filter((t: { role: string }) => t.role === 'assistant').map((t: { text: string }) => t.text)).not.toContain(recorded[2]![1]); // on-policy replies
    // The side turn stayed out of the conversation.
    const meta = await api(server, 'getSession', { id: 'capture:openai:meta' });
    expect(users(meta.turns)).toEqual(['Tell me a story about a fox.', 'Make it shorter please.']);
    expect(meta.samples[0].feedback).toBe('Make it shorter please.');

    // The launch settings and the record of what was sent.
    const env = fs.readFileSync(path.join(out, 'openclaw.env'), 'utf8');
    expect(env).toMatch(/^MODEL_PATH=Qwen\/Qwen3-14B$/m);
    expect(env).toMatch(/^TRAIN_METHOD=combine$/m);
    expect(env).toMatch(/^PRM_URL=http:\/\/prm:8000\/v1$/m);
    expect(fs.readFileSync(path.join(out, 'sent.openclaw.jsonl'), 'utf8').split('\n').filter(Boolean).length).toBeGreaterThan(0);

    // A third run has nothing left to send.
    const third = await runCli('handoff', '--db', dbPath, '--to', 'openclaw-rl', '--endpoint', endpoint, `--api-key=${server.token}`, '--out', out, '--json');
    expect(third.json()).toMatchObject({ sent: 10, sessionsDone: 3 });
    expect(captured().captureExchanges().length).toBe(10);
  }, 120_000);

  it('a server error ends that session, named, and exit status 1', async () => {
    const r = await runCli('handoff', '--db', dbPath, '--to', 'openclaw-rl', '--endpoint', `${server.url}v1`, '--api-key', 'wrong', '--out', path.join(dir, 'other'));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/session openai:sort, request 0: HTTP 401/);
  });
});

describe('held-out sessions', () => {
  it('are not replayed unless --include-heldout, and the run says how many it skipped', async () => {
    const db = path.join(dir, 'split.db');
    const ws = await Workspace.open(db);
    await ws.importExport(fakeExport('y.jsonl', [conv('trained', SESSION_001, { createdAt: 10 }), conv('held', SESSION_003, { createdAt: 20 })]));
    ws.setHeldOut(['openai:trained'], false);
    const heldSamples = ws.setHeldOut(['openai:held'], true).heldOut.samples;
    ws.close();
    const endpoint = `${server.url}v1`;
    const replayed = (id: string) => captured().captureExchanges().filter((x) => x.sessionId.startsWith(`capture:${id}`)).length;

    const skipping = path.join(dir, 'skip');
    const r = await runCli('handoff', '--db', db, '--to', 'openclaw-rl', '--endpoint', endpoint, `--api-key=${server.token}`, '--out', skipping, '--max-tokens', '4', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`left 1 held-out session (${heldSamples} sample${heldSamples === 1 ? '' : 's'}) out of the replay; --include-heldout trains on them`);
    expect(r.json()).toMatchObject({ sessions: 1, sessionsDone: 1, heldOut: { sessions: 1, samples: heldSamples, included: false } });
    expect(replayed('openai:trained')).toBeGreaterThan(0);
    expect(replayed('openai:held')).toBe(0);
    const sent = fs.readFileSync(path.join(skipping, 'sent.openclaw.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).session_id);
    expect(new Set(sent)).toEqual(new Set(['openai:trained']));
    expect(fs.readFileSync(path.join(skipping, 'openclaw.env'), 'utf8')).toMatch(/^REPLAY_SESSIONS=1$/m);

    const including = path.join(dir, 'include');
    const all = await runCli('handoff', '--db', db, '--to', 'openclaw-rl', '--endpoint', endpoint, `--api-key=${server.token}`, '--out', including, '--max-tokens', '4', '--include-heldout', '--json');
    expect(all.code, all.stderr).toBe(0);
    expect(all.stderr).toContain(`included 1 held-out session (${heldSamples} sample${heldSamples === 1 ? '' : 's'}) in the training data (--include-heldout)`);
    expect(all.json()).toMatchObject({ sessions: 2, sessionsDone: 2, heldOut: { sessions: 1, included: true } });
    expect(replayed('openai:held')).toBeGreaterThan(0);
    expect(fs.readFileSync(path.join(including, 'README.md'), 'utf8')).toContain('--include-heldout');
  });
});
