// Live capture with the local demo model answering, over real HTTP: sessions by header, by
// `user` and by prefix continuity; side turns; streaming; X-Session-Done; next states
// becoming samples (with events); stored rollout log-probs equal to `score`; the trainer's
// rows using them as old; capture off records nothing; per-session delete.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { rowsFromSamples } from '../../src-main/train/batches.js';
import { api, chat, chatStream, collect, DEMO_MODEL, startCapture, type Message } from './helpers.js';

let server: Awaited<ReturnType<typeof startCapture>>;
let model: LocalModel;
let base: string;
let samples: ReturnType<typeof collect<'capture.sample'>>;
const ws = () => server.service.currentWorkspace as Workspace;

beforeAll(async () => {
  [server, model] = await Promise.all([startCapture(), LocalModel.load(DEMO_MODEL)]);
  base = `${server.url}v1`;
  samples = collect(server, 'capture.sample');
});
afterAll(async () => {
  await server?.close();
  await model?.close();
});

const SYSTEM: Message = { role: 'system', content: 'You tell short stories.' };

describe('sessions and samples', () => {
  it('X-Session-Id: the next request’s user message becomes the next state of the previous reply, live', async () => {
    const h = { headers: { 'X-Session-Id': 'story-1' } };
    const first = [SYSTEM, { role: 'user', content: 'Tell me about a dog.' }];
    const r1 = await chat(base, server.token, first, h);
    expect(r1.status).toBe(200);
    expect(samples).toHaveLength(0); // no reaction yet
    const second = [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'No, I said a cat.' }];
    const r2 = await chat(base, server.token, second, h);
    expect(r2.status).toBe(200);
    expect(samples).toContainEqual({ sessionId: 'capture:story-1', responseTurns: [2] });
    const detail = await api(server, 'getSession', { id: 'capture:story-1' });
    expect(detail.source).toBe('capture');
    expect(detail.turns.map((t: { role: string }) => t.role)).toEqual(['system', 'user', 'assistant', 'user', 'assistant']);
    expect(detail.turns[4].text).toBe(r2.content);
    expect(detail.samples).toHaveLength(1);
    expect(detail.samples[0]).toMatchObject({ responseTurn: 2, feedbackTurn: 3, response: r1.content, feedback: 'No, I said a cat.', nextStateRole: 'user' });
  });

  it('without a session id, a request that continues a recent chat joins it; a new chat starts another', async () => {
    const first = [{ role: 'user', content: 'Once upon a time there was a frog.' }];
    const r1 = await chat(base, server.token, first);
    const cont = [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Perfect, thanks! Go on.' }];
    await chat(base, server.token, cont);
    const other = await chat(base, server.token, [{ role: 'user', content: 'Something else entirely.' }]);
    expect(other.status).toBe(200);
    const live = ws().captureExchanges().filter((x) => x.sessionId.startsWith('capture:live-'));
    expect(live).toHaveLength(3);
    expect(live[0]!.sessionId).toBe(live[1]!.sessionId);
    expect(live[2]!.sessionId).not.toBe(live[0]!.sessionId);
    const detail = await api(server, 'getSession', { id: live[0]!.sessionId });
    expect(detail.samples.map((s: { feedback: string }) => s.feedback)).toEqual(['Perfect, thanks! Go on.']);
  });

  it('the `user` field names the session; a request that does not continue it starts a new segment', async () => {
    const first = [{ role: 'user', content: 'Tell me about the sea.' }];
    const r1 = await chat(base, server.token, first, { body: { user: 'ann' } });
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Great story!' }], { body: { user: 'ann' } });
    await chat(base, server.token, [{ role: 'user', content: 'A new chat about trees.' }], { body: { user: 'ann' } });
    expect((await api(server, 'getSession', { id: 'capture:user:ann' })).samples).toHaveLength(1);
    expect((await api(server, 'getSession', { id: 'capture:user:ann#2' })).turns).toHaveLength(2);
  });

  it('side requests are served and recorded as side, never as turns or samples', async () => {
    const before = (await api(server, 'getSession', { id: 'capture:story-1' })).turns.length;
    const side = await chat(base, server.token, [{ role: 'user', content: 'Summarise this chat in three words.' }], {
      headers: { 'X-Session-Id': 'story-1', 'X-Turn-Type': 'side' },
    });
    expect(side.status).toBe(200);
    expect((await api(server, 'getSession', { id: 'capture:story-1' })).turns).toHaveLength(before);
    const kinds = ws().captureExchanges('capture:story-1').map((x) => x.kind);
    expect(kinds).toEqual(['main', 'main', 'side']);
    const bad = await chat(base, server.token, [{ role: 'user', content: 'x' }], { headers: { 'X-Turn-Type': 'sidecar' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/X-Turn-Type must be main or side/);
  });

  it('streaming: the stored reply is what the client assembled, recorded before [DONE]', async () => {
    const first = [{ role: 'user', content: 'Tell me about a bird.' }];
    const r1 = await chatStream(base, server.token, first, { headers: { 'X-Session-Id': 'streamed' } });
    expect(r1.events.at(-1)).toBe('[DONE]');
    const [x] = ws().captureExchanges('capture:streamed');
    expect(x!.reply.content).toBe(r1.content);
    await chatStream(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Thanks, lovely.' }], {
      headers: { 'X-Session-Id': 'streamed' },
    });
    expect(samples).toContainEqual({ sessionId: 'capture:streamed', responseTurns: [1] });
  });

  it('X-Session-Done closes a session: the same id then starts a new segment', async () => {
    const first = [{ role: 'user', content: 'Short one about a fox.' }];
    const r1 = await chat(base, server.token, first, { headers: { 'X-Session-Id': 'fox', 'X-Session-Done': '1' } });
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'More!' }], { headers: { 'X-Session-Id': 'fox' } });
    expect((await api(server, 'getSession', { id: 'capture:fox' })).samples).toHaveLength(0);
    expect((await api(server, 'getSession', { id: 'capture:fox#2' })).turns).toHaveLength(4);
  });
});

