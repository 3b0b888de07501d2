// Capture size benchmark (`npm run bench:capture-log`): one agent session recorded by live
// capture, each request resending the conversation so far (a tool call and its 4 KB output a
// turn), as the capture log writes it (each record as what it adds to its session's last one,
// docs/design.md §Capture log size) beside the same records written whole, as versions before
// did: bytes on disk, an append (with its fsync), reading the log back (what every start does);
// the database's rows, through the Workspace as live capture writes them; and rotation
// (docs/design.md §Capture log rotation): a log of --settled sessions idle for a day (half
// closed, half open) of --turns / 4 turns beside the active one, what a start reads and
// replays before and after they move to the archive, and the rotation's own time.
//
//   npm run bench:capture-log [-- --turns 200 --tool-bytes 4000 --settled 20]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CaptureLog, readCaptureLog } from '../src-main/capture/capture-log.js';
import type { CapturedMessage, CaptureRecord, ReplyRecord, RequestRecord } from '../src-main/capture/capture-records.js';
import { LiveSessions } from '../src-main/capture/capture-sessions.js';
import { CaptureArchive, rotateCaptureLog } from '../src-main/capture/log-archive.js';
import { Workspace } from '../src-main/workspace/workspace.js';

const { values } = parseArgs({ options: { turns: { type: 'string', default: '200' }, 'tool-bytes': { type: 'string', default: '4000' }, settled: { type: 'string', default: '20' } } });
const TURNS = Number(values.turns);
const TOOL_BYTES = Number(values['tool-bytes']);
const SETTLED = Number(values.settled);
const SESSION = 'capture:agent';

