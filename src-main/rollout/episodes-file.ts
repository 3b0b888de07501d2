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
 * - Resume: a run reads the episodes already written ({@link readEpisodes}) and the manager
 *   skips their ids.
 */
import fs from 'node:fs';
import path from 'node:path';
import { episodeProblem } from '../../src-shared/episode-check.js';
import type { Episode } from '../../src-shared/rollout.js';
import { UserError } from '../../src-shared/types.js';
import { appendLineSync, readJsonLines } from '../store/jsonl-file.js';
import { contextFingerprint, type RolloutContext } from './manager.js';

export interface EpisodesRead {
  episodes: Episode[];
  /** What was ignored, one line each (a torn last line). */
  notes: string[];
}

function fail(where: string, message: string): never {
  throw new UserError(`${where}: ${message}`);
}

/**
 * Checks that `obj` is an Episode whose token bookkeeping adds up (src-shared/episode-check.ts,
 * the same check the Rollouts view makes); throws naming `where` and the first wrong field.
 */
export function checkEpisode(obj: unknown, where: string): Episode {
  const problem = episodeProblem(obj);
  if (problem) fail(where, `not an episode: ${problem}`);
  return obj as Episode;
}

/** Reads an episodes file (a missing one is empty). */
export function readEpisodes(file: string): EpisodesRead {
  if (!fs.existsSync(file)) return { episodes: [], notes: [] };
  const { lines, torn } = readJsonLines(file, { allowTornLast: true });
  const out: EpisodesRead = { episodes: [], notes: torn ? [torn] : [] };
  const seen = new Set<string>();
  for (const { value, where } of lines) {
    const episode = checkEpisode(value, where);
    if (seen.has(episode.id)) fail(where, `episode ${episode.id} appears twice`);
    seen.add(episode.id);
    out.episodes.push(episode);
  }
  return out;
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
    appendLineSync(this.fd, JSON.stringify(episode) + '\n'); // a torn line is cut when the file is next opened
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

/**
 * Checks that the episodes a resumed run finds in its file continue contexts this run has, as
 * they are now (docs/design.md §Rollouts). Episode ids name a task by file and line only, so
 * an edited or different task file would otherwise have old episodes counted for new tasks: a
 * one-line error, and the file is left as it is. An episode carries its context's fingerprint
 * (prompt, tools, reward check), so a changed answer is caught too; older episodes without one
 * are checked by their prompt. (Raising --rollouts, or another --seed, still resumes: the old
 * episodes are samples of the same contexts.)
 */
export function checkResumedEpisodes(file: string, episodes: readonly Episode[], contexts: readonly RolloutContext[]): void {
  const byId = new Map(contexts.map((c) => [c.id, c]));
  const fingerprints = new Map<string, string>();
  const other = (why: string) => new UserError(`${file} holds episodes of other tasks (${why}); resume with the same task file, or write to a new --out`);
  for (const e of episodes) {
    const context = byId.get(e.contextId);
    if (!context) throw other(`episode ${e.id} continues ${e.contextId}, which the task file does not have`);
    if (JSON.stringify(e.messages.slice(0, e.promptMessages)) !== JSON.stringify(context.messages)) {
      throw other(`episode ${e.id} starts from another prompt than ${e.contextId} has now`);
    }
    if (!fingerprints.has(context.id)) fingerprints.set(context.id, contextFingerprint(context));
    if (e.contextSha256 !== undefined && e.contextSha256 !== fingerprints.get(context.id)) {
      throw other(`episode ${e.id} was made for another version of ${e.contextId}: its answer or tools changed`);
    }
  }
}
