// An index of one run's episodes.jsonl for the Rollouts view (docs/design.md §Rollouts view):
// each episode line's list row and where its bytes are, so a page of the list is filtered in
// memory and an opened episode is one read of its own bytes. The file is scanned in chunks,
// never read whole, and only once: a run still writing it appends, and the next call scans
// just the new lines. A file rewritten rather than appended to (a run resumed from an earlier
// checkpoint) is noticed by the bytes before the indexed end, and indexed again.
import fs from 'node:fs';
import { episodeProblem } from '../../src-shared/episode-check.js';
import type { Episode } from '../../src-shared/rollout.js';
import type { RolloutListItem } from '../../src-shared/rollouts-api.js';

interface IndexedLine {
  item: RolloutListItem;
  offset: number;
  length: number;
}

const CHUNK_BYTES = 1 << 20;
/** Notes kept about skipped lines; the rest are counted. */
const MAX_NOTES = 5;
/** Bytes before the indexed end compared on each refresh to tell an append from a rewrite. */
const SEAM_BYTES = 64;
const NEWLINE = 0x0a;

/** The list row of an episode. */
function listItem(e: Episode, line: number): RolloutListItem {
  const calls = e.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : []));
  return {
    line, id: e.id, contextId: e.contextId, sample: e.sample, step: e.step, finish: e.finish, turns: e.summary.turns,
    toolCalls: e.summary.toolCalls, toolErrors: calls.filter((c) => !c.ok).length, tokens: e.summary.tokens,
    reward: e.reward, rewardSource: e.rewardSource, opd: e.teacherGap !== undefined,
  };
}

/** A line parsed and checked: the episode, or why it is not one. */
function parseLine(bytes: Buffer): { episode: Episode } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return { problem: `not JSON (${(err as Error).message})` };
  }
  const problem = episodeProblem(value);
  return problem ? { problem: `not an episode: ${problem}` } : { episode: value as Episode };
}

const isBlank = (bytes: Buffer) => bytes.toString('utf8').trim() === '';

export class EpisodeIndex {
  private lines: IndexedLine[] = [];
  /** The file offset up to which complete lines (ending in a newline) are indexed. */
  private indexedTo = 0;
  /** Complete lines read, blank and skipped ones included. */
  private lineCount = 0;
  private seam = Buffer.alloc(0);
  private skipped: string[] = [];
  /** The unfinished last line (no newline yet): an episode, or a note that it is torn. */
  private tail: { line: IndexedLine | null; note: string | null } = { line: null, note: null };
  /** size:mtime of the file as last indexed. */
  private stamp = '';
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly file: string) {}

  /** The file's episodes in file order, and a note per skipped line, as the file is now. */
  refresh(): Promise<{ items: RolloutListItem[]; notes: string[] }> {
    return this.exclusive(async () => {
      await this.update();
      const items = this.lines.map((l) => l.item);
      if (this.tail.line) items.push(this.tail.line.item);
      return { items, notes: this.notes() };
    });
  }

  /** The episode with this id (its last line, should a resumed run have written it twice), or null. */
  read(id: string): Promise<{ episode: Episode; line: number } | null> {
    return this.exclusive(async () => {
      await this.update();
      const found = this.tail.line?.item.id === id ? this.tail.line : this.lines.findLast((l) => l.item.id === id);
      if (!found) return null;
      const bytes = await readBytes(this.file, found.offset, found.length);
      const parsed = parseLine(bytes);
      if ('problem' in parsed) throw new Error(`${this.file} line ${found.item.line} changed while it was read`);
      return { episode: parsed.episode, line: found.item.line };
    });
  }

  /** One refresh or read at a time: two would scan the same bytes twice. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private notes(): string[] {
    const all = this.tail.note ? [...this.skipped, this.tail.note] : this.skipped;
    if (all.length <= MAX_NOTES) return all;
    return [...all.slice(0, MAX_NOTES), `… and ${all.length - MAX_NOTES} more lines skipped`];
  }

  private reset(): void {
    this.lines = [];
    this.indexedTo = 0;
    this.lineCount = 0;
    this.seam = Buffer.alloc(0);
    this.skipped = [];
  }

  private async update(): Promise<void> {
    const stat = await fs.promises.stat(this.file);
    const stamp = `${stat.size}:${stat.mtimeMs}`;
    if (stamp === this.stamp) return;
    if (stat.size < this.indexedTo || !(await this.seamHolds())) this.reset();
    await this.scan(stat.size);
    this.stamp = stamp;
  }

  private async seamHolds(): Promise<boolean> {
    if (this.seam.length === 0) return true;
    const now = await readBytes(this.file, this.indexedTo - this.seam.length, this.seam.length);
    return now.equals(this.seam);
  }

  /** Indexes the complete lines from `indexedTo` to `size`, then looks at the unfinished tail. */
  private async scan(size: number): Promise<void> {
    const handle = await fs.promises.open(this.file, 'r');
    try {
      let pending = Buffer.alloc(0);
      let pendingAt = this.indexedTo;
      for (let position = this.indexedTo; position < size; ) {
        const chunk = Buffer.alloc(Math.min(CHUNK_BYTES, size - position));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
        if (bytesRead === 0) break; // the file shrank under us; the next refresh starts over
        position += bytesRead;
        pending = pending.length ? Buffer.concat([pending, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
        let start = 0;
        for (let nl = pending.indexOf(NEWLINE); nl >= 0; nl = pending.indexOf(NEWLINE, start)) {
          this.indexLine(pending.subarray(start, nl), pendingAt + start);
          start = nl + 1;
        }
        pending = pending.subarray(start);
        pendingAt += start;
      }
      this.indexedTo = pendingAt;
      this.seam = Buffer.from(await readBytes(this.file, Math.max(0, pendingAt - SEAM_BYTES), Math.min(SEAM_BYTES, pendingAt)));
      this.readTail(pending, pendingAt);
    } finally {
      await handle.close();
    }
  }

  private indexLine(bytes: Buffer, offset: number): void {
    const line = ++this.lineCount;
    if (isBlank(bytes)) return;
    const parsed = parseLine(bytes);
    if ('problem' in parsed) this.skipped.push(`line ${line}: ${parsed.problem}; skipped`);
    else this.lines.push({ item: listItem(parsed.episode, line), offset, length: bytes.length });
  }

  /**
   * The last line without its newline: a run appending it right now, or one cut off by a
   * crash. Shown when it already parses as an episode; otherwise skipped with a note. It is
   * looked at again on every refresh until its newline arrives.
   */
  private readTail(bytes: Buffer, offset: number): void {
    this.tail = { line: null, note: null };
    if (isBlank(bytes)) return;
    const line = this.lineCount + 1;
    const parsed = parseLine(bytes);
    if ('episode' in parsed) this.tail.line = { item: listItem(parsed.episode, line), offset, length: bytes.length };
    else this.tail.note = `line ${line} is incomplete (a run still writing it, or one cut off); skipped`;
  }
}

async function readBytes(file: string, offset: number, length: number): Promise<Buffer> {
  const handle = await fs.promises.open(file, 'r');
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, offset);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
