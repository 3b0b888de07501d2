// docs/how-to-add.md stays true: every file it names exists, each part's heading counts its
// list, and the import-format part holds as written: one record in SOURCE_FORMAT_INFO is the
// format's name everywhere (the Import panel's menu, the "supported formats" line, --format),
// and the compiler and this test send you to the rest (a converter for every format).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONVERTERS, SUPPORTED_LINE } from '../../src-main/import/importer.js';
import { SOURCE_FORMAT_INFO, SOURCE_FORMATS } from '../../src-shared/types.js';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const HOW_TO = read('docs/how-to-add.md');

/** The page's parts by heading: `An import format (6 files)` → its body. */
function parts(): Map<string, string> {
  const out = new Map<string, string>();
  for (const chunk of HOW_TO.split(/^## /m).slice(1)) {
    const [heading, ...body] = chunk.split('\n');
    out.set(heading!.trim(), body.join('\n'));
  }
  return out;
}

function formatPart(): string {
  const entry = [...parts()].find(([heading]) => heading.startsWith('An import format'));
  expect(entry, 'docs/how-to-add.md has an "An import format" part').toBeDefined();
  return entry![1];
}

describe('docs/how-to-add.md', () => {
  it('is linked from the README', () => {
    expect(read('README.md')).toContain('docs/how-to-add.md');
  });

  it('names only files and folders that exist', () => {
    const named = [...HOW_TO.matchAll(/`([^`\s]+)`/g)]
      .map((m) => m[1]!)
      .filter((t) => /^(src-|test\/|docs\/|bench\/|scripts\/)/.test(t) || t === 'README.md')
      .filter((t) => !t.includes('<')); // src-main/import/<format>.ts: the file you write
    expect(named.length).toBeGreaterThan(20);
    const missing = named.filter((t) => !existsSync(path.join(ROOT, t)));
    expect(missing).toEqual([]);
  });

  it('counts each part\'s files in its heading: the list is numbered 1…N, N the heading\'s last count', () => {
    const all = parts();
    expect([...all.keys()].map((h) => h.replace(/ \(.*/, ''))).toEqual(
      expect.arrayContaining(['An import format', 'A training method', 'A loss', 'An op with its gradient', 'A page']),
    );
    for (const [heading, body] of all) {
      const counts = [...(heading.match(/\(([^)]*)\)/)?.[1] ?? '').matchAll(/\d+/g)].map((m) => Number(m[0]));
      expect(counts.length, heading).toBeGreaterThan(0);
      const numbers = [...body.matchAll(/^(\d+)\. /gm)].map((m) => Number(m[1]));
      expect(numbers, heading).toEqual(numbers.map((_, i) => i + 1));
      expect(numbers.length, heading).toBe(counts.at(-1));
    }
  });
});

describe('the import-format part', () => {
  it('names the files and tables it says to touch', () => {
    const part = formatPart();
    for (const name of ['src-shared/types.ts', 'SOURCE_FORMAT_INFO', 'src-main/import/importer.ts', 'CONVERTERS', 'detectFormat', 'src-renderer/src/format.ts', 'SOURCE_LABELS', 'test/import/']) {
      expect(part, name).toContain(name);
    }
  });

  it('SOURCE_FORMATS is SOURCE_FORMAT_INFO\'s names, and each has a label and what it reads', () => {
    expect(SOURCE_FORMATS).toEqual(Object.keys(SOURCE_FORMAT_INFO));
    for (const f of SOURCE_FORMATS) {
      expect(SOURCE_FORMAT_INFO[f].label, f).not.toBe('');
      expect(SOURCE_FORMAT_INFO[f].reads, f).not.toBe('');
    }
  });

  it('every format has a converter, and nothing else has one', () => {
    expect(Object.keys(CONVERTERS).sort()).toEqual([...SOURCE_FORMATS].sort());
    for (const f of SOURCE_FORMATS) expect(typeof CONVERTERS[f], f).toBe('function');
  });

  it('every format is in the "supported formats" line, in SOURCE_FORMATS order, with what it reads', () => {
    const listed = [...SUPPORTED_LINE.matchAll(/(?:: |, )(\w+) \(/g)].map((m) => m[1]);
    expect(listed).toEqual([...SOURCE_FORMATS]);
    for (const f of SOURCE_FORMATS) expect(SUPPORTED_LINE).toContain(`${f} (${SOURCE_FORMAT_INFO[f].reads})`);
  });

  it('the Import panel\'s menu comes from SOURCE_FORMATS: its only written-out option is "detect automatically"', () => {
    const panel = read('src-renderer/src/components/ImportPanel.vue');
    expect(panel).toMatch(/import \{[^}]*\bSOURCE_FORMATS\b[^}]*\} from '\.\.\/\.\.\/\.\.\/src-shared\/types\.js'/);
    expect(panel).toMatch(/<option v-for="f in SOURCE_FORMATS" :key="f" :value="f">\{\{ SOURCE_FORMAT_INFO\[f\]\.label \}\}<\/option>/);
    const literal = [...panel.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]);
    expect(literal).toEqual(['auto']);
  });

  it('the README names every format', () => {
    const readme = read('README.md');
    for (const f of SOURCE_FORMATS) expect(readme, f).toContain(SOURCE_FORMAT_INFO[f].label);
  });
});