describe('rollout log-probs', () => {
  it('are stored with the reply and equal score() on the same tokens', async () => {
    const exchanges = ws().captureExchanges().filter((x) => x.rollout);
    expect(exchanges.length).toBeGreaterThan(5);
    for (const x of exchanges.slice(0, 4)) {
      const r = x.rollout!;
      expect(r.promptIds).toEqual(model.promptIds(x.messages as Message[]));
      expect(model.tokenizer.decode(r.tokens.filter((t) => !model.tokenizer.eosTokenIds.includes(t)))).toContain(x.reply.content.trim().slice(0, 5));
      const [scored] = await model.score([{ inputIds: [...r.promptIds, ...r.tokens], responseStart: r.promptIds.length }]);
      expect(scored).toHaveLength(r.logprobs.length);
      scored!.forEach((lp, i) => expect(lp).toBeCloseTo(r.logprobs[i]!, 4));
    }
  });

  it('the trainer trains a captured sample on its rollout tokens with them as old; a windowed context falls back', async () => {
    ws().setLabel('capture:story-1', 2, { reward: -1 });
    const tokenizer = ChatTokenizer.load(DEMO_MODEL);
    const all = ws().trainingSamples({ rolloutsFor: DEMO_MODEL }).filter((s) => s.sessionId === 'capture:story-1');
    expect(all).toHaveLength(1);
    const rollout = all[0]!.rollout!;
    expect(rollout).toBeDefined();
    const set = rowsFromSamples(all, tokenizer, 'rl', 512);
    expect(set.fromRollout).toBe(1);
    expect(set.rows[0]!.inputIds).toEqual([...rollout.promptIds, ...rollout.tokens]);
    expect(set.rows[0]!.oldLogprobs).toEqual(rollout.logprobs);
    // Without asking for rollouts of this model (another model is trained): rendered, policy old.
    const plain = rowsFromSamples(ws().trainingSamples().filter((s) => s.sessionId === 'capture:story-1'), tokenizer, 'rl', 512);
    expect(plain.fromRollout ?? 0).toBe(0);
    expect(plain.rows[0]!.oldLogprobs).toBeUndefined();
    // A context that no longer renders to the rollout's prompt (a window cut it): fallback.
    const cut = rowsFromSamples([{ ...all[0]!, messages: all[0]!.messages.slice(1) }], tokenizer, 'rl', 512);
    expect(cut.fromRollout ?? 0).toBe(0);
    expect(cut.rows[0]!.oldLogprobs).toBeUndefined();
  });
});

describe('the tools a request offered', () => {
  it('are the session\'s tools, in its samples; the log writes the list once while the client resends it', async () => {
    const tools = [{ type: 'function', function: { name: 'roll_dice', description: 'Roll a die', parameters: { type: 'object', properties: {} } } }];
    const first = [{ role: 'user', content: 'Tell me about a dragon.' }];
    const h = { headers: { 'X-Session-Id': 'dice' }, body: { tools } };
    const r1 = await chat(base, server.token, first, h);
    await chat(base, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Thanks!' }], h);
    const [sample] = ws().trainingSamples().filter((s) => s.sessionId === 'capture:dice');
    expect(sample!.tools).toEqual(tools);
    const log = fs.readFileSync(`${server.dbPath}.capture-log.jsonl`, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const requests = log.filter((r) => r.t === 'request' && r.session === 'capture:dice');
    // The list once, then "the same as before" while the agent resends it unchanged.
    expect(requests.map((r) => [r.tools ?? null, r.sameTools ?? null])).toEqual([[tools, null], [null, true]]);
  });
});

describe('privacy', () => {
  it('records nothing while capture is off', async () => {
    await api(server, 'updateSettings', { captureEnabled: false });
    const before = ws().captureExchanges().length;
    const lines = fs.readFileSync(server.capture.status().logPath!, 'utf8').split('\n').length;
    expect((await chat(base, server.token, [{ role: 'user', content: 'Private question.' }])).status).toBe(200);
    expect(ws().captureExchanges()).toHaveLength(before);
    expect(fs.readFileSync(server.capture.status().logPath!, 'utf8').split('\n').length).toBe(lines);
    expect((await api(server, 'captureStatus')).enabled).toBe(false);
    await api(server, 'updateSettings', { captureEnabled: true });
  });

  it('per-session delete removes the session from the database and its text from the capture log', async () => {
    const logPath = server.capture.status().logPath!;
    expect(fs.readFileSync(logPath, 'utf8')).toContain('No, I said a cat.');
    expect(await api(server, 'deleteSession', { id: 'capture:story-1' })).toEqual({ deleted: true });
    expect(fs.readFileSync(logPath, 'utf8')).not.toContain('No, I said a cat.');
    expect(ws().captureExchanges('capture:story-1')).toHaveLength(0);
    await expect(api(server, 'getSession', { id: 'capture:story-1' })).rejects.toThrow(/no session/);
    expect(fs.readFileSync(logPath, 'utf8')).toContain('Tell me about a bird.'); // the others stay
  });
});
