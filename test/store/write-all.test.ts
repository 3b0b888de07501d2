// writeAllSync (src-main/store/atomic-file.ts), under every appended line, adapter and weight
// file: a write the disk shortened is continued, at the file's position or at a given one, so a
// file ends whole or with an error, never silently cut.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { writeAllSync } from '../../src-main/store/atomic-file.js';
import { appendLineSync } from '../../src-main/store/jsonl-file.js';
import { tempDir } from './helpers.js';

/** fs.writeSync as a disk that takes at most 3 bytes a call. */
function shortWrites(): void {
  const write = fs.writeSync;
  vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, data: Uint8Array, offset: number, length: number, position: number | null) =>
    write(fd, data, offset, Math.min(3, length), position)) as unknown as typeof fs.writeSync);
}

afterEach(() => vi.restoreAllMocks());

describe('writeAllSync', () => {
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
});
