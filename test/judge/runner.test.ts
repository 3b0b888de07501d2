// The judge runner: incremental, never touching manual labels, resumable after a kill,
// cancellable, and the local-model backend. The LLM answers come from a scripted
// OpenAI-compatible server over real HTTP, so the test chooses the verdicts.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { openJudgeBackend } from '../../src-main/judge/backends.js';
import { LlmJudge } from '../../src-main/judge/llm-judge.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { decide, runJudge, type JudgeTarget } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import { demoModelWithPositions, manyChats, ROOT, scriptedServer, sortingWorkspace, tempDir, workspaceWith, type ScriptedServer } from './helpers.js';

const servers: ScriptedServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

/** A judge whose every vote answers `answer(body)`, over HTTP. */
async function judgeAnswering(answer: (body: any) => string, model = 'judge-a', delayMs = 0) {
  const server = await scriptedServer((body) => ({ content: answer(body), delayMs }));
  servers.push(server);
  return { server, judge: new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model, backoffMs: 10 }), { maxTokens: 32 }) };
}

/** -1 when the next state in the prompt is a correction, else +1 (a plausible judge). */
const sensible = (body: any) => (/No, I said/.test(body.messages[1].content) ? 'The user corrects it. \\boxed{-1}' : '\\boxed{1}');

