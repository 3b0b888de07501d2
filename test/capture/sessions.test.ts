// The session rules of live capture on crafted records (src-main/capture/capture-sessions.ts): keys,
// prefix continuity, segments, side requests, closing, and the conversation a session
// stands for — and that replaying the same records gives the same state.
import { describe, expect, it } from 'vitest';
import { parseRecord, type CapturedMessage, type CaptureRecord } from '../../src-main/capture/capture-records.js';
import { LogPrefixes } from '../../src-main/capture/log-prefixes.js';
import { LiveSessions, RECENT_MS } from '../../src-main/capture/capture-sessions.js';

const u = (content: string): CapturedMessage => ({ role: 'user', content });
const a = (content: string): CapturedMessage => ({ role: 'assistant', content });

/** Resolves, logs and applies one exchange the way the service does; returns its session. */
function exchange(s: LiveSessions, log: CaptureRecord[], key: string | null, messages: CapturedMessage[], reply: string | null, kind: 'main' | 'side' = 'main', at = 1000): string {
  const { sessionId, seq } = s.resolve(key, messages, kind, at);
  const id = `r${log.length}`;
  const records: CaptureRecord[] = [{ v: 1, t: 'request', id, session: sessionId, seq, kind, at, messages }];
  if (reply !== null) {
    records.push({ v: 1, t: 'reply', id, session: sessionId, at: at + 1, reply: { content: reply, toolCalls: [], finishReason: 'stop' }, servedBy: 'upstream', model: 'm', modelDir: null, rollout: null });
  }
  for (const r of records) {
    log.push(r);
    s.apply(r);
  }
  return sessionId;
}

describe('session resolution', () => {
  it('keeps a keyed conversation while it continues, and starts a numbered segment when it does not', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    const first = exchange(s, log, 'k', [u('hi')], 'hello');
    expect(first).toBe('capture:k');
    expect(exchange(s, log, 'k', [u('hi'), a('hello'), u('more')], 'sure')).toBe('capture:k');
    // An edited history (the reply changed) does not continue: a new segment keeps both.
    expect(exchange(s, log, 'k', [u('hi'), a('HELLO?'), u('more')], 'ok')).toBe('capture:k#2');
    expect(s.conversation('capture:k')!.turns.map((t) => t.text)).toEqual(['hi', 'hello', 'more', 'sure']);
    expect(s.conversation('capture:k#2')!.turns.map((t) => t.text)).toEqual(['hi', 'HELLO?', 'more', 'ok']);
  });

  it('matches keyless requests by prefix continuity with the most recent open session, within RECENT_MS', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    const one = exchange(s, log, null, [u('story?')], 'once', 'main', 1000);
    const two = exchange(s, log, null, [u('story?')], 'twice', 'main', 2000); // same opener, another chat
    expect(two).not.toBe(one);
    expect(exchange(s, log, null, [u('story?'), a('twice'), u('thanks')], 'yw', 'main', 3000)).toBe(two);
    expect(exchange(s, log, null, [u('story?'), a('once'), u('thanks')], 'yw', 'main', 4000)).toBe(one);
    // Trimmed text compares equal (clients often strip the reply).
    expect(exchange(s, log, null, [u('story?'), a('once'), u('thanks'), a(' yw\n'), u('again')], null, 'main', 5000)).toBe(one);
    // Too late: a new session.
    expect(exchange(s, log, null, [u('story?'), a('twice'), u('thanks'), a('yw'), u('bye')], null, 'main', 3001 + RECENT_MS + 1)).not.toBe(two);
  });

  it('side requests join the named session without touching its conversation, or stand alone', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    exchange(s, log, 'k', [u('hi')], 'hello');
    expect(exchange(s, log, 'k', [u('title for this chat?')], 'Greetings', 'side')).toBe('capture:k');
    expect(s.conversation('capture:k')!.turns.map((t) => t.text)).toEqual(['hi', 'hello']);
    const alone = exchange(s, log, null, [u('summarise')], 'done', 'side');
    expect(alone).toMatch(/^capture:side-/);
    expect(s.conversation(alone)).toBeNull();
  });

  it('a closed session takes no more turns; a request without a reply still makes the next state', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    exchange(s, log, 'k', [u('hi')], 'hello');
    exchange(s, log, 'k', [u('hi'), a('hello'), u('No, in French.')], null); // the reply never came
    const conv = s.conversation('capture:k')!;
    expect(conv.turns.map((t) => [t.role, t.text])).toEqual([['user', 'hi'], ['assistant', 'hello'], ['user', 'No, in French.']]);
    const close: CaptureRecord = { v: 1, t: 'close', session: 'capture:k', at: 5 };
    log.push(close);
    s.apply(close);
    expect(exchange(s, log, 'k', [u('hi'), a('hello'), u('No, in French.'), a('Bonjour'), u('merci')], 'de rien')).toBe('capture:k#2');
  });

  it('replaying the log gives the same sessions and conversations', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    exchange(s, log, 'k', [u('hi')], 'hello');
    exchange(s, log, null, [u('yo')], 'hey');
    exchange(s, log, 'k', [u('hi'), a('hello'), u('bye')], 'ciao');
    const replayed = new LiveSessions();
    // Through the log's lines: 'k''s second request is written as the part it shares with its first.
    const writer = new LogPrefixes();
    const reader = new LogPrefixes();
    const versions: number[] = [];
    for (const r of log) {
      const { line, record } = writer.encode(r);
      writer.note(record);
      versions.push(line.v);
      replayed.apply(reader.decode(parseRecord(JSON.parse(JSON.stringify(line)))));
    }
    expect(versions.filter((v) => v === 2)).toHaveLength(1);
    expect(replayed.conversationIds().sort()).toEqual(s.conversationIds().sort());
    for (const id of s.conversationIds()) expect(replayed.conversation(id)).toEqual(s.conversation(id));
    // …and continues numbering where the live process was.
    expect(replayed.resolve('k', [u('new chat')], 'main', 9000).sessionId).toBe('capture:k#2');
  });
});