/** A session's records: request k resends everything so far; its reply calls a tool. */
function agentSession(session = SESSION, turns = TURNS, start = 1.7e12): CaptureRecord[] {
  const records: CaptureRecord[] = [];
  const messages: CapturedMessage[] = [{ role: 'system', content: 'You are a coding agent. Use the tools.' }, { role: 'user', content: 'Fix the failing test in src/.' }];
  for (let k = 0; k < turns; k++) {
    const id = `${session}-req-${k}`;
    records.push({ v: 1, t: 'request', id, session, seq: k, kind: 'main', at: start + k * 1000, messages: [...messages] });
    const call = { id: `call-${k}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `src/file-${k}.ts` }) } };
    const reply: ReplyRecord = {
      v: 1, t: 'reply', id, session, at: start + k * 1000 + 500, reply: { content: `Reading file ${k}.`, toolCalls: [call], finishReason: 'tool_calls' },
      servedBy: 'upstream', model: 'agent-model', modelDir: null, rollout: null, completionId: `chatcmpl-${k}`,
    };
    records.push(reply);
    messages.push({ role: 'assistant', content: `Reading file ${k}.`, tool_calls: [call] });
    messages.push({ role: 'tool', content: `// file ${k}\n${'const value = compute(input);\n'.repeat(Math.ceil(TOOL_BYTES / 30)).slice(0, TOOL_BYTES)}`, tool_call_id: call.id });
  }
  return records;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

function timeAppends(file: string, records: readonly CaptureRecord[], whole: boolean): number[] {
  const times: number[] = [];
  if (whole) {
    // As versions before wrote every record: the whole JSON line, then fsync.
    const fd = fs.openSync(file, 'a', 0o600);
    for (const r of records) {
      const t = performance.now();
      fs.writeSync(fd, JSON.stringify(r) + '\n');
      fs.fsyncSync(fd);
      times.push(performance.now() - t);
    }
    fs.closeSync(fd);
  } else {
    const log = CaptureLog.open(file);
    for (const r of records) {
      const t = performance.now();
      log.append(r);
      times.push(performance.now() - t);
    }
    log.close();
  }
  return times;
}

function timeReads(file: string, expected: number): number {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const { records } = readCaptureLog(file);
    times.push(performance.now() - t);
    if (records.length !== expected) throw new Error(`${file}: read ${records.length} records, wrote ${expected}`);
  }
  return median(times);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-bench-capture-'));
try {
  const records = agentSession();
  const conversation = (records.at(-2) as RequestRecord).messages.reduce((n, m) => n + m.content.length, 0);
  console.log(`one agent session: ${TURNS} turns, ${TOOL_BYTES} bytes of tool output a turn, ${mb(conversation)} of conversation text`);

  const shared = path.join(dir, 'shared.jsonl');
  const whole = path.join(dir, 'whole.jsonl');
  const sharedAppends = timeAppends(shared, records, false);
  const wholeAppends = timeAppends(whole, records, true);
  const [sharedSize, wholeSize] = [fs.statSync(shared).size, fs.statSync(whole).size];
  const [sharedRead, wholeRead] = [timeReads(shared, records.length), timeReads(whole, records.length)];
  if (JSON.stringify(readCaptureLog(shared).records) !== JSON.stringify(records)) throw new Error('the shared log does not read back as written');
  console.log(`log, shared: ${mb(sharedSize)}, append median ${median(sharedAppends).toFixed(2)} ms (last 20: ${median(sharedAppends.slice(-20)).toFixed(2)} ms), read ${sharedRead.toFixed(0)} ms`);
  console.log(`log, whole:  ${mb(wholeSize)}, append median ${median(wholeAppends).toFixed(2)} ms (last 20: ${median(wholeAppends.slice(-20)).toFixed(2)} ms), read ${wholeRead.toFixed(0)} ms`);
  console.log(`ratios: size ×${(wholeSize / sharedSize).toFixed(1)} smaller, read ×${(wholeRead / sharedRead).toFixed(1)} faster, last appends ×${(median(wholeAppends.slice(-20)) / median(sharedAppends.slice(-20))).toFixed(1)} faster`);

  // The database: each reply's exchange row and the conversation, as live capture applies them.
  const ws = await Workspace.open(path.join(dir, 'bench.db'));
  const sessions = new LiveSessions();
  const applyTimes: number[] = [];
  let wholeRowBytes = 0;
  for (const r of records) {
    sessions.apply(r);
    if (r.t !== 'reply') continue;
    const row = sessions.exchangeRow(r)!;
    wholeRowBytes += JSON.stringify(row.messages).length;
    const t = performance.now();
    ws.applyCapture([row], [sessions.conversation(SESSION)!], shared);
    applyTimes.push(performance.now() - t);
  }
  const stored = ws.captureExchanges(SESSION).reduce((n, x) => n + JSON.stringify(x.messages).length, 0);
  ws.close();
  const db = fs.statSync(path.join(dir, 'bench.db')).size;
  console.log(
    `database: ${mb(db)} on disk (the rows' messages whole would be ${mb(wholeRowBytes)}; read back whole ${mb(stored)}); a turn applied: median ${median(applyTimes).toFixed(1)} ms, last 20 ${median(applyTimes.slice(-20)).toFixed(1)} ms`,
  );

  // Rotation: the sessions idle for a day leave, half of them closed and half left open by a
  // client that names each chat (its X-Session-Id); the open agent session, active an hour ago, stays.
  const rotating = path.join(dir, 'rotating.jsonl');
  const log = CaptureLog.open(rotating);
  for (let i = 0; i < SETTLED; i++) {
    for (const r of agentSession(`capture:done-${i}`, Math.ceil(TURNS / 4), 1.7e12 - 86_400_000)) log.append(r);
    if (i % 2 === 0) log.append({ v: 1, t: 'close', session: `capture:done-${i}`, at: 1.7e12 - 86_400_000 + TURNS * 250 });
  }
  for (const r of records) log.append(r);
  /** What a start does with the log before the database: read it, and replay it into the live sessions. */
  const start = () => {
    const times: number[] = [];
    let live = new LiveSessions();
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      live = new LiveSessions();
      for (const r of CaptureLog.open(rotating).read().records) live.apply(r);
      times.push(performance.now() - t);
    }
    return { ms: median(times), live };
  };
  const before = { bytes: fs.statSync(rotating).size, ...start() };
  const t = performance.now();
  const stubs = rotateCaptureLog(log, new CaptureArchive(path.join(dir, 'archive')), before.live.settled(1.7e12 + TURNS * 1000 + 3_600_000));
  const rotateMs = performance.now() - t;
  const after = { bytes: fs.statSync(rotating).size, ...start() };
  if (stubs.length !== SETTLED || after.live.conversationCount !== SETTLED + 1) throw new Error(`rotation moved ${stubs.length} sessions of ${SETTLED}`);
  console.log(`rotation: ${SETTLED} idle sessions (half closed, half open) of ${Math.ceil(TURNS / 4)} turns and the open one: log ${mb(before.bytes)} → ${mb(after.bytes)}, a start's read and replay ${before.ms.toFixed(0)} → ${after.ms.toFixed(0)} ms (×${(before.ms / after.ms).toFixed(1)}); the rotation ${rotateMs.toFixed(0)} ms`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
