// writeAllSync (src-main/store/atomic-file.ts), under every appended line, adapter and weight
// file: a write the disk shortened is continued, at the file's position or at a given one, so a
// file ends whole or with an error, never silently cut; and a log cut mid-line (endsMidLine)
// takes its next line on a line of its own.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { writeAllSync } from '../../src-main/store/atomic-file.js';
import { appendLineSync, endsMidLine } from '../../src-main/store/jsonl-file.js';
import { readLogLines, TrainerLog } from '../../src-main/train/trainer-log.js';
import { tempDir } from './helpers.js';

/** fs.writeSync as a disk that takes at most 3 bytes a call. */
function shortWrites(): void {
  const write = fs.writeSync;
  vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, data: Uint8Array, offset: number, length: number, position: number | null) =>
    write(fd, data, offset, Math.min(3, length), position)) as unknown as typeof fs.writeSync);
}

afterEach(() => vi.restoreAllMocks());

describe('writing whole lines and buffers', () => {
  it('continues short writes, at the end and at a position', () => {
    const file = path.join(tempDir(), 'f.bin');
    const fd = fs.openSync(file, 'w');
    shortWrites();
    writeAllSync(fd, Buffer.from('hello, world'));
    writeAllSync(fd, Buffer.from('WORLD'), 7);
    vi.restoreAllMocks();
    fs.closeSync(fd);
    expect(fs.readFileSync(file, 'utf8')).toBe('hello, WORLD');
  });

  it('appendLineSync appends the whole line through short writes', () => {
    const file = path.join(tempDir(), 'f.jsonl');
    const fd = fs.openSync(file, 'a');
    shortWrites();
    appendLineSync(fd, '{"a":1}\n');
    appendLineSync(fd, '{"b":"ünïcode"}\n');
    vi.restoreAllMocks();
    fs.closeSync(fd);
    expect(fs.readFileSync(file, 'utf8')).toBe('{"a":1}\n{"b":"ünïcode"}\n');
  });

  it('a trainer log cut mid-line takes the next line on a line of its own', () => {
    const dir = tempDir();
    const log = new TrainerLog(dir);
    expect(endsMidLine(log.file)).toBe(false); // no file yet
    log.append({ note: 'first', skipped_over_length: 1, max_length: 8 });
    fs.appendFileSync(log.file, '{"step": 1, "lo'); // a crash, or a full disk, mid-write
    expect(endsMidLine(log.file)).toBe(true);
    log.append({ note: 'second', skipped_over_length: 2, max_length: 8 });
    expect(readLogLines(log.file).map((l) => (l as { note: string }).note)).toEqual(['first', 'second']);
  });
});
