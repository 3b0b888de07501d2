// The capture log and the database grow with what each turn adds, not with the whole
// conversation again (docs/design.md §Capture log size): a request that begins as its
// session's last one did is written as that shared part's length and the rest, and read back
// whole; the same for a rollout's prompt ids; compaction, a reopened log and a log written whole
// before all read back what was appended; a line whose base is gone (or another session's) is
// skipped and named; a write a full disk cut short does not take the next record with it.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { CaptureLog, captureLogPathFor } from '../../src-main/capture/capture-log.js';
import type { CapturedMessage, CaptureRecord, ReplyRecord, RequestRecord } from '../../src-main/capture/capture-records.js';
import { loadSqlJs } from '../../src-main/store/sql-js.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { chat, startCapture, tempDir, TEST_TIMEOUT_MS } from './helpers.js';

const TEXT = 'x'.repeat(1000);

/** A session of `turns` requests, each resending the conversation so far, and their replies with rollouts. */
function session(id: string, turns: number, at = 0): CaptureRecord[] {
  const records: CaptureRecord[] = [];
  const messages: CapturedMessage[] = [{ role: 'system', content: 'Be brief.' }];
  let promptIds: number[] = [];
  for (let k = 0; k < turns; k++) {
    messages.push({ role: 'user', content: `${id} turn ${k}: ${TEXT}` });
    const rid = `${id}-${k}`;
    records.push({ v: 1, t: 'request', id: rid, session: `capture:${id}`, seq: k, kind: 'main', at: at + k, messages: [...messages] });
    // The prompt: the last one, its reply's tokens, then the new message's ids.
    const tokens = [k + 1, k + 2, k + 3];
    promptIds = [...promptIds, ...Array.from({ length: 50 }, (_, i) => 1000 + k * 50 + i)];
    const reply = `${id} reply ${k}`;
    records.push({
      v: 1, t: 'reply', id: rid, session: `capture:${id}`, at: at + k, reply: { content: reply, toolCalls: [], finishReason: 'stop' }, servedBy: 'local',
      model: 'm', modelDir: '/m', rollout: { promptIds, tokens, logprobs: [-1, -2, -3] }, completionId: `c-${rid}`,
    });
    promptIds = [...promptIds, ...tokens];
    messages.push({ role: 'assistant', content: reply });
  }
  return records;
}

const lines = (file: string) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

describe('the capture log on disk', () => {
  it('writes a long session as what each turn adds, and reads it back whole', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    const records = session('long', 40);
    const kept = records.map((r) => log.append(r));
    const read = log.read().records;
    expect(read).toEqual(records);
    // In memory, as appended and as read, a request's earlier messages are its base's own objects.
    for (const held of [kept, read]) {
      const [first, second] = held.filter((r): r is RequestRecord => r.t === 'request');
      expect(second!.messages[1]).toBe(first!.messages[1]);
    }
    // Written whole, the 40 requests would hold 20 × the conversation; as written, about once.
    const whole = records.reduce((n, r) => n + JSON.stringify(r).length + 1, 0);
    const conversation = (records.at(-2) as RequestRecord).messages.reduce((n, m) => n + m.content.length, 0);
    const size = fs.statSync(file).size;
    expect(size).toBeLessThan(2 * conversation);
    expect(whole / size).toBeGreaterThan(10);
    // Every request after the first and every rollout after the first are written shared.
    expect(lines(file).map((l) => `${l.t}${l.v}`)).toEqual(records.map((r, i) => `${r.t}${i < 2 ? 1 : 2}`));
    log.close();
  });

  it('a reopened log goes on sharing with what it holds; a log written whole before reads the same', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const records = session('s', 6);
    // An earlier version wrote every record whole.
    fs.writeFileSync(file, records.slice(0, 6).map((r) => JSON.stringify(r) + '\n').join(''));
    const log = CaptureLog.open(file);
    expect(log.read().records).toEqual(records.slice(0, 6));
    for (const r of records.slice(6)) log.append(r);
    log.close();
    expect(lines(file).map((l) => l.v)).toEqual([1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
    expect(CaptureLog.open(file).read().records).toEqual(records);
  });

  it('compaction keeps the other sessions readable, still shared', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    const a = session('a', 5);
    const b = session('b', 5);
    for (let i = 0; i < a.length; i++) {
      log.append(a[i]!);
      log.append(b[i]!);
    }
    expect(log.compact((r) => (r as { session?: string }).session !== 'capture:a')).toEqual({ removed: a.length });
    expect(log.read().records).toEqual(b);
    expect(lines(file).filter((l) => l.v === 2)).toHaveLength(b.length - 2);
    const more = session('b', 7).slice(b.length);
    for (const r of more) log.append(r);
    expect(CaptureLog.open(file).read().records).toEqual([...b, ...more]);
    log.close();
  });

  it('a line whose base is not in the log is skipped and named; the lines that do not need it are kept', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    const records = session('s', 3);
    for (const r of [...records, ...session('t', 1)]) log.append(r);
    log.close();
    // A hand edit drops the first request: the second, shared with it, cannot be read.
    const text = fs.readFileSync(file, 'utf8').split('\n');
    fs.writeFileSync(file, text.slice(1).join('\n'));
    const { records: read, skipped } = CaptureLog.open(file).read();
    expect(skipped[0]).toMatch(/capture-log\.jsonl:2: capture record: its base request s-0 is not in the log/);
    expect(read.map((r) => `${r.t} ${(r as ReplyRecord).id}`)).toContain('request t-0');
    expect(read.some((r) => r.t === 'request' && r.id === 's-1')).toBe(false);
  });
});

