// The Chat page's saved chats and per-reply figures through serve's API, on the demo model
// (issue 34: "a system prompt, saved chats, tokens/s and the finish reason per reply"): a turn
// with a system prompt is saved with both the prompt and each reply's tokens, tokens per second
// and finish reason ('length' at Max tokens); the next turn continues the same chat; the system
// prompt reaches the model (live capture records it as the conversation's first message); the
// chats survive a restart, are listed newest first, and are deleted.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChatState, SavedChat, SavedChatSummary } from '../../src-shared/chat-api.js';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { api } from '../helpers/api.js';
import { TEST_TIMEOUT_MS, waitUntil } from '../helpers/deadlines.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DEMO_MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-saved-chats-'));
const dbPath = path.join(dir, 'chats.db');
let server: ServeHandle | undefined;
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const SYSTEM = { role: 'system' as const, content: 'You tell short stories about animals.' };

/** Sends one turn and waits for it to end; answers the final state. */
async function turn(s: ServeHandle, messages: { role: 'system' | 'user' | 'assistant'; content: string }[], chatId?: string, maxTokens = 24): Promise<ChatState> {
  const started = await api<ChatState>(s, 'chatStart', { ...(chatId ? { chatId } : {}), modelDir: DEMO_MODEL, adapterDir: null, base: messages, sampling: { temperature: 0.8, topP: 0.95, maxTokens, seed: 5 } });
  return waitUntil('the turn to end', async () => {
    const state = await api<ChatState>(s, 'chatStatus');
    return state.turn === started.turn && state.state !== 'running' ? state : null;
  });
}

describe('saved chats', { timeout: TEST_TIMEOUT_MS }, () => {
  it('saves each turn with the system prompt and each reply’s figures; continues, survives a restart, deletes', async () => {
    server = await serveApp({ dbPath, port: 0, buildRenderer: false, capture: true });
    const first = [SYSTEM, { role: 'user' as const, content: 'Tell me a story about a cat.' }];
    const one = await turn(server, first, undefined, 8);
    const side = one.sides[0]!;
    expect(side.status).toBe('done');
    expect(side.tokens).toBe(8);
    expect(side.finishReason).toBe('length'); // 8 tokens is Max tokens: the story goes on
    expect(side.tokensPerSecond).toBeGreaterThan(0);
    expect(side.firstTokenMs).toBeGreaterThanOrEqual(0);
    expect(one.saveError).toBeNull();
    const chatId = one.chatId!;

    // The system prompt reached the model: live capture recorded the conversation it was sent.
    const captured = await api<{ turns: { role: string; text: string }[] }>(server, 'getSession', { id: `capture:chat:${chatId}:base` });
    expect(captured.turns[0]).toMatchObject({ role: 'system', text: SYSTEM.content });

    const two = await turn(server, [...first, { role: 'assistant', content: side.text }, { role: 'user', content: 'What happened next?' }], chatId, 400);
    expect(two.chatId).toBe(chatId);
    expect(['stop', 'length']).toContain(two.sides[0]!.finishReason);

    const other = await turn(server, [{ role: 'user', content: 'Tell me about a dog.' }]);
    const list = await api<SavedChatSummary[]>(server, 'chatList');
    expect(list.map((c) => c.id)).toEqual([other.chatId, chatId]); // newest first
    expect(list[1]).toMatchObject({ title: 'Tell me a story about a cat.', turns: 2, adapter: null });
    await server.close();
    server = undefined;

    server = await serveApp({ dbPath, port: 0, buildRenderer: false });
    const saved = await api<SavedChat>(server, 'chatOpen', { id: chatId });
    expect(saved).toMatchObject({ id: chatId, turns: 2, modelDir: DEMO_MODEL, adapterDir: null, systemPrompt: SYSTEM.content });
    expect(saved.sampling).toEqual({ temperature: 0.8, topP: 0.95, maxTokens: 400, seed: 5 });
    expect(saved.chatTurns.map((t) => t.user)).toEqual(['Tell me a story about a cat.', 'What happened next?']);
    expect(saved.chatTurns[0]!.replies.base).toMatchObject({ text: side.text, status: 'done', tokens: 8, finishReason: 'length' });
    expect(saved.chatTurns[0]!.replies.base!.tokensPerSecond).toBe(side.tokensPerSecond);
    expect(saved.chatTurns[0]!.replies.adapter).toBeUndefined();

    expect(await api(server, 'chatDelete', { id: chatId })).toEqual({ deleted: true });
    expect(await api(server, 'chatDelete', { id: chatId })).toEqual({ deleted: false });
    expect((await api<SavedChatSummary[]>(server, 'chatList')).map((c) => c.id)).toEqual([other.chatId]);
    await expect(api(server, 'chatOpen', { id: chatId })).rejects.toThrow(/There is no saved chat/);
  });
});