describe('the tools a request offered', () => {
  const TOOLS = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
  const OTHER_TOOLS = [{ type: 'function', function: { name: 'search', parameters: { type: 'object' } } }];

  it('are written once while a session resends them, read back whole, and the conversation offers its latest request\'s', () => {
    const s = new LiveSessions();
    const log: CaptureRecord[] = [];
    const request = (messages: CapturedMessage[], tools: unknown[] | undefined, reply: string) => {
      const { sessionId, seq } = s.resolve('k', messages, 'main', 1000);
      const id = `r${log.length}`;
      const records: CaptureRecord[] = [
        { v: 1, t: 'request', id, session: sessionId, seq, kind: 'main', at: 1000, messages, ...(tools ? { tools } : {}) },
        { v: 1, t: 'reply', id, session: sessionId, at: 1001, reply: { content: reply, toolCalls: [], finishReason: 'stop' }, servedBy: 'upstream', model: 'm', modelDir: null, rollout: null },
      ];
      for (const r of records) {
        log.push(r);
        s.apply(r);
      }
    };
    request([u('weather?')], TOOLS, 'sunny');
    request([u('weather?'), a('sunny'), u('and tomorrow?')], TOOLS, 'rain');
    expect(s.conversation('capture:k')!.metadata).toEqual({ capture: { key: 'k', keyed: true }, tools: TOOLS });
    request([u('weather?'), a('sunny'), u('and tomorrow?'), a('rain'), u('search it')], OTHER_TOOLS, 'found');
    expect(s.conversation('capture:k')!.metadata.tools).toEqual(OTHER_TOOLS);
    // The two earlier replies were written with the first list: each keeps it by its turn.
    expect(s.conversation('capture:k')!.metadata.toolsByTurn).toEqual({ 1: TOOLS, 3: TOOLS });

    const writer = new LogPrefixes();
    const reader = new LogPrefixes();
    const lines = log.map((r) => {
      const { line, record } = writer.encode(r);
      writer.note(record);
      return JSON.parse(JSON.stringify(line)) as Record<string, unknown>;
    });
    const requests = lines.filter((l) => l.t === 'request');
    expect(requests.map((l) => [l.v, l.tools ?? null, l.sameTools ?? null])).toEqual([[1, TOOLS, null], [2, null, true], [2, OTHER_TOOLS, null]]);
    const read = lines.map((l) => reader.decode(parseRecord(l)));
    expect(read).toEqual(log);
  });

  it('a line that claims its base\'s tools where the base offered none is refused', () => {
    const reader = new LogPrefixes();
    reader.decode(parseRecord({ v: 1, t: 'request', id: 'a', session: 's', seq: 0, kind: 'main', at: 1, messages: [u('hi')] }));
    expect(() => reader.decode(parseRecord({ v: 2, t: 'request', id: 'b', session: 's', seq: 1, kind: 'main', at: 2, base: 'a', kept: 1, sameTools: true, messages: [] })))
      .toThrow(/base request a offered none/);
    expect(() => parseRecord({ v: 1, t: 'request', id: 'c', session: 's', seq: 0, kind: 'main', at: 1, messages: [], tools: 'get_weather' })).toThrow(/tools must be a list/);
    expect(() => parseRecord({ v: 1, t: 'request', id: 'c', session: 's', seq: 0, kind: 'main', at: 1, messages: [], sameTools: true })).toThrow(/sameTools malformed/);
  });
});

describe('log records', () => {
  it('are checked and a bad one is named', () => {
    expect(() => parseRecord({ v: 3, t: 'request', at: 1 })).toThrow(/unknown version 3/);
    expect(() => parseRecord({ v: 2, t: 'close', at: 1, session: 's' })).toThrow(/unknown version 2/);
    expect(() => parseRecord({ v: 1, t: 'request', at: 1, id: 'x', session: 's', seq: 0, kind: 'main', messages: [{ role: 'user' }] })).toThrow(/messages malformed/);
    expect(() => parseRecord({ v: 1, t: 'gossip', at: 1 })).toThrow(/unknown type "gossip"/);
  });
});
