// docs/benchmarks.md keeps one row per benchmark: every `bench:*` script in package.json has its
// row (by its command), and each row of the main table carries a date, so a new bench cannot
// land without its figure and an old figure says when it was measured.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');
const DOC = readFileSync(path.join(ROOT, 'docs/benchmarks.md'), 'utf8');
const SCRIPTS = Object.keys(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>);

describe('docs/benchmarks.md', () => {
  it('has a row for every bench:* script', () => {
    const benches = SCRIPTS.filter((s) => s.startsWith('bench:'));
    expect(benches.length).toBeGreaterThan(5);
    const rows = DOC.split('\n').filter((l) => l.startsWith('| '));
    const missing = benches.filter((b) => !rows.some((r) => r.includes(`npm run ${b}`)));
    expect(missing).toEqual([]);
  });

  it('dates every row of the one-row-per-bench table', () => {
    const table = DOC.split('## One row per bench')[1]!.split('\n## ')[0]!;
    const rows = table.split('\n').filter((l) => /^\| `/.test(l) || /^\| [A-Z]/.test(l) && l.includes('npm'));
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) expect(row, row.slice(0, 60)).toMatch(/\| \d{4}-\d{2}-\d{2} \|$/);
  });

  it('is linked from the README', () => {
    expect(readFileSync(path.join(ROOT, 'README.md'), 'utf8')).toContain('docs/benchmarks.md');
  });
});
