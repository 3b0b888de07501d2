/**
 * A model named as `hindsight models` lists it (docs/design.md §Model catalog): `--model
 * qwen3:0.6b` (Ollama's name), `--model bartowski/Qwen3-GGUF/Qwen3-0.6B-Q8_0.gguf` (LM Studio's),
 * `--model Qwen/Qwen3-0.6B` (the Hugging Face cache's) or a name in the user's folders, wherever
 * a path to a model is taken. A path that exists is always the path: a name is only looked up
 * when nothing is there, so a typed path works as before and a model folder named like a
 * catalog entry is never shadowed.
 *
 * The lookup: the name as listed; then, as Ollama reads names, without a tag it is `:latest`
 * and `library/` or `registry.ollama.ai/library/` in front changes nothing; then the same
 * letters in another case, when that picks one model. A name two different models have, a
 * name no model has, and a name of a model Hindsight cannot load are each one line (the
 * unknown one with the closest names listed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { MODEL_SOURCE_NAMES, type CatalogModel } from '../../src-shared/models-api.js';
import { UserError } from '../../src-shared/types.js';
import { scanModels, type CatalogOptions } from './model-catalog.js';

/** How many of the closest names an "unknown model" line lists. */
const CLOSE_MATCHES = 4;

/** Whether `value` is written as a path (absolute, ./, ../, ~/): such a value is never looked up as a name. */
export function looksLikePath(value: string): boolean {
  return path.isAbsolute(value) || /^\.{1,2}([/\\]|$)/.test(value) || value.startsWith('~');
}

/** The names a typed name may stand for, in order of preference (Ollama's spelling rules). */
function spellings(name: string): string[] {
  let n = name.trim();
  for (const prefix of ['registry.ollama.ai/library/', 'registry.ollama.ai/', 'library/']) {
    if (n.startsWith(prefix) && n.length > prefix.length) n = n.slice(prefix.length);
  }
  const out = [name, n];
  // Ollama: a name without a tag is the `latest` tag; a name with a slash may be an LM Studio or Hugging Face name, tried as it is first.
  if (!/:[^/]+$/.test(n)) out.push(`${n}:latest`);
  return [...new Set(out)];
}

/** The distinct models (by path) among `models`. */
function byPath(models: CatalogModel[]): CatalogModel[] {
  const seen = new Map<string, CatalogModel>();
  for (const m of models) if (!seen.has(m.path)) seen.set(m.path, m);
  return [...seen.values()];
}

/** Levenshtein distance, case-insensitive. */
function distance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length]!;
}

/** The catalog names nearest `name`: those containing it or contained in it first, then by edit distance. */
export function closeNames(name: string, models: readonly CatalogModel[], count = CLOSE_MATCHES): string[] {
  const q = name.toLowerCase().replace(/:latest$/, '');
  const scored = [...new Set(models.map((m) => m.name))].map((n) => {
    const l = n.toLowerCase();
    const base = l.replace(/:[^/:]*$/, '');
    const contains = l.includes(q) || (base.length >= 3 && q.includes(base));
    return { n, contains, d: distance(q, l), db: distance(q, base) };
  });
  const near = scored.filter((s) => s.contains || Math.min(s.d, s.db) <= Math.max(2, Math.floor(q.length / 3)));
  near.sort((a, b) => Number(b.contains) - Number(a.contains) || Math.min(a.d, a.db) - Math.min(b.d, b.db) || a.n.localeCompare(b.n));
  return near.slice(0, count).map((s) => s.n);
}

const where = (m: CatalogModel) => `${MODEL_SOURCE_NAMES[m.source]}: ${m.path}`;

/**
 * What `value` names: the value itself when something is at that path or it is written as a
 * path; else the path of the catalog model of that name. `flag` names the option in the
 * messages ("--model", "--judge-model"). Throws a one-line UserError for a name that is
 * unknown, ambiguous, or a model Hindsight cannot load.
 */
export function resolveModelName(value: string, flag = '--model', options: CatalogOptions = {}): string {
  if (value === '' || looksLikePath(value) || fs.existsSync(value)) return value;
  const { models } = scanModels(options);
  let found: CatalogModel[] = [];
  for (const s of spellings(value)) {
    found = byPath(models.filter((m) => m.name === s));
    if (found.length) break;
  }
  if (!found.length) {
    const lower = spellings(value).map((s) => s.toLowerCase());
    found = byPath(models.filter((m) => lower.includes(m.name.toLowerCase())));
  }
  if (found.length > 1) {
    throw new UserError(`${flag} ${value}: ${found.length} models have that name (${found.map(where).join('; ')}): give the path of the one you mean`);
  }
  const [model] = found;
  if (!model) {
    const close = closeNames(value, models);
    const hint = close.length ? `; the closest: ${close.join(', ')}` : models.length ? '' : " (it lists none on this machine)";
    throw new UserError(`${flag} ${value}: no such file or folder, and no model of that name in 'hindsight models'${hint}`);
  }
  if (!model.loadable) throw new UserError(`${flag} ${value}: ${MODEL_SOURCE_NAMES[model.source]}'s ${model.name} (${model.path}) cannot be loaded: ${model.reason}`);
  return model.path;
}
