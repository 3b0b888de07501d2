// The capture log sheds its settled sessions (docs/design.md §Capture log rotation): once it
// passes its size limit, the records of sessions no request can join any more (closed,
// keyless, or not their key's latest segment) and idle for six hours move to an archive file,
// a stub each left where the session began; resolving requests afterwards is what it was; the
// database keeps every session across restarts, is rebuilt from the archive when lost, and a
// deleted archived session leaves the archive too; a rotation cut short leaves nothing behind
// (nor does a rewrite of the log killed mid-write).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CaptureLog, captureLogPathFor } from '../../src-main/capture/capture-log.js';
import type { CapturedMessage, CaptureRecord } from '../../src-main/capture/capture-records.js';
import { LiveSessions, RECENT_MS, transcriptHash } from '../../src-main/capture/capture-sessions.js';
import { CaptureArchive, rotateCaptureLog } from '../../src-main/capture/log-archive.js';
import { captureArchivePathFor } from '../../src-main/store/db-companions.js';
import { api, chat, startCapture, tempDir, TEST_TIMEOUT_MS, waitFor } from './helpers.js';

const HOUR = 60 * 60 * 1000;

/** A captured conversation of `turns` exchanges under `session`, the last at `at`, each request resending it so far. */
function conversation(session: string, turns: number, at: number, words = 'a story'): CaptureRecord[] {
  const records: CaptureRecord[] = [];
  const messages: CapturedMessage[] = [];
  for (let k = 0; k < turns; k++) {
    messages.push({ role: 'user', content: `${session}: tell me ${words}, part ${k}.` });
    const id = `${session}-${k}`;
    const when = at - (turns - 1 - k) * 1000;
    records.push({ v: 1, t: 'request', id, session, seq: k, kind: 'main', at: when, messages: [...messages] });
    const reply = `${session} reply ${k}`;
    records.push({ v: 1, t: 'reply', id, session, at: when, reply: { content: reply, toolCalls: [], finishReason: 'stop' }, servedBy: 'upstream', model: 'm', modelDir: null, rollout: null, completionId: `c-${id}` });
    messages.push({ role: 'assistant', content: reply });
  }
  return records;
}

const close = (session: string, at: number): CaptureRecord => ({ v: 1, t: 'close', session, at });
const lines = (file: string) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const allText = (dir: string): string =>
  fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => fs.readFileSync(path.join(e.parentPath, e.name), 'latin1')).join('\n');

describe('which sessions are settled', () => {
  it('those idle for RECENT_MS; a key’s open latest segment with what continues it', () => {
    const s = new LiveSessions();
    const old = 1e12;
    for (const r of [
      ...conversation('capture:done', 2, old), close('capture:done', old),
      ...conversation('capture:live-20260101000000-abcdef', 2, old),
      ...conversation('capture:ann', 2, old), ...conversation('capture:ann#2', 2, old),
      ...conversation('capture:bob', 2, old),
      ...conversation('capture:recent', 1, old + 5 * HOUR), close('capture:recent', old + 5 * HOUR),
    ]) s.apply(r);
    const now = old + 7 * HOUR;
    const settled = s.settled(now);
    expect([...settled.keys()].sort()).toEqual(['capture:ann', 'capture:ann#2', 'capture:bob', 'capture:done', 'capture:live-20260101000000-abcdef']);
    // Closed, superseded or keyless: nothing joins them any more.
    for (const id of ['capture:ann', 'capture:done', 'capture:live-20260101000000-abcdef']) expect(settled.get(id)).toBeUndefined();
    // bob's next request begins with its last request (user 0, reply 0, user 1) and reply 1; user 0 was sent a second before the rest.
    const bob = [{ role: 'user', content: 'capture:bob: tell me a story, part 0.' }, { role: 'assistant', content: 'capture:bob reply 0' }, { role: 'user', content: 'capture:bob: tell me a story, part 1.' }, { role: 'assistant', content: 'capture:bob reply 1' }];
    expect(settled.get('capture:bob')).toEqual({ messages: 4, transcript: transcriptHash(bob), stamps: [[old - 1000, 1], [old, 2]] });
    expect([...s.settled(old + RECENT_MS).keys()]).toEqual([]);
  });
});

