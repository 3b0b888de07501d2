/**
 * Shared prefixes in the capture log (docs/design.md §Capture log size).
 *
 * A chat client sends the whole conversation with every request, and the local model's prompt
 * is that conversation again as tokens. Written whole, a session of n turns puts n²/2 messages
 * (and prompt tokens) in the log: an agent's 200 turns with 4 KB tool outputs come to about
 * 80 MB for what is 800 KB of conversation. So a record that begins as its session's previous
 * one did is written as that shared part's length and what follows it:
 *
 *   request  {"v":2, …, "base": <the session's last main request id>, "kept": k, "messages": [the rest]}
 *            its messages are the base's first k messages, then the rest;
 *   reply    {"v":2, …, "rollout": {"promptBase": <the session's last reply with a rollout>,
 *            "promptKept": k, "promptIds": [the rest], …}}
 *            its prompt ids are the first k of the base's prompt ids followed by its tokens, then the rest.
 *
 * The rest of the app never sees this: `encode` is the last step before a line is written (and
 * `note` the first after it was), `decode` the first after one is parsed. So records in memory
 * are whole, and their shared messages are the same objects: memory holds each message once. A base is always an
 * earlier record of the same session, so dropping a session's records (compaction) never
 * strands another's; a line whose base is not in the log is skipped and named, as a torn one is.
 */
import { sharedPrefixLength } from '../../src-shared/shared-prefix.js';
import type { CapturedMessage, CaptureRecord, LogLine, RequestRecord } from './capture-records.js';

/** What a prompt may continue from: a reply's prompt ids, then the tokens it generated. */
interface RolloutTail {
  id: string;
  promptIds: number[];
  tokens: number[];
}

/** The same message, field by field (the text compared first: most messages that differ, differ there). */
function sameMessage(a: CapturedMessage, b: CapturedMessage): boolean {
  if (a === b) return true;
  if (a.content !== b.content || a.role !== b.role || a.tool_call_id !== b.tool_call_id || a.name !== b.name) return false;
  if (Object.keys(a).length !== Object.keys(b).length) return false;
  return JSON.stringify(a.tool_calls) === JSON.stringify(b.tool_calls);
}

/**
 * One log file's view of its sessions: each session's last main request and last rollout, which
 * the next record of that session may share its beginning with. The writer and the reader each
 * keep one and feed it every record in file order, so both see the same bases.
 */
export class LogPrefixes {
  private readonly lastMain = new Map<string, RequestRecord>();
  private readonly lastRollout = new Map<string, RolloutTail>();
  /** Every request's whole messages (arrays of shared objects) and kind by id, for decoding a base. */
  private readonly requests = new Map<string, { messages: CapturedMessage[]; kind: RequestRecord['kind']; session: string; tools?: unknown[] }>();

  /**
   * The line to write for `record` (whole when it shares nothing with its session's last one),
   * and the record to keep in memory: the same, its shared messages the base's own objects.
   */
  encode(record: CaptureRecord): { line: LogLine; record: CaptureRecord } {
    if (record.t === 'request') {
      const base = this.lastMain.get(record.session);
      const kept = base ? sharedPrefixLength(base.messages, record.messages, sameMessage) : 0;
      if (kept === 0) return { line: record, record };
      const rest = record.messages.slice(kept);
      const { tools, ...line } = record;
      const toolsLine = tools === undefined ? {} : sameJson(tools, base!.tools) ? { sameTools: true as const } : { tools };
      return { line: { ...line, v: 2, base: base!.id, kept, messages: rest, ...toolsLine }, record: { ...record, messages: [...base!.messages.slice(0, kept), ...rest] } };
    }
    if (record.t === 'reply' && record.rollout) {
      const base = this.lastRollout.get(record.session);
      const kept = base ? sharedPromptLength(base, record.rollout.promptIds) : 0;
      if (kept === 0) return { line: record, record };
      return { line: { ...record, v: 2, rollout: { ...record.rollout, promptBase: base!.id, promptKept: kept, promptIds: record.rollout.promptIds.slice(kept) } }, record };
    }
    return { line: record, record };
  }

  /** Makes a record written (or read) a base for its session's next ones. */
  note(record: CaptureRecord): void {
    if (record.t === 'request') {
      this.requests.set(record.id, { messages: record.messages, kind: record.kind, session: record.session, ...(record.tools ? { tools: record.tools } : {}) });
      if (record.kind === 'main') this.lastMain.set(record.session, record);
    } else if (record.t === 'reply' && record.rollout && this.requests.get(record.id)?.kind === 'main') {
      this.lastRollout.set(record.session, { id: record.id, promptIds: record.rollout.promptIds, tokens: record.rollout.tokens });
    }
  }

  /** The whole record a parsed line stands for (noted); throws naming a base the log does not have. */
  decode(line: LogLine): CaptureRecord {
    const record = this.whole(line);
    this.note(record);
    return record;
  }

  private whole(line: LogLine): CaptureRecord {
    if (line.v !== 2) return line;
    if (line.t === 'request') {
      const { base, kept, sameTools, ...rest } = line;
      const found = this.requests.get(base);
      if (found?.session !== rest.session) throw new Error(`capture record: its base request ${base} is not in the log${found ? ` under session ${rest.session}` : ''}`);
      const { messages } = found;
      if (!Number.isInteger(kept) || kept < 1 || kept > messages.length) throw new Error(`capture record: kept ${kept} is not within its base's ${messages.length} messages`);
      if (sameTools && !found.tools) throw new Error(`capture record: it offers its base's tools, and its base request ${base} offered none`);
      return { ...rest, v: 1, messages: [...messages.slice(0, kept), ...rest.messages], ...(sameTools ? { tools: found.tools } : {}) };
    }
    const { promptBase, promptKept, ...rollout } = line.rollout;
    const base = this.lastRollout.get(line.session);
    if (base?.id !== promptBase) throw new Error(`capture record: its prompt's base reply ${promptBase} is not the session's last rollout`);
    const available = base.promptIds.length + base.tokens.length;
    if (!Number.isInteger(promptKept) || promptKept < 1 || promptKept > available) throw new Error(`capture record: promptKept ${promptKept} is not within its base's ${available} ids`);
    const head = promptKept <= base.promptIds.length ? base.promptIds.slice(0, promptKept) : [...base.promptIds, ...base.tokens.slice(0, promptKept - base.promptIds.length)];
    return { ...line, v: 1, rollout: { ...rollout, promptIds: [...head, ...rollout.promptIds] } };
  }
}

/** How many of `promptIds` are the base's prompt ids followed by its tokens. */
function sharedPromptLength(base: RolloutTail, promptIds: readonly number[]): number {
  const inPrompt = sharedPrefixLength(base.promptIds, promptIds);
  if (inPrompt < base.promptIds.length) return inPrompt;
  return inPrompt + sharedPrefixLength(base.tokens, promptIds.slice(inPrompt));
}

/** Whether two tool lists are the same JSON (an agent resends its list unchanged every turn). */
function sameJson(a: unknown, b: unknown): boolean {
  return b !== undefined && JSON.stringify(a) === JSON.stringify(b);
}
