// The one JSON Lines reader behind --data, tasks, episodes, contexts and score input: every
// problem names its file and line in one line; a torn last line is left out only where a run
// appends to the file and may have been killed mid-write.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readJsonLines } from '../../src-main/store/jsonl-file.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-jsonl-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

describe('readJsonLines', () => {
  it('parses each non-blank line and says where it came from', () => {
    const p = file('ok.jsonl', '{"a":1}\n\n  \n[2]\n"three"\n');
    expect(readJsonLines(p)).toEqual({ lines: [
      { value: { a: 1 }, where: `${p}:1`, line: 1 },
      { value: [2], where: `${p}:4`, line: 4 },
      { value: 'three', where: `${p}:5`, line: 5 },
    ] });
  });

  it('names the line that is not JSON, and the file it cannot read', () => {
    const p = file('bad.jsonl', '{"a":1}\n{"a":\n{"b":2}\n');
    expect(() => readJsonLines(p)).toThrow(new RegExp(`^${p}:2: invalid JSON \\(`));
    expect(() => readJsonLines(path.join(dir, 'missing.jsonl'))).toThrow(/^cannot read .*missing\.jsonl: ENOENT$/);
  });

  it('leaves out a torn last line only when asked, and only when it lacks its newline', () => {
    const torn = file('torn.jsonl', '{"a":1}\n{"a":2');
    expect(() => readJsonLines(torn)).toThrow(/torn\.jsonl:2: invalid JSON/);
    const read = readJsonLines(torn, { allowTornLast: true });
    expect(read.lines.map((l) => l.value)).toEqual([{ a: 1 }]);
    expect(read.torn).toBe(`${torn}:2: ignored the torn last line (an interrupted write; 6 bytes)`);
    const ended = file('ended.jsonl', '{"a":1}\n{"a":2\n');
    expect(() => readJsonLines(ended, { allowTornLast: true })).toThrow(/ended\.jsonl:2: invalid JSON/);
  });
});
