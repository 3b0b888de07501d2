// POST /v1/feedback end to end (docs/design.md §Feedback endpoint): chats captured through
// `serve --capture` on the demo model, then a client's thumbs-up or -down by completion id or
// by session and turn becomes a manual label — at once when the reply is a sample, or once the
// next message makes it one; the log keeps it across a restart; errors in OpenAI's shape.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { api, chat, chatStream, startCapture, type Message } from './helpers.js';

let server: Awaited<ReturnType<typeof startCapture>>;
let base: string;

beforeAll(async () => {
  server = await startCapture();
  base = `${server.url}v1`;
});
afterAll(async () => {
  await server?.close();
});

async function feedback(body: unknown, token = server.token, at = base): Promise<{ status: number; body: any }> {
  const res = await fetch(`${at}/feedback`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const sampleOf = async (session: string, turn: number) => (await api(server, 'getSession', { id: session })).samples.find((s: { responseTurn: number }) => s.responseTurn === turn);

describe('POST /v1/feedback', () => {
  it('by completion id: a reply with a next state gets a manual label at once; the id is the one the client got', async () => {
    const h = { headers: { 'X-Session-Id': 'fb-1' } };
    const first: Message[] = [{ role: 'user', content: 'Tell me about a dog.' }];
    const r1 = await chat(base, server.token, first, h);
    expect(r1.body.id).toMatch(/^chatcmpl-/);
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Now a cat, please.' }], h);
    const exchanges = (server.service.currentWorkspace as Workspace).captureExchanges('capture:fb-1');
    expect(exchanges.map((x) => x.completionId)).toContain(r1.body.id);

    const answer = await feedback({ id: r1.body.id, reward: -1, hint: 'Ask which animal first.' });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id: r1.body.id, session: 'capture:fb-1', turn: 1, reward: -1, status: 'applied' });
    expect(answer.body.label).toMatchObject({ reward: -1, source: 'manual', hint: 'Ask which animal first.' });
    const sample = await sampleOf('capture:fb-1', 1);
    expect(sample.label).toMatchObject({ reward: -1, source: 'manual', hint: 'Ask which animal first.' });
    expect(sample.label.reviewedAt).not.toBeNull();
  });

  it('before the next message: pending (202), applied when the next state arrives; by session key and turn too', async () => {
    const h = { headers: { 'X-Session-Id': 'fb-2' } };
    const first: Message[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'A story about the sea.' }];
    const r1 = await chatStream(base, server.token, first, h);
    const pending = await feedback({ session: 'fb-2', turn: 2, reward: 1 });
    expect(pending.status).toBe(202);
    expect(pending.body).toMatchObject({ session: 'capture:fb-2', turn: 2, status: 'pending', label: null });
    expect(pending.body.id).toMatch(/^chatcmpl-/); // the streamed completion's id was recorded too
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Lovely.' }], h);
    expect((await sampleOf('capture:fb-2', 2)).label).toMatchObject({ reward: 1, source: 'manual' });
  });

  it('a manual label from feedback wins over the judge, and a later thumbs-down replaces it', async () => {
    await api(server, 'judgeRun', { backend: 'heuristic', hints: false });
    expect((await sampleOf('capture:fb-2', 2)).label.source).toBe('manual');
    const again = await feedback({ session: 'capture:fb-2', turn: 2, reward: 0 });
    expect(again.status).toBe(200);
    expect((await sampleOf('capture:fb-2', 2)).label.reward).toBe(0);
  });

  it('a wrong id or turn is a 404 in OpenAI’s error shape; bad bodies are 400 naming the field; the token is required', async () => {
    const unknown = await feedback({ id: 'chatcmpl-nope', reward: 1 });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error', code: 'not_found', param: 'id' });
    expect((await feedback({ session: 'fb-1', turn: 7, reward: 1 })).status).toBe(404);
    const badReward = await feedback({ id: 'x', reward: 2 });
    expect(badReward.status).toBe(400);
    expect(badReward.body.error.param).toBe('reward');
    expect((await feedback({ id: 'x', session: 'fb-1', turn: 1, reward: 1 })).status).toBe(400);
    expect((await feedback({ session: 'fb-1', reward: 1 })).status).toBe(400);
    expect((await feedback({ id: 'x', reward: 1, thumbs: 'up' })).body.error.param).toBe('thumbs');
    const noToken = await feedback({ id: 'x', reward: 1 }, 'wrong-token');
    expect(noToken.status).toBe(401);
    expect(noToken.body.error.code).toBe('invalid_api_key');
  });

  it('a side request has no sample: 409', async () => {
    const side = await chat(base, server.token, [{ role: 'user', content: 'Title for this chat?' }], { headers: { 'X-Session-Id': 'fb-1', 'X-Turn-Type': 'side' } });
    const answer = await feedback({ id: side.body.id, reward: 1 });
    expect(answer.status).toBe(409);
    expect(answer.body.error.code).toBe('not_a_sample');
  });

  it('is in the capture log: after a restart a pending thumbs-up still lands, and a label edited later is not overwritten', async () => {
    const h = { headers: { 'X-Session-Id': 'fb-3' } };
    const first: Message[] = [{ role: 'user', content: 'Tell me about a fox.' }];
    const r1 = await chat(base, server.token, first, h);
    expect((await feedback({ id: r1.body.id, reward: 1 })).status).toBe(202);
    const log = fs.readFileSync(server.capture.status().logPath!, 'utf8');
    expect(log).toContain('"t":"feedback"');
    // The user edits fb-1's label after its feedback: a replay must keep the edit.
    await new Promise((r) => setTimeout(r, 1100)); // label times are whole seconds
    await api(server, 'setLabel', { sessionId: 'capture:fb-1', responseTurn: 1, patch: { reward: 1 } });
    const { dir } = server;
    await server.close();
    server = await startCapture({}, {}, dir);
    base = `${server.url}v1`;
    expect((await sampleOf('capture:fb-1', 1)).label.reward).toBe(1);
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Thanks!' }], h);
    expect((await sampleOf('capture:fb-3', 1)).label).toMatchObject({ reward: 1, source: 'manual' });
  });

  it('two ratings of one reply in the same second: the later one stays, also after a restart (replay keeps the acknowledged order)', async () => {
    const h = { headers: { 'X-Session-Id': 'fb-4' } };
    const first: Message[] = [{ role: 'user', content: 'Tell me about an owl.' }];
    const r1 = await chat(base, server.token, first, h);
    // Two ratings while it is pending, then two once it is a sample: the last one answered is the one that counts.
    expect((await feedback({ id: r1.body.id, reward: -1 })).status).toBe(202);
    expect((await feedback({ id: r1.body.id, reward: 1, hint: 'Shorter.' })).status).toBe(202);
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'And a crow?' }], h);
    expect((await sampleOf('capture:fb-4', 1)).label).toMatchObject({ reward: 1, hint: 'Shorter.' });
    // Label times are whole seconds: both answers early in one second, the restarts in later ones.
    while (Date.now() % 1000 > 300) await new Promise((r) => setTimeout(r, 20));
    expect((await feedback({ id: r1.body.id, reward: 1 })).body.status).toBe('applied');
    expect((await feedback({ id: r1.body.id, reward: -1 })).body.status).toBe('applied');
    expect((await sampleOf('capture:fb-4', 1)).label).toMatchObject({ reward: -1, hint: 'Shorter.' });
    for (let round = 0; round < 2; round++) {
      await new Promise((r) => setTimeout(r, 1100));
      const { dir } = server;
      await server.close();
      server = await startCapture({}, {}, dir);
      base = `${server.url}v1`;
      expect((await sampleOf('capture:fb-4', 1)).label).toMatchObject({ reward: -1, source: 'manual', hint: 'Shorter.' });
    }
  });
});
