// Reading a JSON Lines file that a person or a run wrote (--data rows, tasks, episodes,
// contexts, score input): one JSON value per non-blank line, each with "file:line" so that
// every problem names its line. One reader, so every such file fails the same clear way.
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import { writeAllSync } from './atomic-file.js';

export interface JsonLine {
  value: unknown;
  /** "file:line", for messages. */
  where: string;
  /** The 1-based line number. */
  line: number;
}

export interface JsonLines {
  lines: JsonLine[];
  /** With `allowTornLast`: the note for a last line left out as torn. */
  torn?: string;
}

/**
 * The file's lines, parsed. A line that is not JSON is a one-line UserError naming it, except,
 * with `allowTornLast`, an unparsable last line without a final newline: a file appended to
 * by a run that was killed mid-write, which is left out and described in `torn`.
 */
export function readJsonLines(file: string, options: { allowTornLast?: boolean } = {}): JsonLines {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UserError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const raw = text.split('\n');
  const lastUnended = raw.at(-1) !== '' ? raw.length - 1 : -1;
  const out: JsonLines = { lines: [] };
  raw.forEach((text, i) => {
    if (!text.trim()) return;
    const where = `${file}:${i + 1}`;
    try {
      out.lines.push({ value: JSON.parse(text), where, line: i + 1 });
    } catch (err) {
      if (options.allowTornLast && i === lastUnended) {
        out.torn = `${where}: ignored the torn last line (an interrupted write; ${text.length} bytes)`;
        return;
      }
      throw new UserError(`${where}: invalid JSON (${(err as Error).message})`);
    }
  });
  return out;
}

/**
 * Whether a file (by path, or an open descriptor that can read) ends part-way through a line (a
 * write a crash or a full disk cut short): the next line must start with a newline.
 */
export function endsMidLine(file: string | number): boolean {
  let fd: number;
  try {
    fd = typeof file === 'number' ? file : fs.openSync(file, 'r');
  } catch {
    return false; // no file yet
  }
  try {
    const size = fs.fstatSync(fd).size;
    if (size === 0) return false;
    const last = Buffer.alloc(1);
    fs.readSync(fd, last, 0, 1, size - 1);
    return last[0] !== 0x0a;
  } finally {
    if (typeof file !== 'number') fs.closeSync(fd);
  }
}

/**
 * Appends `line` (its newline included) to the open file and fsyncs: when this returns, it
 * survives a crash. A short write (a disk filling up) is continued; a failed one throws and may
 * leave part of the line, which the caller must not append after (each says how it avoids it).
 */
export function appendLineSync(fd: number, line: string): void {
  writeAllSync(fd, Buffer.from(line, 'utf8'));
  fs.fsyncSync(fd);
}