describe('judge runner', () => {
  it('labels every sample with provenance; re-runs skip what is current; manual labels are never touched', async () => {
    const ws = await sortingWorkspace();
    ws.setLabel('openai:sort', 6, { reward: -1, hint: 'My own hint for this one.' });
    const { judge, server } = await judgeAnswering(sensible);
    const first = await runJudge(ws, judge, { hints: false, votes: 3 });
    expect(first).toMatchObject({ judged: 2, rewards: { good: 1, bad: 1, neutral: 0 }, skippedManual: 1, skippedUnchanged: 0, cancelled: false, promptVersion: 'reward-v1', model: 'judge-a' });
    expect(ws.listSamples().map((s) => [s.label.reward, s.label.source])).toEqual([
      [-1, 'judge:judge-a'],
      [1, 'judge:judge-a'],
      [-1, 'manual'],
    ]);
    expect(ws.listSamples()[2]!.label.hint).toBe('My own hint for this one.');
    expect(server.requests).toHaveLength(6);

    const again = await runJudge(ws, judge, { hints: false, votes: 3 });
    expect(again).toMatchObject({ judged: 0, rewards: { good: 0, bad: 0, neutral: 0 }, skippedManual: 1, skippedUnchanged: 2 });
    expect(server.requests).toHaveLength(6); // nothing was asked

    const forced = await runJudge(ws, judge, { hints: false, votes: 3, force: true });
    expect(forced).toMatchObject({ judged: 2, skippedManual: 1 });
    ws.close();
  });

  it('re-judges labels from an older prompt version, another model or the heuristic; hints-labels count for a run without hints', async () => {
    const ws = await sortingWorkspace();
    await runJudge(ws, new HeuristicJudge(), { hints: true });
    const { judge } = await judgeAnswering(sensible);
    expect(await runJudge(ws, judge, { hints: false })).toMatchObject({ judged: 3 }); // an LLM judge outranks the heuristic
    expect(await runJudge(ws, new HeuristicJudge(), { hints: true })).toMatchObject({ judged: 0, skippedHigher: 3 });

    ws.storage.run("UPDATE labels SET prompt_version = 'reward-v0' WHERE response_turn = 2");
    expect(await runJudge(ws, judge, { hints: false })).toMatchObject({ judged: 1, skippedUnchanged: 2 });

    const { judge: other } = await judgeAnswering(sensible, 'judge-b');
    expect(await runJudge(ws, other, { hints: true })).toMatchObject({ judged: 3 });
    expect(await runJudge(ws, other, { hints: false })).toMatchObject({ judged: 0, skippedUnchanged: 3 });
    expect(await runJudge(ws, other, { hints: true })).toMatchObject({ judged: 0, skippedUnchanged: 3 });
    ws.close();
  });

  it('decides per label exactly as documented', () => {
    const llm = { provenance: { backend: 'openai', model: 'm', promptVersion: 'reward-v1' }, labelSource: 'judge:m', judge: async () => ({}) } as never;
    const label = (source: string | null, promptVersion: string | null, model: string | null = 'm') => ({ source: source as never, judgeBackend: source ? 'openai' : null, judgeModel: model, promptVersion });
    expect(decide(label(null, null), llm, 'reward-v1', false, false)).toBe('judge');
    expect(decide(label('manual', null), llm, 'reward-v1', false, true)).toBe('manual');
    expect(decide(label('judge:m', 'reward-v1'), llm, 'reward-v1', false, false)).toBe('unchanged');
    expect(decide(label('judge:m', 'reward-v1'), llm, 'reward-v1', false, true)).toBe('judge');
    expect(decide(label('judge:m', 'reward-v1+hint-v1'), llm, 'reward-v1', false, false)).toBe('unchanged');
    expect(decide(label('judge:m', 'reward-v1'), llm, 'reward-v1+hint-v1', true, false)).toBe('judge');
    expect(decide(label('judge:m', 'reward-v0'), llm, 'reward-v1', false, false)).toBe('judge');
    expect(decide(label('judge:other', 'reward-v1', 'other'), llm, 'reward-v1', false, false)).toBe('judge');
  });

  it('stores the hint judge’s votes beside the reward votes, and the chosen hint', async () => {
    const ws = await sortingWorkspace();
    const { judge } = await judgeAnswering((body) => {
      const hintJudge = String(body.messages[0].content).includes('[HINT_START]');
      if (!hintJudge) return sensible(body);
      return /No, I said/.test(body.messages[1].content) ? '\\boxed{1}\n[HINT_START]Write it in Python, as the user asked.[HINT_END]' : '\\boxed{-1}';
    });
    await runJudge(ws, judge, { hints: true, votes: 3 });
    const [corrected, thanked] = ws.listSamples();
    expect(corrected!.label).toMatchObject({ reward: -1, hint: 'Write it in Python, as the user asked.' });
    expect(corrected!.label.votes.every((v) => v.hintAnswer === 1 && v.hintRaw?.includes('[HINT_END]'))).toBe(true);
    expect(thanked!.label).toMatchObject({ reward: 1, hint: null });
    ws.close();
  });

  it('a backend that is down stops the run with its error and keeps what was judged', async () => {
    const ws = await sortingWorkspace();
    const server = await scriptedServer((_, n) => (n < 1 ? { content: '\\boxed{1}' } : { status: 503, body: { error: { message: 'overloaded' } } }));
    servers.push(server);
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'm', retries: 0 }));
    await expect(runJudge(ws, judge, { hints: false, votes: 1 })).rejects.toThrow(/failed after 1 attempt\(s\): HTTP 503: overloaded/);
    expect(ws.listSamples().map((s) => s.label.reward)).toEqual([1, null, null]);
    ws.close();
  });

  it('runs samples concurrently when asked', async () => {
    const ws = await workspaceWith(manyChats(4));
    const { judge, server } = await judgeAnswering(() => '\\boxed{1}', 'judge-a', 50);
    const progress: number[] = [];
    const summary = await runJudge(ws, judge, { hints: false, votes: 1, concurrency: 4, onProgress: (p) => progress.push(p.done) });
    expect(summary.judged).toBe(8);
    expect(server.maxInFlight).toBe(4);
    expect([...new Set(progress)]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]); // a batch stored reports again, at the same count
    ws.close();
  });
});

