// No import loops in src-main and src-shared (issue 28 item 5). A loop between files means neither
// can be read, tested or loaded without the other, and a module evaluated half-way through a loop
// sees the other's exports as undefined. The layers test (layers.test.ts) already forbids loops
// between folders; this one forbids them between files, folder-internal ones included, and names
// each loop it finds (the shortest one through each knot of files).
//
// Hand-written rather than madge or dependency-cruiser: both bring a parser and a tree of
// dependencies for what is, here, a regex over relative imports and a depth-first walk (the
// import parser of layers.test.ts, which also reads `import type`), and it runs offline in
// milliseconds.
//
// Type-only imports (`import type`, `export type`, or `import { type A, type B }`) are erased
// from the JavaScript, so they cannot form a loop at run time. They count all the same: a loop of
// types still ties files together for a reader, and the issue wants none. The one exception is
// listed in TYPE_ONLY_LOOPS with its reason; the list may only shrink (an entry that no longer
// matches a loop fails too), and a loop with any value import in it is never allowed.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');
const TREES = ['src-main', 'src-shared'].map((tree) => path.join(ROOT, tree));

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

interface Import {
  spec: string;
  /** Erased from the JavaScript: `import type`, `export type`, or every name marked `type`. */
  typeOnly: boolean;
}

/** Whether an import or re-export clause (`{ a, type B }`, `type { A }`, `* as x`, `X`) names types only. */
function typeOnlyClause(clause: string): boolean {
  const text = clause.trim();
  if (/^type\s/.test(text)) return true;
  const braces = /^\{([^}]*)\}$/.exec(text);
  if (!braces) return false;
  const names = braces[1].split(',').map((name) => name.trim()).filter(Boolean);
  return names.length > 0 && names.every((name) => /^type\s/.test(name));
}

/**
 * Every module a file imports (static, dynamic, side-effect, and re-exports), as layers.test.ts
 * reads them; comments that begin a line are dropped first, so prose that says "import … from"
 * is not read as an import.
 */
