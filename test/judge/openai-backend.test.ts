// The `openai` judge backend over real HTTP on 127.0.0.1 — no mocked transport:
// - scripted servers (real HTTP servers whose answers the test picks) for the vote rules,
//   retries, garbage, timeouts, refused connections and cancelling;
// - Hindsight's own OpenAI-compatible endpoint serving the demo model, whose tiny model
//   answers garbage that must be dropped without crashing anything.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../src-shared/types.js';
import { LlmJudge, JUDGE_TEMPERATURE } from '../../src-main/judge/llm-judge.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { CUT_OFF_NOTE, parseRewardAnswer } from '../../src-main/judge/parse.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { startOpenAiServer, type OpenAiServer } from '../../src-main/openai/server.js';
import { closedPort, DEMO_MODEL, demoModelWithPositions, scriptedServer, sortingWorkspace, type ScriptedServer } from './helpers.js';

const sample = {
  sessionId: 'openai:sort',
  responseTurn: 2,
  context: [{ role: 'user' as const, content: 'Write me a function to sort a list in Python.' }],
  response: 'function sortList(list) {}',
  responseMessage: { role: 'assistant' as const, content: 'function sortList(list) {}' },
  nextState: { role: 'user' as const, text: 'No, I said Python not JavaScript.' },
};

const servers: ScriptedServer[] = [];
async function scripted(...args: Parameters<typeof scriptedServer>) {
  const s = await scriptedServer(...args);
  servers.push(s);
  return s;
}
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

const judgeOn = (server: ScriptedServer, extra: Partial<ConstructorParameters<typeof OpenAiClient>[0]> = {}) =>
  new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'judge-model', apiKey: 'k3y', backoffMs: 10, ...extra }), { maxTokens: 64 });

