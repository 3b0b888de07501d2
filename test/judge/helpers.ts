// Test helpers for the judge and the OpenAI-compatible endpoint: a workspace with
// hand-built conversations, and a scripted OpenAI-compatible HTTP server — a real server on
// 127.0.0.1 whose answers the test chooses (for the vote rules, retries, garbage, hangs).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { ImportedConversation, Role } from '../../src-shared/types.js';
import { Workspace } from '../../src-main/workspace/workspace.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const DEMO_MODEL = path.join(ROOT, 'resources/models/stories260K');

export function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-judge-'));
}

/**
 * A copy of the demo model (same folder name, so the same model id) whose config.json claims
 * `positions` positions: the judge's prompts (about 700 tokens) outgrow its real 512, which the
 * endpoint rightly refuses. RoPE computes past 512 all the same; the votes are garbage either way.
 */
export function demoModelWithPositions(positions: number): string {
  const dir = path.join(tempDir(), 'stories260K');
  fs.cpSync(DEMO_MODEL, dir, { recursive: true });
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, max_position_embeddings: positions }));
  return dir;
}

function conversation(id: string, turns: [Role, string][]): ImportedConversation {
  return { externalId: id, title: id, turns: turns.map(([role, text]) => ({ role, text })), alternatives: [], metadata: {}, warnings: [] };
}

/** A sorting conversation: 3 samples (docs/design.md §Samples and next states). */
export const SORTING: [Role, string][] = [
  ['system', 'You are a helpful coding assistant.'],
  ['user', 'Write me a function to sort a list in Python.'],
  ['assistant', 'function sortList(list) { return [...list].sort(); }'],
  ['user', 'No, I said Python not JavaScript. Please use Python.'],
  ['assistant', 'def sort_list(items):\n    return sorted(items)'],
  ['user', 'Perfect, thanks! Can you also add a reverse parameter?'],
  ['assistant', 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)'],
  ['user', 'Great, exactly what I needed!'],
];

/** `n` two-reply chats: 2n samples. */
export function manyChats(n: number): ImportedConversation[] {
  return Array.from({ length: n }, (_, i) =>
    conversation(`chat-${String(i).padStart(3, '0')}`, [
      ['user', `Question ${i}: what is ${i} + ${i}?`],
      ['assistant', `It is ${2 * i}.`],
      ['user', 'Thanks! And times two?'],
      ['assistant', `${4 * i}.`],
      ['user', 'Great.'],
    ]),
  );
}

/** A fresh database file holding `conversations`; returns the open workspace. */
export async function workspaceWith(conversations: ImportedConversation[], dbPath = path.join(tempDir(), 'test.db')): Promise<Workspace> {
  const ws = await Workspace.open(dbPath, { persist: { debounceMs: 20, maxWaitMs: 100 } });
  const sha256 = createHash('sha256').update(JSON.stringify(conversations)).digest('hex');
  await ws.importExport({ path: 'test.jsonl', format: 'openai', sha256, warnings: [], conversations: () => conversations });
  return ws;
}

export function sortingWorkspace(): Promise<Workspace> {
  return workspaceWith([conversation('sort', SORTING)]);
}

export interface ScriptedReply {
  status?: number;
  /** A string body is sent as is; anything else as JSON. */
  body?: unknown;
  /** The content of a well-formed chat completion (ignored when `body` is given). */
  content?: string;
  delayMs?: number;
  /** Accept the request and never answer. */
  hang?: boolean;
  headers?: Record<string, string>;
}

export interface ScriptedServer {
  baseUrl: string;
  port: number;
  /** Every request body received, in arrival order, with its headers. */
  requests: { body: any; headers: http.IncomingHttpHeaders }[];
  maxInFlight: number;
  close(): Promise<void>;
}

/** A real OpenAI-compatible server on 127.0.0.1 answering `script(body, n)` to the n-th request (from 0). */
export async function scriptedServer(script: (body: any, n: number) => ScriptedReply): Promise<ScriptedServer> {
  let inFlight = 0;
  const state = { requests: [] as ScriptedServer['requests'], maxInFlight: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: any = null;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = Buffer.concat(chunks).toString('utf8');
      }
      const n = state.requests.length;
      state.requests.push({ body, headers: req.headers });
      const reply = script(body, n);
      if (reply.hang) return; // accepted, never answered
      inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, inFlight);
      setTimeout(() => {
        inFlight--;
        const payload =
          reply.body !== undefined
            ? reply.body
            : { id: `x-${n}`, object: 'chat.completion', created: 0, model: body?.model, choices: [{ index: 0, message: { role: 'assistant', content: reply.content ?? '' }, finish_reason: 'stop' }] };
        res.writeHead(reply.status ?? 200, { 'Content-Type': 'application/json', ...reply.headers });
        res.end(typeof payload === 'string' ? payload : JSON.stringify(payload));
      }, reply.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    get requests() {
      return state.requests;
    },
    get maxInFlight() {
      return state.maxInFlight;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A port with nothing listening on it (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
