// A judge run that survives long samples (issue 33, item 1): the judge prompt is fitted to the
// judge model's context; a sample that cannot fit is skipped and counted, in the CLI's summary
// and --json; a server's context-length 400 is read, the prompt refitted and retried once; no
// single sample's failure stops the run.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoExportFiles } from '../../src-main/import/demo-data.js';
import { openJudgeBackend } from '../../src-main/judge/backends.js';
import { LlmJudge } from '../../src-main/judge/llm-judge.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { answerReserve, estimateTokens, parseContextOverflow } from '../../src-main/judge/prompt-fit.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { fittedReplayPrompt } from '../../src-main/judge/replay-judge.js';
import type { ChatCompleter } from '../../src-main/judge/llm-judge.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { judgeRunNotes } from '../../src-shared/judge-notes.js';
import type { Role } from '../../src-shared/types.js';
import { runCli } from '../helpers/cli.js';
import { DEMO_MODEL, demoModelWithPositions, ROOT, scriptedServer, tempDir, workspaceWith, type ScriptedServer } from './helpers.js';

const SAMPLES = path.join(ROOT, 'resources', 'samples');
let dir: string;
let demoDb: string;
const servers: ScriptedServer[] = [];

beforeAll(async () => {
  dir = tempDir();
  demoDb = path.join(dir, 'demo.db');
  expect((await runCli('import', ...demoExportFiles(SAMPLES), '--db', demoDb, '--json')).code).toBe(0);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the demo data with the demo model (512 positions) as the local judge', () => {
  it('completes, skipping and counting every sample whose prompt cannot fit, in --json and in the summary line', async () => {
    const db = path.join(dir, 'local-512.db');
    fs.copyFileSync(demoDb, db);
    const json = await runCli('judge', '--backend', 'local', '--model', DEMO_MODEL, '--votes', '1', '--max-tokens', '8', '--db', db, '--json');
    expect(json.code).toBe(0);
    const summary = json.json();
    // The judge's instructions alone take more than 512 tokens on this tiny tokenizer.
    expect(summary.skippedTooLong).toBeGreaterThan(0);
    expect(summary).toMatchObject({ judged: 0, judgeContext: 512, failed: 0, cancelled: false });
    const ws = await Workspace.open(db);
    const total = ws.judgeCandidates().length;
    ws.close();
    expect(summary.skippedTooLong).toBe(total);

    const text = await runCli('judge', '--backend', 'local', '--model', DEMO_MODEL, '--votes', '1', '--max-tokens', '8', '--db', db);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`; ${total} samples too long for the judge's 512-token context; skipped`);
  }, 120_000);

  it('with room for the instructions, short samples are judged and long ones skipped, each prompt and answer within the context', async () => {
    const db = path.join(dir, 'local-1024.db');
    fs.copyFileSync(demoDb, db);
    const ws = await Workspace.open(db);
    const opened = await openJudgeBackend({ backend: 'local', modelDir: demoModelWithPositions(1024), maxTokens: 8 });
    try {
      const summary = await runJudge(ws, opened.judge, { hints: false, votes: 1 });
      expect(summary.judged).toBeGreaterThan(0);
      expect(summary.skippedTooLong).toBeGreaterThan(0);
      expect(summary.judged + summary.skippedTooLong).toBe(ws.judgeCandidates().length);
      expect(summary.judgeContext).toBe(1024);
      // Nothing was cut: no vote carries the left-cut note.
      const raws = ws.listSamples().flatMap((s) => s.label.votes.map((v) => v.raw));
      expect(raws.some((r) => r.startsWith('[judge prompt cut'))).toBe(false);
    } finally {
      await opened.close();
      ws.close();
    }
  }, 120_000);
});

/** A conversation whose one reply is `reply`. */
function chat(id: string, reply: string, next = 'No, I meant something shorter.') {
  const turns: [Role, string][] = [['user', `Question ${id}?`], ['assistant', reply], ['user', next]];
  return { externalId: id, title: id, turns: turns.map(([role, text]) => ({ role, text })), alternatives: [], metadata: {}, warnings: [] };
}

/**
 * A server with a `limit`-token context whose tokenizer counts a token per `charsPerToken`
 * characters: above the limit it answers vLLM's 400.
 */
async function contextServer(limit: number, charsPerToken: number) {
  const server = await scriptedServer((body) => {
    const prompt = body.messages.reduce((n: number, m: { content: string }) => n + Math.ceil(m.content.length / charsPerToken) + 6, 4);
    if (prompt + body.max_tokens > limit) {
      const message = `This model's maximum context length is ${limit} tokens. However, you requested ${prompt + body.max_tokens} tokens (${prompt} in the messages, ${body.max_tokens} in the completion). Please reduce the length of the messages or completion.`;
      return { status: 400, body: { object: 'error', message, type: 'BadRequestError', code: 400 } };
    }
    return { content: '\\boxed{-1}' };
  });
  servers.push(server);
  return server;
}