describe('the capture log against bad lines and a full disk', () => {
  it('a line whose base is another session’s request is skipped and named', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    for (const r of session('s', 2)) log.append(r);
    log.close();
    const [first] = lines(file);
    const forged = { ...first, v: 2, id: 'forged', session: 'capture:other', base: first.id, kept: 1, messages: [] };
    fs.appendFileSync(file, JSON.stringify(forged) + '\n');
    const { records, skipped } = CaptureLog.open(file).read();
    expect(skipped).toEqual([expect.stringMatching(/:5: capture record: its base request s-0 is not in the log under session capture:other/)]);
    expect(records).toHaveLength(4);
  });

  it('a write that fails halfway leaves a torn line the next record does not join', () => {
    const file = path.join(tempDir(), 'capture-log.jsonl');
    const log = CaptureLog.open(file);
    const [r0, p0, r1, p1] = session('s', 2);
    log.append(r0!);
    const write = fs.writeSync;
    const spy = vi.spyOn(fs, 'writeSync').mockImplementationOnce(((fd: number, buffer: Buffer) => {
      write(fd, buffer, 0, Math.floor(buffer.length / 2));
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    }) as unknown as typeof fs.writeSync);
    expect(() => log.append(p0!)).toThrow(/ENOSPC/);
    spy.mockRestore();
    // The failed reply was never acknowledged; the next request shares with what the log really holds.
    log.append(r1!);
    const { records, skipped } = log.read();
    expect(skipped).toHaveLength(1);
    expect(records).toEqual([r0, r1]);
    log.append(p1!);
    expect(CaptureLog.open(file).read().records).toEqual([r0, r1, p1]);
    log.close();
  });
});

describe('a captured session through serve', () => {
  it('the log and the database keep each turn once; a database rebuilt from the log has the same exchanges', async () => {
    const server = await startCapture();
    const base = `${server.url}v1`;
    const messages: { role: string; content: string }[] = [];
    for (let k = 0; k < 8; k++) {
      messages.push({ role: 'user', content: `Turn ${k}: and then the fox?` });
      const { content, status } = await chat(base, server.token, messages, { headers: { 'X-Session-Id': 'fox' }, body: { max_tokens: 8 } });
      expect(status).toBe(200);
      messages.push({ role: 'assistant', content });
    }
    const before = (server.service.currentWorkspace as Workspace).captureExchanges('capture:fox');
    expect(before).toHaveLength(8);
    // Each row has the messages its request sent, and the local model's prompt ids.
    before.forEach((x, k) => expect(x.messages).toEqual(messages.slice(0, 2 * k + 1)));
    expect(before.every((x) => x.rollout && x.rollout.promptIds.length > 0)).toBe(true);
    const { dbPath, dir } = server;
    await server.close();

    const logLines = lines(captureLogPathFor(dbPath));
    expect(logLines.filter((l) => l.t === 'request').map((l) => l.v)).toEqual([1, 2, 2, 2, 2, 2, 2, 2]);
    expect(logLines.filter((l) => l.t === 'reply' && l.rollout?.promptBase)).toHaveLength(7);
    const SQL = await loadSqlJs();
    const db = new SQL.Database(fs.readFileSync(dbPath));
    const [stored] = db.exec("SELECT SUM(length(messages)), COUNT(messages_base) FROM capture_exchanges WHERE session_id = 'capture:fox'")[0]!.values;
    db.close();
    const sent = JSON.stringify(messages).length;
    expect(stored![0]).toBeLessThan(1.5 * sent);
    expect(stored![1]).toBe(7);

    // The database is rebuilt from the log alone: the same exchanges, prompt ids included.
    fs.rmSync(dbPath);
    const again = await startCapture({}, {}, dir);
    try {
      const ws = again.service.currentWorkspace as Workspace;
      expect(ws.captureExchanges('capture:fox')).toEqual(before);
      expect(ws.listSessions().sessions.find((s) => s.id === 'capture:fox')?.turnCount).toBe(16);
    } finally {
      await again.close();
    }
  }, TEST_TIMEOUT_MS);
});
