// Live capture writes its session again at every turn. The store remembers what it wrote last
// for a session (the exchange's messages, the turn and sample rows, the content hash's state
// after each turn) so that a turn costs what it adds, not the whole session again
// (docs/design.md §Capture log size). Whatever happens between turns, a rolled-back write, a
// changed context window, a deleted session, a client that rewrote its history, the database
// must end exactly as if the final conversation had been written once, and every exchange must
// read back with the messages it was sent with.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ImportedConversation, ImportedTurn } from '../../src-shared/types.js';
import { contentHash } from '../../src-main/store/content-hash.js';
import type { CaptureExchangeRow } from '../../src-main/store/capture-exchanges.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { conv, tempWorkspace } from './helpers.js';

const SESSION = 'capture:agent';
const LOG = '/tmp/capture-turns-test.jsonl';

interface Message {
  role: string;
  content: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** An agent session of `turns` requests, each resending everything so far; each reply calls a tool whose output follows it. */
function agentRequests(turns: number, rewriteAt = -1): { messages: Message[]; reply: Message }[] {
  const messages: Message[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Fix the failing test.' }];
  const out: { messages: Message[]; reply: Message }[] = [];
  for (let k = 0; k < turns; k++) {
    // A client that rewrites the reply before its last (a new object, other text): the session's
    // last sample, whose match hash changes (so the session's rows are written anew).
    if (k === rewriteAt) messages[2 * k - 2] = { ...messages[2 * k - 2]!, content: 'Reading that file again.' };
    const reply = { role: 'assistant', content: `Reading file ${k}.`, tool_calls: [{ id: `call-${k}`, type: 'function', function: { name: 'read', arguments: `{"n":${k}}` } }] };
    out.push({ messages: [...messages], reply });
    messages.push(reply, { role: 'tool', content: `file ${k}\n${'line\n'.repeat(50)}`, tool_call_id: `call-${k}` });
  }
  return out;
}

/** Request k as live capture hands it over: its exchange row and the conversation so far, every turn object new. */
function turnOf(requests: ReturnType<typeof agentRequests>, k: number): { row: CaptureExchangeRow; conversation: ImportedConversation } {
  const { messages, reply } = requests[k]!;
  const turns: ImportedTurn[] = [...messages, reply].map((m, i) => ({
    role: m.role as ImportedTurn['role'],
    text: m.content,
    ...(m.tool_calls ? { toolCalls: (m.tool_calls as { id: string; function: { name: string; arguments: string } }[]).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
    ...(m.tool_call_id ? { toolCallId: m.tool_call_id } : {}),
    // The reply is stamped with its own time; once resent, with the request's: the last turn changes.
    timestamp: i < messages.length ? Math.min(i, k) : k + 0.5,
  }));
  const row: CaptureExchangeRow = {
    id: `req-${k}`, sessionId: SESSION, seq: k, kind: 'main', at: k, replyTurn: messages.length, messages, reply: { content: reply.content, toolCalls: reply.tool_calls!, finishReason: 'tool_calls' },
    servedBy: 'upstream', model: 'agent', modelDir: null, rollout: null, completionId: `c-${k}`,
  };
  return { row, conversation: conv('agent', turns, { title: 'Fix the failing test.', createdAt: 0, metadata: { capture: { key: 'agent', keyed: true } } }) };
}

/** The session's rows in every table a capture write touches (labels without their times). */
function rows(ws: Workspace): Record<string, unknown[]> {
  const all = (sql: string) => ws.storage.all(sql, [SESSION]);
  return {
    session: all('SELECT format, external_id, title, created_at, metadata, content_hash, no_sample_reason FROM sessions WHERE id = ?'),
    turns: all('SELECT * FROM turns WHERE session_id = ? ORDER BY idx'),
    samples: all('SELECT * FROM samples WHERE session_id = ? ORDER BY response_turn'),
    labels: all('SELECT response_turn, reward, hint, source FROM labels WHERE session_id = ? ORDER BY response_turn'),
  };
}

/** A database that was handed only the final conversation, with the same label. */
async function writtenOnce(conversation: ImportedConversation, label = true): Promise<Record<string, unknown[]>> {
  const { ws } = await tempWorkspace();
  ws.applyCapture([], [conversation], LOG);
  if (label) ws.setLabel(SESSION, 2, { reward: -1, hint: 'Read the test first.' });
  const out = rows(ws);
  ws.close();
  return out;
}

/** Checks the session against the final conversation written once, and each exchange against what it was sent with. */
async function expectAsWrittenOnce(ws: Workspace, requests: ReturnType<typeof agentRequests>, label = true): Promise<void> {
  const last = turnOf(requests, requests.length - 1);
  expect(rows(ws)).toEqual(await writtenOnce(last.conversation, label));
  const stored = ws.captureExchanges(SESSION);
  expect(stored.map((x) => x.id)).toEqual(requests.map((_, k) => `req-${k}`));
  stored.forEach((x, k) => expect(x.messages).toEqual(requests[k]!.messages));
}

describe('a captured session written turn by turn', () => {
  it('ends as the final conversation written once, through a client that rewrote its history', async () => {
    const requests = agentRequests(12, 6);
    const { ws } = await tempWorkspace();
    requests.forEach((_, k) => {
      const { row, conversation } = turnOf(requests, k);
      ws.applyCapture([row], [conversation], LOG);
      if (k === 2) ws.setLabel(SESSION, 2, { reward: -1, hint: 'Read the test first.' });
    });
    await expectAsWrittenOnce(ws, requests);
    ws.close();
  });

  it('a turn whose transaction rolled back is written again whole, and the next ones after it', async () => {
    const requests = agentRequests(8);
    const { ws } = await tempWorkspace();
    requests.forEach((_, k) => {
      const { row, conversation } = turnOf(requests, k);
      if (k === 5) {
        // The store remembers what this write did, but the database does not keep it.
        expect(() => ws.storage.transaction(() => {
          ws.applyCapture([row], [conversation], LOG);
          throw new Error('disk full');
        })).toThrow('disk full');
      }
      ws.applyCapture([row], [conversation], LOG);
      if (k === 2) ws.setLabel(SESSION, 2, { reward: -1, hint: 'Read the test first.' });
    });
    await expectAsWrittenOnce(ws, requests);
    ws.close();
  });

  it('a context window changed between turns, and a session deleted and captured again', async () => {
    const requests = agentRequests(8);
    const { ws } = await tempWorkspace();
    requests.forEach((_, k) => {
      const { row, conversation } = turnOf(requests, k);
      if (k === 3) ws.setContextWindow({ lastTurns: 4 });
      if (k === 5) ws.setContextWindow({});
      if (k === 6) ws.deleteSession(SESSION);
      // After the delete, live capture hands over the exchanges again with the conversation.
      ws.applyCapture(k === 6 ? requests.slice(0, 7).map((_, j) => turnOf(requests, j).row) : [row], [conversation], LOG);
    });
    await expectAsWrittenOnce(ws, requests, false);
    ws.close();
  });
});

describe('the content hash remembered turn by turn', () => {
  const plain = (c: ImportedConversation) => createHash('sha256').update(JSON.stringify([c.title ?? null, c.createdAt ?? null, c.turns, c.alternatives, c.metadata])).digest('hex');

  it('is the whole conversation’s hash whatever changed since the last call', () => {
    const requests = agentRequests(6, 3);
    const versions = requests.map((_, k) => turnOf(requests, k).conversation);
    const last = versions.at(-1)!;
    const reordered = { ...last, turns: last.turns.map((t, i) => (i === 2 ? Object.assign({ text: t.text }, t) : t)) };
    const dated = { ...last, turns: last.turns.map((t, i) => (i === 1 ? ({ ...t, toolCalls: [{ toJSON: () => 'x' }] } as unknown as ImportedTurn) : t)) };
    const sequence: ImportedConversation[] = [...versions, { ...last, title: 'Renamed' }, { ...last, turns: last.turns.slice(0, 4) }, reordered, dated, { ...last, metadata: { capture: { key: 'other', keyed: true } } }, versions[1]!];
    for (const c of sequence) expect(contentHash(c, 'memo-test')).toBe(plain(c));
    for (const c of sequence) expect(contentHash(c)).toBe(plain(c));
  });
});
