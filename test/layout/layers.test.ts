// The layout is part of the design (docs/design.md §Layers): each folder is one layer, and an
// import may only reach a folder of a lower rank. These tests read the import statements of
// every source file, so a new upward import or a cycle between folders fails here first.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../..');

/** Rank of each layer; src-main folders by name, plus the two top-level Node-free trees. */
const LAYER_RANK: Record<string, number> = {
  'src-shared': 0,
  store: 1,
  graph: 1,
  http: 1,
  model: 2,
  import: 2,
  pipeline: 2,
  judge: 3,
  export: 3,
  train: 3,
  rollout: 3,
  workspace: 4,
  eval: 4,
  onpolicy: 4,
  openai: 5,
  capture: 6,
  api: 7,
  cli: 8,
  app: 8,
};

const MAX_SOURCE_LINES = 400;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|mts|mjs|vue)$/.test(name)) out.push(full);
  }
  return out;
}

/** Every module specifier a file imports (static, dynamic, and re-exports). */
function importSpecifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs: string[] = [];
  const pattern = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const match of text.matchAll(pattern)) specs.push(match[1] ?? match[2] ?? match[3]);
  return specs;
}

/** The layer a repository path belongs to, or undefined outside the layered trees. */
function layerOf(file: string): string | undefined {
  const rel = path.relative(ROOT, file).split(path.sep);
  if (rel[0] === 'src-shared') return 'src-shared';
  if (rel[0] !== 'src-main') return undefined;
  if (rel.length === 2) return rel[1] === 'cli.ts' ? 'cli' : undefined;
  return rel[1];
}

function relativeImports(file: string): { spec: string; target: string }[] {
  return importSpecifiers(file)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => ({ spec, target: path.resolve(path.dirname(file), spec) }));
}

const mainFiles = [...sourceFiles(path.join(ROOT, 'src-main')), ...sourceFiles(path.join(ROOT, 'src-shared'))];
const rendererFiles = sourceFiles(path.join(ROOT, 'src-renderer'));

describe('layers', () => {
  it('gives every src-main folder a rank', () => {
    const folders = readdirSync(path.join(ROOT, 'src-main')).filter((name) => statSync(path.join(ROOT, 'src-main', name)).isDirectory());
    expect(folders.filter((name) => !(name in LAYER_RANK))).toEqual([]);
  });

  it('imports only downwards: no import runs up a layer or sideways between folders', () => {
    const violations: string[] = [];
    for (const file of mainFiles) {
      const from = layerOf(file);
      if (!from) continue;
      for (const { spec, target } of relativeImports(file)) {
        const to = layerOf(target);
        if (!to || to === from) continue;
        if (LAYER_RANK[to] >= LAYER_RANK[from]) violations.push(`${path.relative(ROOT, file)} (${from}, rank ${LAYER_RANK[from]}) imports ${spec} (${to}, rank ${LAYER_RANK[to]})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('keeps src-shared free of Node: no built-in module and nothing from src-main', () => {
    const builtins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
    const violations: string[] = [];
    for (const file of sourceFiles(path.join(ROOT, 'src-shared'))) {
      for (const spec of importSpecifiers(file)) {
        const target = spec.startsWith('.') ? path.resolve(path.dirname(file), spec) : '';
        if (builtins.has(spec) || spec.startsWith('node:')) violations.push(`${path.relative(ROOT, file)} imports ${spec}`);
        else if (target && !target.startsWith(path.join(ROOT, 'src-shared'))) violations.push(`${path.relative(ROOT, file)} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('lets the renderer import only src-shared and itself', () => {
    const allowed = [path.join(ROOT, 'src-renderer'), path.join(ROOT, 'src-shared')];
    const violations: string[] = [];
    for (const file of rendererFiles) {
      for (const { spec, target } of relativeImports(file)) {
        if (!allowed.some((dir) => target.startsWith(dir + path.sep))) violations.push(`${path.relative(ROOT, file)} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it(`keeps every source file in src-main, src-shared and src-renderer within ${MAX_SOURCE_LINES} lines`, () => {
    const long = [...mainFiles, ...rendererFiles]
      .map((file) => ({ file: path.relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > MAX_SOURCE_LINES)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('finds the imports it checks (guards the parser above)', () => {
    const specs = importSpecifiers(path.join(ROOT, 'src-main', 'cli.ts'));
    expect(specs.length).toBeGreaterThan(0);
  });
});