describe('rotating the log', () => {
  it('moves the settled sessions whole to an archive file, a stub each where it began, and resolves requests as before', () => {
    const dir = tempDir();
    const old = 1e12;
    const records = [
      ...conversation('capture:ann', 3, old), close('capture:ann', old),
      ...conversation('capture:bob', 2, old + 2 * HOUR),
      ...conversation('capture:ann#2', 2, old + 2 * HOUR),
      ...conversation('capture:live-20260101000000-abcdef', 2, old),
    ];
    const file = path.join(dir, 'db.capture-log.jsonl');
    const log = CaptureLog.open(file);
    for (const r of records) log.append(r);
    const before = new LiveSessions();
    for (const r of log.read().records) before.apply(r);
    const archive = new CaptureArchive(path.join(dir, 'archive'));
    const settled = before.settled(old + 7 * HOUR);
    expect([...settled.keys()].sort()).toEqual(['capture:ann', 'capture:live-20260101000000-abcdef']);
    const stubs = rotateCaptureLog(log, archive, settled);
    expect(stubs.map((s) => [s.session, s.nextSeq, s.conversation])).toEqual([['capture:ann', 3, true], ['capture:live-20260101000000-abcdef', 2, true]]);
    // The archive file holds those sessions' records as they were; the log, the others and a stub in each one's place.
    const archived = archive.read(stubs[0]!.file).records;
    expect(archived).toEqual(records.filter((r) => 'session' in r && settled.has(r.session)));
    expect(log.read().records.map((r) => (r.t === 'archived' ? `stub ${r.session}` : `${r.t} ${'session' in r ? r.session : ''}`))).toEqual([
      'stub capture:ann', 'request capture:bob', 'reply capture:bob', 'request capture:bob', 'reply capture:bob',
      'request capture:ann#2', 'reply capture:ann#2', 'request capture:ann#2', 'reply capture:ann#2',
      'stub capture:live-20260101000000-abcdef',
    ]);
    expect(fs.statSync(file).size).toBeLessThan(fs.statSync(path.join(archive.dir, stubs[0]!.file)).size);
    expect(fs.statSync(archive.dir).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(archive.dir, stubs[0]!.file)).mode & 0o777).toBe(0o600);

    // Read back after a restart, the log resolves every request as the whole log did.
    const after = new LiveSessions();
    for (const r of CaptureLog.open(file).read().records) after.apply(r);
    const ann2 = [...(records.filter((r) => r.t === 'request' && r.session === 'capture:ann#2').at(-1) as { messages: CapturedMessage[] }).messages, { role: 'assistant', content: 'capture:ann#2 reply 1' }, { role: 'user', content: 'more' }];
    const now = old + 8 * HOUR;
    for (const s of [before, after]) {
      expect(s.resolve('ann', ann2, 'main', now).sessionId).toBe('capture:ann#2');
      expect(s.resolve('ann', [{ role: 'user', content: 'new chat' }], 'main', now).sessionId).toBe('capture:ann#3');
    }
    expect(after.conversationCount).toBe(4);
    expect(after.conversationIds().sort()).toEqual(['capture:ann#2', 'capture:bob']);
    expect(after.archived().map((a) => a.id).sort()).toEqual(['capture:ann', 'capture:live-20260101000000-abcdef']);
  });

  it('a stub keeps its session’s sequence numbers: a later side request on its key takes the next one', () => {
    const dir = tempDir();
    const old = 1e12;
    const log = CaptureLog.open(path.join(dir, 'log.jsonl'));
    for (const r of [...conversation('capture:cara', 3, old), close('capture:cara', old)]) log.append(r);
    const s = new LiveSessions();
    for (const r of log.read().records) s.apply(r);
    for (const stub of rotateCaptureLog(log, new CaptureArchive(path.join(dir, 'a')), s.settled(old + 7 * HOUR))) s.apply(stub);
    expect(s.resolve('cara', [{ role: 'user', content: 'title this' }], 'side', old + 8 * HOUR)).toEqual({ sessionId: 'capture:cara', seq: 3 });
  });

  it('a key’s open session archived: after a restart a request that continues it joins it, its first times kept; one that does not starts the next segment', () => {
    const dir = tempDir();
    const old = 1e12;
    const file = path.join(dir, 'log.jsonl');
    const log = CaptureLog.open(file);
    for (const r of conversation('capture:dora', 2, old)) log.append(r);
    log.append({ v: 1, t: 'feedback', at: old, session: 'capture:dora', exchange: 'capture:dora-1', turn: 3, reward: 1, hint: null });
    const s = new LiveSessions();
    for (const r of log.read().records) s.apply(r);
    const stubs = rotateCaptureLog(log, new CaptureArchive(path.join(dir, 'a')), s.settled(old + 7 * HOUR));
    expect(stubs.map((stub) => [stub.session, stub.open?.messages])).toEqual([['capture:dora', 4]]);
    // Left in the log: the stub, and the feedback, which waits for its reply's next message.
    expect(log.read().records.map((r) => r.t)).toEqual(['archived', 'feedback']);
    expect(fs.readFileSync(file, 'utf8')).not.toContain('tell me');
    log.close();
    const replayed = () => {
      const live = new LiveSessions();
      for (const r of CaptureLog.open(file).read().records) live.apply(r);
      return live;
    };
    const soFar: CapturedMessage[] = [0, 1].flatMap((k) => [{ role: 'user', content: `capture:dora: tell me a story, part ${k}.` }, { role: 'assistant', content: `capture:dora reply ${k}` }]);
    const now = old + 30 * 24 * HOUR;
    expect(replayed().resolve('dora', [{ role: 'user', content: 'An edited start.' }, ...soFar.slice(1), { role: 'user', content: 'Go on.' }], 'main', now).sessionId).toBe('capture:dora#2');
    expect(replayed().resolve('dora', soFar, 'main', now).sessionId).toBe('capture:dora#2'); // adds nothing

    const after = replayed();
    const messages = [...soFar, { role: 'user', content: 'Go on.' }];
    // Trimmed text compares as before the archive did.
    expect(after.resolve('dora', messages.map((m) => ({ ...m, content: ` ${m.content}\n` })), 'side', now)).toEqual({ sessionId: 'capture:dora', seq: 2 });
    expect(after.resolve('dora', messages, 'main', now)).toEqual({ sessionId: 'capture:dora', seq: 3 });
    after.apply({ v: 1, t: 'request', id: 'dora-3', session: 'capture:dora', seq: 3, kind: 'main', at: now, messages });
    after.apply({ v: 1, t: 'reply', id: 'dora-3', session: 'capture:dora', at: now + 500, reply: { content: 'The end.', toolCalls: [], finishReason: 'stop' }, servedBy: 'upstream', model: 'm', modelDir: null, rollout: null });
    // The conversation is the continuing request's whole, each message stamped when first sent.
    const turns = after.conversation('capture:dora')!.turns;
    expect(turns.map((t) => t.text)).toEqual([...messages.map((m) => m.content), 'The end.']);
    expect(turns.map((t) => t.timestamp)).toEqual([old - 1000, old, old, now, now, now + 500].map((ms) => ms / 1000));
    // Continued, it is compared with its messages in memory again, and settles again with them.
    expect(after.resolve('dora', [...messages, { role: 'assistant', content: 'The end.' }, { role: 'user', content: 'Thanks.' }], 'main', now + 1000).sessionId).toBe('capture:dora');
    expect(after.settled(now + 2000 + 7 * HOUR).get('capture:dora')).toEqual({ messages: 6, transcript: transcriptHash([...messages, { role: 'assistant', content: 'The end.' }]), stamps: [[old - 1000, 1], [old, 2], [now, 2]] });
  });

  it('an archive file is written whole or not at all; a stub naming a path outside the archive is refused', () => {
    const dir = tempDir();
    const log = CaptureLog.open(path.join(dir, 'log.jsonl'));
    log.append({ v: 1, t: 'archived', session: 'capture:x', at: 1, file: '../../etc/passwd', nextSeq: 0, conversation: true } as CaptureRecord);
    const read = log.read();
    expect(read.records).toEqual([]);
    expect(read.skipped[0]).toMatch(/not a bare archive name/);
  });
});