describe('openai backend: votes over HTTP (scripted server)', () => {
  it('sends the judge request and parses each vote; a tie gives 0 and all raw votes are kept', async () => {
    const answers = ['\\boxed{1}', '<think>maybe \\boxed{1}</think>The user corrected it. \\boxed{-1}', 'I like turtles.'];
    const server = await scripted((_, n) => ({ content: answers[n] }));
    const verdict = await judgeOn(server, { concurrency: 1 }).judge(sample, { hints: false, votes: 3 });
    expect(verdict.votes.map((v) => v.reward)).toEqual([1, -1, undefined]);
    expect(verdict.votes.map((v) => v.raw)).toEqual(answers);
    expect(verdict.reward).toBe(0); // one +1, one -1, one dropped: a tie
    expect(verdict.hint).toBeNull();
    const [first] = server.requests;
    expect(first!.headers.authorization).toBe('Bearer k3y');
    expect(first!.body).toMatchObject({ model: 'judge-model', temperature: JUDGE_TEMPERATURE, max_tokens: 64, stream: false });
    expect(first!.body.messages[1].content).toContain('No, I said Python not JavaScript.');
    expect(new Set(server.requests.map((r) => r.body.seed)).size).toBe(3); // a different seed per vote
  });

  it('reasoning sent apart by the server is kept in the raw vote and skipped by the parser', async () => {
    const message = (extra: object) => ({ body: { choices: [{ index: 0, message: { role: 'assistant', content: 'So: \\boxed{-1}', ...extra } }] } });
    const server = await scripted((_, n) => (n === 0 ? message({ reasoning_content: 'maybe \\boxed{1}' }) : message({ reasoning: 'or \\boxed{0}' })));
    const verdict = await judgeOn(server, { concurrency: 1 }).judge(sample, { hints: false, votes: 2 });
    expect(verdict.votes.map((v) => v.raw)).toEqual(['<think>maybe \\boxed{1}</think>So: \\boxed{-1}', '<think>or \\boxed{0}</think>So: \\boxed{-1}']);
    expect(verdict.reward).toBe(-1);
  });

  it('the majority wins; unparseable votes are dropped', async () => {
    const answers = ['\\boxed{-1}', 'garbage', '\\boxed{-1}', '\\boxed{1}', 'more garbage'];
    const server = await scripted((_, n) => ({ content: answers[n] }));
    const verdict = await judgeOn(server, { concurrency: 1 }).judge(sample, { hints: false, votes: 5 });
    expect(verdict.reward).toBe(-1);
  });

  it('with hints: m hint votes beside the m reward votes; the longest hint over 10 characters wins', async () => {
    const server = await scripted((body) => {
      const isHint = String(body.messages[0].content).includes('[HINT_START]');
      const n = body.seed % 3; // any deterministic spread over the three hint answers
      if (!isHint) return { content: '\\boxed{-1}' };
      return { content: ['\\boxed{1}\n[HINT_START]Use Python![HINT_END]', '\\boxed{1}\n[HINT_START]Write it in Python, not JavaScript.[HINT_END]', '\\boxed{-1}'][n] };
    });
    const verdict = await judgeOn(server).judge(sample, { hints: true, votes: 3 });
    expect(server.requests).toHaveLength(6);
    expect(verdict.reward).toBe(-1);
    expect(verdict.votes).toHaveLength(3);
    for (const v of verdict.votes) expect(v.hintRaw).toBeDefined();
    const hints = verdict.votes.filter((v) => v.hintAnswer === 1).map((v) => v.hint);
    expect(verdict.hint).toBe(hints.includes('Write it in Python, not JavaScript.') ? 'Write it in Python, not JavaScript.' : hints.some((h) => h === 'Use Python!') ? 'Use Python!' : null);
  });

  it('retries 5xx with backoff, then succeeds', async () => {
    const server = await scripted((_, n) => (n < 2 ? { status: 503, body: { error: { message: 'loading model' } } } : { content: '\\boxed{1}' }));
    const verdict = await judgeOn(server).judge(sample, { hints: false, votes: 1 });
    expect(verdict.reward).toBe(1);
    expect(server.requests).toHaveLength(3);
  });

  it('gives up after the retries with an error naming the URL and the server message', async () => {
    const server = await scripted(() => ({ status: 500, body: { error: { message: 'CUDA out of memory' } } }));
    const err = await judgeOn(server, { retries: 2 }).judge(sample, { hints: false, votes: 1 }).catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toContain(`${server.baseUrl}/chat/completions failed after 3 attempt(s): HTTP 500: CUDA out of memory`);
    expect(server.requests).toHaveLength(3);
  });

  it('an endpoint that answers garbage (not JSON, or no choices) is a clear error, not a crash', async () => {
    const notJson = await scripted(() => ({ body: '<html>proxy error</html>' }));
    await expect(judgeOn(notJson).judge(sample, { hints: false, votes: 1 })).rejects.toThrow(/answered garbage: not JSON \("<html>proxy error/);
    const noChoices = await scripted(() => ({ body: { object: 'chat.completion', choices: [] } }));
    await expect(judgeOn(noChoices).judge(sample, { hints: false, votes: 1 })).rejects.toThrow(/answered garbage: JSON without choices/);
  });

  it('a refused key or a wrong path is reported at once (no retries)', async () => {
    const denied = await scripted(() => ({ status: 401, body: { error: { message: 'bad key' } } }));
    await expect(judgeOn(denied).judge(sample, { hints: false, votes: 1 })).rejects.toThrow(/refused the API key \(HTTP 401: bad key\)/);
    expect(denied.requests).toHaveLength(1);
    const missing = await scripted(() => ({ status: 404, body: { error: { message: "model 'judge-model' not found" } } }));
    await expect(judgeOn(missing).judge(sample, { hints: false, votes: 1 })).rejects.toThrow(/404 .*check that the base URL ends in \/v1/);
  });

  it('keeps at most `concurrency` requests in flight', async () => {
    const server = await scripted(() => ({ content: '\\boxed{1}', delayMs: 60 }));
    const judge = judgeOn(server, { concurrency: 2 });
    await Promise.all([judge.judge(sample, { hints: false, votes: 3 }), judge.judge({ ...sample, responseTurn: 4 }, { hints: false, votes: 3 })]);
    expect(server.requests).toHaveLength(6);
    expect(server.maxInFlight).toBe(2);
  });
});

describe('openai backend: an endpoint that is down', () => {
  it('times out on a server that accepts and never answers, naming the URL and the limit', async () => {
    const server = await scripted(() => ({ hang: true }));
    const started = Date.now();
    const err = await judgeOn(server, { timeoutMs: 300 }).judge(sample, { hints: false, votes: 1 }).catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toBe(`the OpenAI-compatible endpoint ${server.baseUrl}/chat/completions did not answer within 300 ms (raise hindsight judge's --timeout-ms for a slow model)`);
    // Far below the default timeout (minutes), with room for a loaded machine: the 300 ms limit acted.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(server.requests).toHaveLength(1); // a timeout is not retried
  });

  it('connection refused: retried, then a one-line error naming the URL', async () => {
    const port = await closedPort();
    const err = await new LlmJudge(new OpenAiClient({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm', retries: 1, backoffMs: 10 }))
      .judge(sample, { hints: false, votes: 1 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toBe(
      `the OpenAI-compatible endpoint http://127.0.0.1:${port}/v1/chat/completions failed after 2 attempt(s): cannot reach it: connection refused (is the server running?)`,
    );
  });

  it('a port that fetch refuses (browser-unsafe) is named, not retried', async () => {
    const err = await new LlmJudge(new OpenAiClient({ baseUrl: 'http://127.0.0.1:6000/v1', model: 'm', backoffMs: 10 }))
      .judge(sample, { hints: false, votes: 1 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toMatch(/fetch refuses port 6000/);
  });

  it('bad settings are refused before any request', () => {
    expect(() => new OpenAiClient({ baseUrl: 'localhost:11434', model: 'm' })).toThrow(/must start with http/);
    expect(() => new OpenAiClient({ baseUrl: 'not a url', model: 'm' })).toThrow(/is not a URL/);
    expect(() => new OpenAiClient({ baseUrl: 'http://127.0.0.1:1/v1', model: ' ' })).toThrow(/needs a model name/);
  });

  it('cancelling aborts a request in flight at once', async () => {
    const server = await scripted(() => ({ hang: true }));
    const abort = new AbortController();
    const pending = judgeOn(server).judge(sample, { hints: false, votes: 3, signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    const started = Date.now();
    const err = await pending.catch((e) => e);
    expect(err.name).toBe('AbortError');
    // The server never answers, so only the abort can have ended it; the bound only catches a
    // wait for the default timeout (minutes), with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('openai backend against Hindsight’s own endpoint serving the demo model', () => {
  let endpoint: OpenAiServer;
  beforeAll(async () => {
    // The judge's prompts need more than the demo model's 512 positions: see the last test.
    endpoint = await startOpenAiServer({ modelDir: demoModelWithPositions(2048), token: 'launch-token', port: 0 });
  });
  afterAll(async () => {
    await endpoint?.close();
  });

  // The hint judge over HTTP is covered by the scripted server above; here the reward
  // judge alone keeps the test to a few seconds (each prompt is ~700 tokens for this model).
  it('judges every sample; the tiny model’s garbage votes are stored raw and dropped, so each label is 0', async () => {
    const ws = await sortingWorkspace();
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: endpoint.baseUrl, model: 'stories260K', apiKey: endpoint.token }), { maxTokens: 16 });
    const summary = await runJudge(ws, judge, { hints: false, votes: 3, concurrency: 2 });
    expect(summary).toMatchObject({ judged: 3, cancelled: false, backend: 'openai', model: 'stories260K', promptVersion: 'reward-v1' });
    const samples = ws.listSamples();
    for (const s of samples) {
      expect(s.label).toMatchObject({ reward: 0, source: 'judge:stories260K' });
      expect(s.label.votes).toHaveLength(3);
      for (const v of s.label.votes) {
        expect(v.raw.length).toBeGreaterThan(0); // the model said something …
        expect(v.reward).toBe(parseRewardAnswer(v.raw)); // … and the vote is what the parser makes of it
        expect(v.reward).toBeUndefined(); // a 260K-parameter story model never boxes an answer
      }
    }
    const row = ws.query<{ judge_backend: string; judge_model: string; prompt_version: string }>(
      'SELECT judge_backend, judge_model, prompt_version FROM labels LIMIT 1',
    )[0];
    expect(row).toEqual({ judge_backend: 'openai', judge_model: 'stories260K', prompt_version: 'reward-v1' });

    // The stored raw vote is exactly what the endpoint answers to the same request (same seed).
    const first = samples[0]!.label.votes[0]!;
    const again = await fetch(`${endpoint.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${endpoint.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...(await lastRewardRequest(ws)), max_tokens: 16 }),
    }).then((r) => r.json());
    // A vote stopped by max_tokens carries the note that says so (src-main/judge/parse.ts).
    expect(again.choices[0].message.content + (again.choices[0].finish_reason === 'length' ? CUT_OFF_NOTE : '')).toBe(first.raw);
    ws.close();
  });

  it('a run can be cancelled midway; the next run judges only the rest', async () => {
    const ws = await sortingWorkspace();
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: endpoint.baseUrl, model: 'stories260K', apiKey: endpoint.token }), { maxTokens: 8 });
    const abort = new AbortController();
    const first = await runJudge(ws, judge, {
      hints: false,
      votes: 1,
      signal: abort.signal,
      onProgress: (p) => {
        if (p.done === 1) abort.abort(); // Cancel once the first verdict is in: it is kept (stored with its batch)
      },
    });
    expect(first).toMatchObject({ judged: 1, cancelled: true });
    const second = await runJudge(ws, judge, { hints: false, votes: 1 });
    expect(second).toMatchObject({ judged: 2, skippedUnchanged: 1, cancelled: false });
    ws.close();
  });

  it('a judge prompt longer than the served model’s context: the endpoint’s 400 is read, and each sample skipped and counted', async () => {
    const real = await startOpenAiServer({ modelDir: DEMO_MODEL, token: 'launch-token', port: 0 });
    const ws = await sortingWorkspace();
    try {
      const judge = new LlmJudge(new OpenAiClient({ baseUrl: real.baseUrl, model: 'stories260K', apiKey: real.token }), { maxTokens: 8 });
      const summary = await runJudge(ws, judge, { hints: false, votes: 1 });
      expect(summary).toMatchObject({ judged: 0, skippedTooLong: 3, judgeContext: 512, failed: 0 });
      expect(ws.listSamples().every((s) => s.label.source === null)).toBe(true);
    } finally {
      ws.close();
      await real.close();
    }
  });
});

/** The reward-judge request the runner sent for the first sample's first vote, rebuilt from the prompt module. */
async function lastRewardRequest(ws: Awaited<ReturnType<typeof sortingWorkspace>>) {
  const { rewardPrompt } = await import('../../src-main/judge/prompts.js');
  const { voteSeed } = await import('../../src-main/judge/llm-judge.js');
  const [candidate] = ws.judgeCandidates();
  return {
    model: 'stories260K',
    messages: rewardPrompt(candidate!.input),
    temperature: JUDGE_TEMPERATURE,
    seed: voteSeed(candidate!.input.sessionId, candidate!.input.responseTurn, 'reward', 0),
  };
}