describe('an OpenAI-compatible judge with a small context', () => {
  it('reads the 400, refits the prompt to the reported limit and retries once; a sample still too long is skipped', async () => {
    // Its tokenizer counts more than the client's estimate (2.5 characters a token).
    const server = await contextServer(1024, 2.5);
    const ws = await workspaceWith([chat('a', 'Short answer.'), chat('b', 'A long answer. '.repeat(80)), chat('c', 'Another short one.')]);
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'small', backoffMs: 1 }));
    const summary = await runJudge(ws, judge, { hints: false, votes: 2 });
    expect(summary).toMatchObject({ judged: 2, skippedTooLong: 1, judgeContext: 1024, failed: 0 });
    expect(judgeRunNotes(summary)).toEqual(["1 sample too long for the judge's 1024-token context; skipped"]);
    // The first sample's 2 votes asked for 512 new tokens and were refused (the context was
    // unknown); from then on every request fits: 2 votes for each short sample, none for the long one.
    expect(server.requests.slice(0, 2).map((r) => r.body.max_tokens)).toEqual([512, 512]);
    expect(server.requests).toHaveLength(6);
    for (const r of server.requests.slice(2)) expect(r.body.max_tokens).toBeGreaterThanOrEqual(answerReserve(1024, 512));
    expect(ws.listSamples().map((s) => s.label.reward)).toEqual([-1, null, -1]);
    ws.close();
  });

  it('with --judge-context given, prompts are fitted up front and the long sample is never sent', async () => {
    // A GPT-like tokenizer (4 characters a token): the estimate (3) counts more, so nothing is refused.
    const server = await contextServer(512, 4);
    const db = path.join(tempDir(), 'ctx.db');
    const ws = await workspaceWith([chat('a', 'Short answer.'), chat('b', 'A long answer. '.repeat(80))], db);
    ws.close();
    const r = await runCli('judge', '--backend', 'openai', '--endpoint', server.baseUrl, '--judge-model', 'small', '--judge-context', '512', '--votes', '1', '--db', db, '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ judged: 1, skippedTooLong: 1, judgeContext: 512 });
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.body.max_tokens).toBe(512 - estimateTokens(server.requests[0]!.body.messages));
  });

  it('one sample refused for another reason is counted and skipped; the run goes on', async () => {
    const server = await scriptedServer((body) =>
      /poison/.test(JSON.stringify(body.messages)) ? { status: 400, body: { error: { message: 'content policy' } } } : { content: '\\boxed{1}' });
    servers.push(server);
    const ws = await workspaceWith([chat('a', 'fine'), chat('b', 'poison'), chat('c', 'fine too')]);
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'm', backoffMs: 1 }));
    const summary = await runJudge(ws, judge, { hints: false, votes: 1 });
    expect(summary).toMatchObject({ judged: 2, failed: 1 });
    expect(summary.failedReason).toMatch(/HTTP 400: content policy/);
    ws.close();
  });
});

describe('the replay judge, whose prompt shows the conversation', () => {
  it('cuts the conversation from the left, oldest turns first, keeping the replies and the reaction whole', () => {
    const completer = { backend: 'openai', model: 'm', complete: async () => '', close: async () => {}, contextTokens: () => 1024, countTokens: estimateTokens } as ChatCompleter;
    const context = Array.from({ length: 12 }, (_, i) => ({ role: i % 2 ? ('assistant' as const) : ('user' as const), content: `turn ${i}: ${'words '.repeat(40)}` }));
    const input = { context, original: 'The original reply.', reaction: { role: 'user' as const, text: 'No, shorter.' }, hint: null, reply: 'The new reply.' };
    const fitted = fittedReplayPrompt(completer, input, 512);
    expect(fitted.droppedTurns).toBeGreaterThan(0);
    expect(fitted.droppedTurns).toBeLessThan(12);
    const user = fitted.messages[1]!.content;
    expect(user).toContain('turn 11:');
    expect(user).not.toContain('turn 0:');
    expect(user).toContain('The original reply.');
    expect(user).toContain('No, shorter.');
    expect(user).toContain('The new reply.');
    expect(estimateTokens(fitted.messages)).toBeLessThanOrEqual(1024 - answerReserve(1024, 512));
    // Without a known context the whole prompt goes as it is.
    expect(fittedReplayPrompt({ ...completer, contextTokens: undefined } as ChatCompleter, input, 512).droppedTurns).toBe(0);
  });
});

describe('reading context-length refusals', () => {
  it.each([
    ["This model's maximum context length is 512 tokens. However, your messages resulted in 700 tokens.", 512, 700], // OpenAI
    ["This model's maximum context length is 512 tokens. However, you requested 900 tokens (600 in the messages, 300 in the completion).", 512, 600], // vLLM
    ["'max_tokens' is too large: 512. This model's maximum context length is 512 tokens and your request has 300 input tokens (512 > 512 - 300).", 512, 300], // vLLM ≥ 0.8
    ['The decoder prompt (length 600) is longer than the maximum model length of 512.', 512, 600], // vLLM
    ['{"error":{"code":400,"message":"request (600 tokens) exceeds the available context size (512 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":600,"n_ctx":512}}', 512, 600], // llama.cpp
    ['{"error":{"message":"input length (600 tokens) exceeds the model\'s context length (512 tokens)"}}', 512, 600], // Ollama-style
  ])('%s', (body, limit, promptTokens) => {
    expect(parseContextOverflow(body)).toEqual({ limit, promptTokens });
  });

  it('other 400s are not read as context refusals', () => {
    expect(parseContextOverflow('{"error":{"message":"content policy"}}')).toBeNull();
    expect(parseContextOverflow('invalid temperature 7')).toBeNull();
  });
});