function imports(source: string): Import[] {
  const text = source.replace(/^\s*\/\*[\s\S]*?\*\//gm, '').replace(/^\s*\/\/.*$/gm, '');
  const found: Import[] = [];
  const pattern = /(?:^|[\s;])(?:import|export)\s([^'";]*?)from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const match of text.matchAll(pattern)) {
    if (match[2] !== undefined) found.push({ spec: match[2], typeOnly: typeOnlyClause(match[1]) });
    else found.push({ spec: match[3] ?? match[4], typeOnly: false });
  }
  return found;
}

/** The file a relative specifier names: `./x.js` and `./x` both mean `./x.ts` (or `./x/index.ts`). */
function resolveImport(from: string, spec: string, known: Set<string>): string | undefined {
  const base = path.resolve(path.dirname(from), spec);
  const stem = base.replace(/\.(m?js|m?ts)$/, '');
  for (const candidate of [base, `${stem}.ts`, `${stem}.mts`, path.join(base, 'index.ts')]) {
    if (known.has(candidate)) return candidate;
  }
  return undefined;
}

type Graph = Map<string, string[]>;

/** The import graphs by repository-relative path: every import, and value imports only. */
function importGraphs(files: string[]): { all: Graph; values: Graph } {
  const known = new Set(files);
  const all: Graph = new Map();
  const values: Graph = new Map();
  for (const file of files) {
    const edges = imports(readFileSync(file, 'utf8'))
      .filter(({ spec }) => spec.startsWith('.'))
      .map(({ spec, typeOnly }) => ({ target: resolveImport(file, spec, known), typeOnly }))
      .filter((edge): edge is { target: string; typeOnly: boolean } => edge.target !== undefined)
      .map(({ target, typeOnly }) => ({ target: path.relative(ROOT, target), typeOnly }));
    all.set(path.relative(ROOT, file), [...new Set(edges.map((edge) => edge.target))]);
    values.set(path.relative(ROOT, file), [...new Set(edges.filter((edge) => !edge.typeOnly).map((edge) => edge.target))]);
  }
  return { all, values };
}

/** The strongly connected components (Tarjan's) of more than one file, or of a file that imports itself. */
function knots(graph: Graph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) components.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return components;
}

/** The shortest loop through the knot's first file (by name), walking only inside the knot. */
function shortestLoop(graph: Graph, knot: readonly string[]): string[] {
  const members = new Set(knot);
  const start = knot[0];
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of graph.get(node) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const loop = [node];
        while (loop[0] !== start) loop.unshift(previous.get(loop[0])!);
        return [...loop, start];
      }
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

/** One line per knot: its size and one loop through it, e.g. `3 files: a.ts → b.ts → c.ts → a.ts`. */
function describeLoops(graph: Graph): string[] {
  return knots(graph).map((knot) => `${knot.length} files: ${shortestLoop(graph, knot).join(' → ')}`);
}

/** Loops of type-only imports that stay, each with why; a knot is allowed when every file of it matches. */
const TYPE_ONLY_LOOPS: { files: RegExp; why: string }[] = [
  {
    // ir.ts's GraphBuilder applies the op records of ops/ (its helpers forward to them), and each
    // record's gradient rule writes its nodes through a GraphBuilder: a builder and its rules
    // are one design, and an interface copied from GraphBuilder for the records to name would be
    // a second list of ~40 helpers to keep in step with the first.
    files: /^src-main\/graph\/(ir|op-record|gradient-shapes|ops\/[a-z-]+)\.ts$/,
    why: 'the graph builder and its op records',
  },
];

const graphs = importGraphs(TREES.flatMap(sourceFiles));

describe('import cycles', () => {
  it('finds no import loop of value imports between the files of src-main and src-shared', () => {
    expect(describeLoops(graphs.values)).toEqual([]);
  });

  it('finds no loop of type-only imports either, but the listed ones', () => {
    const posix = (file: string) => file.split(path.sep).join('/');
    const found = knots(graphs.all);
    const unlisted = found.filter((knot) => !TYPE_ONLY_LOOPS.some(({ files }) => knot.every((file) => files.test(posix(file)))));
    expect(unlisted.map((knot) => `${knot.length} files: ${shortestLoop(graphs.all, knot).join(' → ')}`)).toEqual([]);
    const stale = TYPE_ONLY_LOOPS.filter(({ files }) => !found.some((knot) => knot.every((file) => files.test(posix(file)))));
    expect(stale.map(({ why }) => `no loop left for "${why}": remove it from TYPE_ONLY_LOOPS`)).toEqual([]);
  });

  it('names a loop when there is one (guards the walk above)', () => {
    const graph: Graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts', 'd.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', []],
      ['e.ts', ['e.ts']],
    ]);
    expect(describeLoops(graph)).toEqual(['3 files: a.ts → b.ts → c.ts → a.ts', '1 files: e.ts → e.ts']);
  });

  it('tells type-only imports from value imports, and skips prose (guards the parser above)', () => {
    const source = [
      '/**',
      ' * The contract and the renderer import it from here.',
      ' */',
      "import type { A } from './a.js';",
      "import { type B, type C } from './b.js';",
      "import { type D, e } from './d.js';",
      "export type { F } from './f.js';",
      "export * from './g.js';",
      "import './h.js';",
      "const i = await import('./i.js');",
    ].join('\n');
    expect(imports(source)).toEqual([
      { spec: './a.js', typeOnly: true },
      { spec: './b.js', typeOnly: true },
      { spec: './d.js', typeOnly: false },
      { spec: './f.js', typeOnly: true },
      { spec: './g.js', typeOnly: false },
      { spec: './h.js', typeOnly: false },
      { spec: './i.js', typeOnly: false },
    ]);
    expect(graphs.all.get(path.join('src-main', 'cli.ts'))?.length).toBeGreaterThan(0);
  });
});