describe('storing verdicts', () => {
  it('in batches, one transaction each: the heuristic over 600 samples in 3; a slow judge’s each within 200 ms, not at the end', async () => {
    const ws = await workspaceWith(manyChats(300)); // 600 samples
    let transactions = 0;
    const target: JudgeTarget = {
      judgeCandidates: () => ws.judgeCandidates(),
      recordJudgeVerdicts: (verdicts, provenance) => (transactions++, ws.recordJudgeVerdicts(verdicts, provenance)),
      flush: () => ws.flush(),
    };
    expect(await runJudge(target, new HeuristicJudge(), { hints: false })).toMatchObject({ judged: 600 });
    expect(transactions).toBe(3);
    expect(ws.listSamples().filter((s) => s.label.source === 'heuristic')).toHaveLength(600);
    ws.close();

    const slow = await workspaceWith(manyChats(2)); // 4 samples, 300 ms each
    const { judge } = await judgeAnswering(() => '\\boxed{1}', 'judge-a', 300);
    const judged: number[] = [];
    expect(await runJudge(slow, judge, { hints: false, votes: 1, onProgress: (p) => judged.push(p.judged) })).toMatchObject({ judged: 4 });
    expect(judged.at(-1)).toBe(4);
    expect(judged.slice(0, -1)).toContain(3); // the third was stored before the fourth came
    slow.close();
  });
});

describe('hindsight judge (CLI, a real process) is resumable after a kill', () => {
  it('SIGKILL mid-run keeps the saved verdicts; the next run judges only the rest', async () => {
    const dbPath = path.join(tempDir(), 'resume.db');
    const ws = await workspaceWith(manyChats(10), dbPath); // 20 samples
    ws.close();
    let served = 0;
    const server = await scriptedServer(() => ({ content: '\\boxed{1}', delayMs: 150 }));
    servers.push(server);
    const args = [path.join(ROOT, 'bin/hindsight.mjs'), 'judge', '--backend', 'openai', '--endpoint', server.baseUrl, '--judge-model', 'm', '--votes', '1', '--concurrency', '1', '--db', dbPath, '--json'];
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'ignore' });
    // ~3 s of judging: the store saves at most ~2 s after a change, so some verdicts are on disk.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        served = server.requests.length;
        if (served >= 17) {
          clearInterval(timer);
          resolve();
        }
      }, 20);
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    const after = await Workspace.open(dbPath);
    const saved = after.listSamples().filter((s) => s.label.source === 'judge:m').length;
    after.close();
    expect(saved).toBeGreaterThan(0);
    expect(saved).toBeLessThan(20);

    const rerun = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    rerun.stdout.on('data', (c) => (out += c));
    const code = await new Promise((resolve) => rerun.once('exit', resolve));
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ judged: 20 - saved, skippedUnchanged: saved, cancelled: false });
  }, 30_000);
});

describe('local backend (the demo model, in its worker)', () => {
  it('judges through the model’s chat template; garbage votes give 0 with the votes stored', async () => {
    const ws = await sortingWorkspace();
    // Room for the judge's instructions (its real 512 positions are too few: ./judge-context.test.ts).
    const opened = await openJudgeBackend({ backend: 'local', modelDir: demoModelWithPositions(2048), maxTokens: 8 });
    try {
      const summary = await runJudge(ws, opened.judge, { hints: false, votes: 2 });
      expect(summary).toMatchObject({ judged: 3, backend: 'local', model: 'stories260K' });
      for (const s of ws.listSamples()) {
        expect(s.label).toMatchObject({ reward: 0, source: 'judge:stories260K' });
        expect(s.label.votes).toHaveLength(2);
        expect(s.label.votes[0]!.raw).not.toBe(s.label.votes[1]!.raw); // different seeds, different samples
      }
      // Seeded: the same sample judged again gives the same raw votes.
      const [first] = ws.judgeCandidates();
      const again = await opened.judge.judge(first!.input, { hints: false, votes: 2 });
      expect(again.votes.map((v) => v.raw)).toEqual(ws.listSamples()[0]!.label.votes.map((v) => v.raw));
    } finally {
      await opened.close();
      ws.close();
    }
  });

  it('a folder that is not a model is a clear error', async () => {
    await expect(openJudgeBackend({ backend: 'local', modelDir: tempDir() })).rejects.toThrow(/not a model folder \(no config\.json\)/);
  });
});
