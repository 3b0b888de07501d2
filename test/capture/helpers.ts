// Test helpers for live capture: a temp `serve` with capture on, and a small OpenAI client
// over real HTTP (fetch on 127.0.0.1, no mocked transport).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveApp, type ServeHandle, type ServeOptions } from '../../src-main/api/serve-app.js';
import type { ApiEvents, EventName } from '../../src-shared/contract.js';
import { settingsPathFor } from '../../src-main/store/settings-file.js';
import { waitUntil } from '../helpers/deadlines.js';

export { TEST_TIMEOUT_MS } from '../helpers/deadlines.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const DEMO_MODEL = path.join(ROOT, 'resources/models/stories260K');

export function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-capture-'));
}

/** `serve` with capture on, on a fresh folder (or `dir` again: a restart on the same database). */
export async function startCapture(options: Partial<ServeOptions> = {}, settings: Record<string, unknown> = {}, dir = tempDir()): Promise<ServeHandle & { dir: string; dbPath: string }> {
  const dbPath = path.join(dir, 'test.db');
  if (Object.keys(settings).length) fs.writeFileSync(settingsPathFor(dbPath), JSON.stringify(settings));
  const server = await serveApp({ dbPath, port: 0, buildRenderer: false, capture: true, openaiModelDir: DEMO_MODEL, ...options });
  return Object.assign(server, { dir, dbPath });
}

export type Message = { role: string; content: string };

export interface ChatOptions {
  headers?: Record<string, string>;
  body?: Record<string, unknown>;
}

/** POST /v1/chat/completions (non-streaming): the parsed answer, or throws with the status. */
export async function chat(base: string, token: string, messages: Message[], options: ChatOptions = {}): Promise<{ content: string; body: any; status: number; headers: Headers }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...options.headers },
    body: JSON.stringify({ messages, max_tokens: 12, seed: 1, ...options.body }),
  });
  const body = await res.json();
  return { content: body?.choices?.[0]?.message?.content ?? '', body, status: res.status, headers: res.headers };
}

/** The same with stream: true: the first choice's concatenated deltas and the raw events. */
export async function chatStream(base: string, token: string, messages: Message[], options: ChatOptions = {}): Promise<{ content: string; events: string[] }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...options.headers },
    body: JSON.stringify({ messages, max_tokens: 12, seed: 1, stream: true, ...options.body }),
  });
  if (res.status !== 200) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const events = (await res.text())
    .split('\n\n')
    .filter(Boolean)
    .map((b) => b.replace(/^data: /, ''));
  let content = '';
  for (const e of events) {
    if (e === '[DONE]') continue;
    const choice = JSON.parse(e).choices?.[0];
    if ((choice?.index ?? 0) === 0) content += choice?.delta?.content ?? '';
  }
  return { content, events };
}

/**
 * The three captured chats the background-loop tests train on: each an opener, the reply, and
 * the user's reaction. The split rule holds 'heldout' out (sha256 gives it 8, below 10), so a
 * run trains on exactly 'happy' (+1 from the heuristic judge) and 'unhappy' (−1).
 */
export async function talkThreeChats(server: Pick<ServeHandle, 'url' | 'token'>): Promise<void> {
  const talk = async (id: string, opener: string, reaction: string) => {
    const first = [{ role: 'user', content: opener }];
    const r1 = await chat(`${server.url}v1`, server.token, first, { headers: { 'X-Session-Id': id } });
    await chat(`${server.url}v1`, server.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: reaction }], { headers: { 'X-Session-Id': id } });
  };
  await talk('heldout', 'Tell me a story about a bird.', 'Perfect, thanks!');
  await talk('happy', 'Tell me a story about a dog.', 'Perfect, thanks! That was great.');
  await talk('unhappy', 'Tell me a story about a cat.', 'No, that is wrong. I asked for a short one.');
}

export { api } from '../helpers/api.js';

export function collect<E extends EventName>(server: ServeHandle, name: E): ApiEvents[E][] {
  const out: ApiEvents[E][] = [];
  server.events.subscribe((n: EventName, payload) => {
    if (n === name) out.push(payload as ApiEvents[E]);
  });
  return out;
}

/** Polls `fn` until it is truthy: a wait on a state, whose deadline only catches a hang (test/helpers/deadlines.ts). */
export const waitFor = <T>(what: string, fn: () => T | Promise<T>): Promise<NonNullable<T>> => waitUntil(what, fn);

/** A loopback port nothing listens on (bound, then released). */
export async function refusedPort(): Promise<number> {
  const net = await import('node:net');
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}
