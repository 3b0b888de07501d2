// Proxy mode over real HTTP: Hindsight forwards /v1/chat/completions to a SECOND Hindsight
// instance (startOpenAiServer on the demo model) and records what the client received, JSON
// and streams alike; upstream errors pass through unrecorded; an unreachable upstream is a 502.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { startOpenAiServer, type OpenAiServer } from '../../src-main/openai/server.js';
import { api, chat, chatStream, collect, DEMO_MODEL, refusedPort, startCapture } from './helpers.js';

let upstream: OpenAiServer;
let proxy: Awaited<ReturnType<typeof startCapture>>;
let base: string;
const ws = () => proxy.service.currentWorkspace as Workspace;

beforeAll(async () => {
  upstream = await startOpenAiServer({ modelDir: DEMO_MODEL, token: 'upstream-key', port: 0 });
  proxy = await startCapture({ upstream: { baseUrl: upstream.baseUrl, apiKey: 'upstream-key' } });
  base = `${proxy.url}v1`;
});
afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
});

describe('forwarding to another Hindsight', () => {
  it('answers what the upstream answers, and records it with the session’s next state', async () => {
    const samples = collect(proxy, 'capture.sample');
    const first = [{ role: 'user', content: 'Tell me about a cat.' }];
    const viaProxy = await chat(base, proxy.token, first, { headers: { 'X-Session-Id': 'up-1' }, body: { temperature: 0 } });
    const direct = await chat(upstream.baseUrl, upstream.token, first, { body: { temperature: 0 } });
    expect(viaProxy.status).toBe(200);
    expect(viaProxy.body.model).toBe('stories260K'); // the upstream's own answer, passed through
    expect(viaProxy.content).toBe(direct.content);
    await chat(base, proxy.token, [...first, { role: 'assistant', content: viaProxy.content }, { role: 'user', content: 'No, shorter please.' }], {
      headers: { 'X-Session-Id': 'up-1' },
      body: { temperature: 0 },
    });
    expect(samples).toContainEqual({ sessionId: 'capture:up-1', responseTurns: [1] });
    const [x] = ws().captureExchanges('capture:up-1');
    expect(x).toMatchObject({ servedBy: 'upstream', model: 'stories260K', modelDir: null, rollout: null, reply: { content: viaProxy.content } });
    expect((await api(proxy, 'captureStatus')).upstream).toBe(upstream.baseUrl);
  });

  it('streams through event by event and records the assembled reply', async () => {
    const messages = [{ role: 'user', content: 'Tell me about a whale.' }];
    const streamed = await chatStream(base, proxy.token, messages, { headers: { 'X-Session-Id': 'up-stream' }, body: { temperature: 0 } });
    const direct = await chat(upstream.baseUrl, upstream.token, messages, { body: { temperature: 0 } });
    expect(streamed.events.at(-1)).toBe('[DONE]');
    expect(streamed.events.length).toBeGreaterThan(3);
    expect(streamed.content).toBe(direct.content);
    const [x] = ws().captureExchanges('capture:up-stream');
    expect(x!.reply.content).toBe(streamed.content);
    expect(x!.servedBy).toBe('upstream');
  });

  it('streams n = 2 through and records the first choice, as without streaming', async () => {
    const messages = [{ role: 'user', content: 'Tell me about a frog.' }];
    const body = { n: 2, temperature: 0.9, seed: 4 };
    const streamed = await chatStream(base, proxy.token, messages, { headers: { 'X-Session-Id': 'up-stream-n' }, body });
    const direct = await chat(upstream.baseUrl, upstream.token, messages, { body });
    expect(direct.body.choices[1].message.content).not.toBe(direct.content);
    expect(streamed.events.some((e) => e !== '[DONE]' && JSON.parse(e).choices?.[0]?.index === 1)).toBe(true);
    expect(streamed.content).toBe(direct.content);
    const [x] = ws().captureExchanges('capture:up-stream-n');
    expect(x!.reply.content).toBe(direct.content);
  });

  it('passes an upstream error through unchanged and records no reply', async () => {
    const before = ws().captureExchanges().length;
    const bad = await chat(base, proxy.token, [{ role: 'user', content: 'hi' }], { body: { top_logprobs: 3 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('top_logprobs');
    expect(ws().captureExchanges()).toHaveLength(before);
  });

  it('records nothing of a request the upstream refuses (its prompt too long for the upstream model)', async () => {
    const long = [{ role: 'user', content: 'Once upon a time there was a cat. '.repeat(1200) }];
    for (const stream of [false, true]) {
      const refused = await chat(base, proxy.token, long, { headers: { 'X-Session-Id': `up-refused-${stream}` }, body: { stream } });
      expect(refused.status).toBe(400);
      expect(refused.body.error.code).toBe('context_length_exceeded');
    }
    expect(ws().captureCounts().sessionIds.filter((id) => id.startsWith('capture:up-refused'))).toEqual([]);
  });
});

describe('an upstream that is down', () => {
  it('is a 502 naming it', async () => {
    const port = await refusedPort();
    const down = await startCapture({ upstream: { baseUrl: `http://127.0.0.1:${port}/v1` } });
    try {
      const res = await chat(`${down.url}v1`, down.token, [{ role: 'user', content: 'hi' }]);
      expect(res.status).toBe(502);
      expect(res.body.error.message).toBe(`cannot reach the upstream server http://127.0.0.1:${port}/v1: ECONNREFUSED`);
    } finally {
      await down.close();
    }
  });
});
