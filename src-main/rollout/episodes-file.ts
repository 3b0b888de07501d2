/**
 * The episodes file (`episodes.jsonl`, docs/design.md §Rollouts): one Episode
 * (src-shared/rollout.ts) a line, appended and fsynced one line at a time, so a process killed
 * at any moment loses at most the line it was writing.
 *
 * - Reading checks every line. A last line without its newline that does not parse is the
 *   torn end of a killed write: it is ignored, with a note. Any other bad line is a one-line
 *   UserError naming the file and line.
 * - Opening for append first cuts such a torn end off (it holds no finished episode), so the
 *   next line starts on a line of its own.
 * - Resume: {@link readEpisodeIds} gives the ids already written; the manager skips them.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EPISODE_FINISHES, type Episode } from '../../src-shared/rollout.js';
import { UserError } from '../../src-shared/types.js';

export interface EpisodesRead {
  episodes: Episode[];
  /** What was ignored, one line each (a torn last line). */
  notes: string[];
}

function fail(where: string, message: string): never {
  throw new UserError(`${where}: ${message}`);
}

const isInt = (v: unknown, min = 0): v is number => Number.isInteger(v) && (v as number) >= min;
const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Checks that `obj` is an Episode whose token bookkeeping adds up; throws naming `where`. */
export function checkEpisode(obj: unknown, where: string): Episode {
  if (!isObject(obj)) fail(where, 'expected an episode object');
  const e = obj as Record<string, unknown>;
  for (const key of ['id', 'contextId'] as const) if (typeof e[key] !== 'string' || !e[key]) fail(where, `"${key}" must be a non-empty string`);
  for (const key of ['sample', 'seed', 'step', 'promptMessages'] as const) if (!isInt(e[key])) fail(where, `"${key}" must be a whole number ≥ 0`);
  if (!Array.isArray(e.messages) || !e.messages.every((m) => isObject(m) && typeof m.role === 'string' && typeof m.content === 'string')) {
    fail(where, '"messages" must be an array of {"role","content"}');
  }
  if (!(EPISODE_FINISHES as readonly unknown[]).includes(e.finish)) fail(where, `"finish" must be one of ${EPISODE_FINISHES.join(', ')}`);
  const t = e.tokens;
  if (!isObject(t) || !Array.isArray(t.inputIds) || !t.inputIds.every((x) => isInt(x)) || !isInt(t.promptLength) || !Array.isArray(t.generated) || !Array.isArray(t.logprobs)) {
    fail(where, '"tokens" must hold inputIds, promptLength, generated and logprobs');
  }
  const n = (t.inputIds as number[]).length;
  let previous = t.promptLength as number;
  let generated = 0;
  for (const span of t.generated as unknown[]) {
    if (!isObject(span) || !isInt(span.start) || !isInt(span.end) || (span.start as number) < previous || (span.end as number) <= (span.start as number) || (span.end as number) > n) {
      fail(where, '"tokens.generated" spans must be ordered, non-empty and inside inputIds, after the prompt');
    }
    generated += (span.end as number) - (span.start as number);
    previous = span.end as number;
  }
  if ((t.logprobs as unknown[]).length !== generated || !(t.logprobs as unknown[]).every((x) => typeof x === 'number' && Number.isFinite(x) && x <= 0)) {
    fail(where, `"tokens.logprobs" must hold ${generated} finite log-probs ≤ 0, one per generated token`);
  }
  if (!Array.isArray(e.rewards) || !e.rewards.every((r) => isObject(r) && isInt(r.at) && (r.at as number) < n && typeof r.r === 'number' && Number.isFinite(r.r))) {
    fail(where, '"rewards" must be [{"at": token index, "r": number}]');
  }
  if (e.reward !== null && (typeof e.reward !== 'number' || !Number.isFinite(e.reward))) fail(where, '"reward" must be a number or null');
  if (!isObject(e.summary)) fail(where, '"summary" must be an object');
  return obj as unknown as Episode;
}

/** Reads an episodes file (a missing one is empty). */
export function readEpisodes(file: string): EpisodesRead {
  if (!fs.existsSync(file)) return { episodes: [], notes: [] };
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UserError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const lines = text.split('\n');
  const torn = lines.at(-1) !== '' ? lines.length - 1 : -1;
  const out: EpisodesRead = { episodes: [], notes: [] };
  const seen = new Set<string>();
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    const where = `${file}:${i + 1}`;
    let obj: unknown;
    try {
      obj = JSON.parse(line);
    } catch (err) {
      if (i === torn) return void out.notes.push(`${where}: ignored the torn last line (an interrupted write; ${line.length} bytes)`);
      fail(where, `invalid JSON (${(err as Error).message})`);
    }
    const episode = checkEpisode(obj, where);
    if (seen.has(episode.id)) fail(where, `episode ${episode.id} appears twice`);
    seen.add(episode.id);
    out.episodes.push(episode);
  });
  return out;
}

/** The ids of the episodes already in `file`, for a resumed run. */
export function readEpisodeIds(file: string): Set<string> {
  return new Set(readEpisodes(file).episodes.map((e) => e.id));
}

/** Appends episodes to a file, one fsynced line each. */
export class EpisodeWriter {
  private constructor(readonly file: string, private fd: number | null) {}

  /** Opens `file` for appending (creating it and its folder), cutting off a torn last line first. */
  static open(file: string): { writer: EpisodeWriter; notes: string[] } {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    const notes: string[] = [];
    let fd: number;
    try {
      fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_APPEND, 0o600);
    } catch (err) {
      throw new UserError(`cannot open ${file} for writing: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const size = fs.fstatSync(fd).size;
    const keep = size === 0 ? 0 : completeLength(fd, size);
    if (keep < size) {
      if (isWholeEpisode(fd, keep, size)) {
        // Only the newline was lost: the episode is whole (and a reader counts it done).
        fs.writeSync(fd, '\n');
      } else {
        fs.ftruncateSync(fd, keep);
        notes.push(`${file}: cut ${size - keep} bytes of a torn last line (an interrupted write)`);
      }
      fs.fsyncSync(fd);
    }
    return { writer: new EpisodeWriter(file, fd), notes };
  }

  append(episode: Episode): void {
    if (this.fd === null) throw new Error(`${this.file}: the episode writer is closed`);
    const line = Buffer.from(JSON.stringify(episode) + '\n', 'utf8');
    let written = 0;
    while (written < line.length) written += fs.writeSync(this.fd, line, written);
    fs.fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

/** Whether bytes [from, to) of `fd` are one whole episode line without its newline. */
function isWholeEpisode(fd: number, from: number, to: number): boolean {
  const tail = Buffer.alloc(to - from);
  fs.readSync(fd, tail, 0, tail.length, from);
  try {
    checkEpisode(JSON.parse(tail.toString('utf8')), 'tail');
    return true;
  } catch {
    return false;
  }
}

/** Bytes of `fd` up to and including its last newline (the complete lines). */
function completeLength(fd: number, size: number): number {
  const chunk = Buffer.alloc(64 * 1024);
  for (let end = size; end > 0;) {
    const start = Math.max(0, end - chunk.length);
    const n = fs.readSync(fd, chunk, 0, end - start, start);
    const at = chunk.subarray(0, n).lastIndexOf(0x0a);
    if (at >= 0) return start + at + 1;
    end = start;
  }
  return 0;
}
