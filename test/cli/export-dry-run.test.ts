// `hindsight export --dry-run` (issue 34, "counts per format before writing"): writes nothing,
// prints how many lines each format would write, the same numbers the files then have, with
// and without --exclude-heldout; the usage errors say what is missing.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { runCli as cli } from '../helpers/cli.js';
import { tempDir } from '../store/helpers.js';

const CHATGPT = fileURLToPath(new URL('../fixtures/chatgpt-branches.json', import.meta.url));
const SHAREGPT = fileURLToPath(new URL('../fixtures/sharegpt-single.json', import.meta.url));
const OPENAI = fileURLToPath(new URL('../fixtures/openai-chat.jsonl', import.meta.url));

describe('hindsight export --dry-run', () => {
  it('prints the lines each format would write, equal to what export then writes; nothing is written', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    expect((await cli('import', CHATGPT, SHAREGPT, OPENAI, '--db', db)).code).toBe(0);
    expect((await cli('judge', '--backend', 'heuristic', '--hints', '--db', db)).code).toBe(0);
    const before = fs.readdirSync(dir).sort();

    const text = await cli('export', '--dry-run', '--format', 'kto', '--db', db);
    expect(text.code).toBe(0);
    const [head, ...rows] = text.stdout.trimEnd().split('\n');
    expect(head).toMatch(/^would write \(dry run, nothing written; \d+ sessions, held-out ones included\):$/);
    expect(rows.map((r) => r.replace(/^\*/, '').trim().split(/\s+/)[0])).toEqual([...EXPORT_FORMATS]);
    expect(rows.find((r) => r.startsWith('*'))).toMatch(/^\* kto\s+\d+ lines?$/);
    expect(fs.readdirSync(dir).sort()).toEqual(before);

    for (const exclude of [false, true]) {
      const flags = exclude ? ['--exclude-heldout'] : [];
      const counted = await cli('export', '--dry-run', '--db', db, '--json', ...flags);
      const counts = counted.json();
      expect(counts.dryRun).toBe(true);
      for (const format of EXPORT_FORMATS) {
        const out = path.join(dir, `${format}-${exclude}.jsonl`);
        const r = await cli('export', '--format', format, '--out', out, '--db', db, '--json', ...flags);
        expect(r.code).toBe(0);
        expect(counts.lines[format], `${format} (exclude ${exclude})`).toBe(r.json().lines);
      }
      if (exclude) expect(counts.heldOutLeftOut).toBeGreaterThanOrEqual(1);
      else expect(counts.heldOutLeftOut).toBe(0);
    }
  });

  it('without --dry-run, --format and --out are required (exit 2, one line saying so)', async () => {
    const db = path.join(tempDir(), 'x.db');
    const noFormat = await cli('export', '--out', 'x.jsonl', '--db', db);
    expect(noFormat.code).toBe(2);
    expect(noFormat.stderr).toMatch(/--format must be one of .* \(or --dry-run to count every format\)/);
    const noOut = await cli('export', '--format', 'kto', '--db', db);
    expect(noOut.code).toBe(2);
    expect(noOut.stderr).toMatch(/--out FILE is required \(or --dry-run to write nothing\)/);
  });
});