describe('rotation in serve', () => {
  afterEach(() => vi.useRealTimers());

  it('at open: the database keeps every session across restarts, is rebuilt from the archive when lost, and a deleted session leaves the archive', async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, 'test.db');
    const logPath = captureLogPathFor(dbPath);
    const old = Date.now() - 2 * 24 * HOUR;
    const log = CaptureLog.open(logPath);
    for (const r of [
      ...conversation('capture:old-a', 3, old, 'about a lighthouse'), close('capture:old-a', old),
      ...conversation('capture:old-b', 2, old, 'about a windmill'), close('capture:old-b', old),
      ...conversation('capture:open', 2, old, 'about a river'),
    ]) log.append(r);
    log.append({ v: 1, t: 'feedback', at: old, session: 'capture:old-a', exchange: 'capture:old-a-1', turn: 3, reward: -1, hint: 'Shorter, please.' });
    // On the open session's last reply: no sample until its next message, which comes after the rotation.
    log.append({ v: 1, t: 'feedback', at: old, session: 'capture:open', exchange: 'capture:open-1', turn: 3, reward: 1, hint: null });
    log.close();
    const sizeBefore = fs.statSync(logPath).size;
    let server = await startCapture({ captureRotateAtBytes: 1 }, {}, dir);
    const sessionsOf = async () => (await api(server, 'listSessions', {})).sessions.map((s: { id: string }) => s.id).sort();
    const detail = async (id: string) => {
      const d = await api(server, 'getSession', { id });
      return { turns: d.turns.map((t: { role: string; text: string }) => `${t.role}: ${t.text}`), labels: d.samples.map((s: { responseTurn: number; label: { reward: number | null; hint: string | null } | null }) => [s.responseTurn, s.label?.reward ?? null, s.label?.hint ?? null]) };
    };
    try {
      expect(await sessionsOf()).toEqual(['capture:old-a', 'capture:old-b', 'capture:open']);
      const oldA = await detail('capture:old-a');
      expect(oldA.labels).toContainEqual([3, -1, 'Shorter, please.']);
      // All three idle for two days moved, the open one too: the log holds three stubs (and the feedback).
      expect(fs.statSync(logPath).size).toBeLessThan(sizeBefore / 2);
      expect(lines(logPath).filter((l) => l.t === 'archived').map((l) => l.session)).toEqual(['capture:old-a', 'capture:old-b', 'capture:open']);
      expect(fs.readFileSync(logPath, 'utf8')).not.toMatch(/lighthouse|river/);
      expect((await api(server, 'captureStatus')).sessions).toBe(3);
      // The open session goes on, its first turns' times as they were; the closed key starts its next segment.
      const times = async () => (await api(server, 'getSession', { id: 'capture:open' })).turns.map((t: { timestamp: number }) => t.timestamp);
      const openTimes = await times();
      const river = [...(await detail('capture:open')).turns.map((t: string) => ({ role: t.split(': ')[0]!, content: t.slice(t.indexOf(': ') + 2) })), { role: 'user', content: 'And then?' }];
      await chat(`${server.url}v1`, server.token, river, { headers: { 'X-Session-Id': 'open' } });
      await chat(`${server.url}v1`, server.token, [{ role: 'user', content: 'A new one.' }], { headers: { 'X-Session-Id': 'old-a' } });
      expect(await sessionsOf()).toEqual(['capture:old-a', 'capture:old-a#2', 'capture:old-b', 'capture:open']);
      const openAfter = await detail('capture:open');
      expect(openAfter.turns).toHaveLength(6);
      expect((await times()).slice(0, 3)).toEqual(openTimes.slice(0, 3));
      expect(openAfter.labels).toContainEqual([3, 1, null]);

      // A restart keeps the archived sessions in the database (the log still names them).
      await server.close();
      server = await startCapture({ captureRotateAtBytes: 1 }, {}, dir);
      expect(await sessionsOf()).toEqual(['capture:old-a', 'capture:old-a#2', 'capture:old-b', 'capture:open']);

      // The database lost: the archive gives the archived sessions back, their feedback with them.
      const exchanges = (await api(server, 'captureStatus')).exchanges;
      expect(exchanges).toBe(9);
      await server.close();
      for (const f of fs.readdirSync(dir)) if (f === 'test.db' || f.startsWith('test.db.journal')) fs.rmSync(path.join(dir, f));
      server = await startCapture({ captureRotateAtBytes: 1 }, {}, dir);
      expect(await sessionsOf()).toEqual(['capture:old-a', 'capture:old-a#2', 'capture:old-b', 'capture:open']);
      expect(await detail('capture:old-a')).toEqual(oldA);
      // The continued one from both: its first exchanges from the archive, the last from the log.
      expect(await detail('capture:open')).toEqual(openAfter);
      expect((await api(server, 'captureStatus')).exchanges).toBe(exchanges);

      // Deleting an archived session takes its text off the disk: the archive and the log.
      expect(allText(captureArchivePathFor(dbPath))).toContain('lighthouse');
      await api(server, 'deleteSession', { id: 'capture:old-a' });
      expect(allText(dir)).not.toContain('lighthouse');
      expect(allText(captureArchivePathFor(dbPath))).toContain('windmill');
      await server.close();
      server = await startCapture({ captureRotateAtBytes: 1 }, {}, dir);
      expect(await sessionsOf()).toEqual(['capture:old-a#2', 'capture:old-b', 'capture:open']);
    } finally {
      await server.close();
    }
  }, TEST_TIMEOUT_MS);

  it('as the log grows: a session settled since the start moves out after the request that crossed the limit', async () => {
    const server = await startCapture({ captureRotateAtBytes: 4000 });
    try {
      await chat(`${server.url}v1`, server.token, [{ role: 'user', content: 'A story about a harbour.' }], { headers: { 'X-Session-Id': 'first', 'X-Session-Done': '1' } });
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(Date.now() + 7 * HOUR);
      const logPath = captureLogPathFor(server.dbPath);
      for (let i = 0; fs.statSync(logPath).size < 4000; i++) {
        await chat(`${server.url}v1`, server.token, [{ role: 'user', content: `Another story, number ${i}. ${'x'.repeat(300)}` }], { headers: { 'X-Session-Id': `next-${i}` } });
      }
      await waitFor('the settled session to leave the log', () => lines(logPath).some((l) => l.t === 'archived'));
      expect(lines(logPath).filter((l) => l.t === 'archived').map((l) => l.session)).toEqual(['capture:first']);
      expect(fs.readFileSync(logPath, 'utf8')).not.toContain('harbour');
      expect((await api(server, 'listSessions', {})).sessions.map((s: { id: string }) => s.id)).toContain('capture:first');
    } finally {
      await server.close();
    }
  }, TEST_TIMEOUT_MS);

  it('an archive file a rotation cut short left behind (the log not yet rewritten) is removed at the next open', async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, 'test.db');
    const old = Date.now() - 2 * 24 * HOUR;
    const records = [...conversation('capture:cut', 2, old, 'about a glacier'), close('capture:cut', old)];
    const log = CaptureLog.open(captureLogPathFor(dbPath));
    for (const r of records) log.append(r);
    log.close();
    // As if killed after writing the archive file, before rewriting the log: the log has the session whole.
    const orphan = CaptureArchive.forDatabase(dbPath).write(records);
    // And a temporary file a killed writer left there (a pid no process has).
    const temp = path.join(captureArchivePathFor(dbPath), `${orphan}.tmp-999999999-1`);
    fs.writeFileSync(temp, 'partial');
    // And the log's own, from a rewrite killed mid-write.
    const logTemp = `${captureLogPathFor(dbPath)}.tmp-999999999-2`;
    fs.writeFileSync(logTemp, 'partial');
    const logged: string[] = [];
    const server = await startCapture({ log: (line) => logged.push(line) }, {}, dir);
    try {
      expect(fs.existsSync(path.join(captureArchivePathFor(dbPath), orphan))).toBe(false);
      expect([fs.existsSync(temp), fs.existsSync(logTemp)]).toEqual([false, false]);
      expect(logged.join('\n')).toContain(`removed 1 archive files no log line names (a rotation cut short): ${orphan}`);
      expect((await api(server, 'getSession', { id: 'capture:cut' })).turns).toHaveLength(4);
    } finally {
      await server.close();
    }
  }, TEST_TIMEOUT_MS);
});
