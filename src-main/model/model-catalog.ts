/**
 * The models on this machine (docs/design.md §Model catalog), for `hindsight models` and the
 * model picker:
 *   - Ollama's store (`OLLAMA_MODELS`, else ~/.ollama/models): each manifest under
 *     manifests/<host>/<namespace>/<model>/<tag> lists layers; the one of media type
 *     `application/vnd.ollama.image.model` names the blob (blobs/sha256-<hex>) that is the GGUF;
 *   - LM Studio's models folders (the one its settings name, ~/.lmstudio/models, and the older
 *     ~/.cache/lm-studio/models): <publisher>/<repo>/*.gguf;
 *   - the Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub):
 *     models--<org>--<name>/snapshots/<revision>/, the revision refs/main names, holding a
 *     checkpoint (config.json) or .gguf files;
 *   - the folders the user added (the `modelFolders` setting): checkpoint folders and .gguf
 *     files found in them, a few levels deep.
 * Each is described from its headers only (./model-inspect.ts). A broken entry (an unreadable
 * manifest, a missing blob, a truncated file, a symbolic link loop) is an entry with its
 * reason; nothing here throws. The home folder and the environment are parameters, so the tests
 * build fake stores in a temporary folder.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CatalogLocation, CatalogModel, ModelCatalog, ModelSource } from '../../src-shared/models-api.js';
import { MODEL_SOURCES } from '../../src-shared/models-api.js';
import { inspectCheckpoint, inspectGguf, inspectModel, oneLine } from './model-inspect.js';

export interface CatalogOptions {
  /** The home folder the default locations are under (os.homedir()). */
  home?: string;
  /** OLLAMA_MODELS, HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME are read from here (process.env). */
  env?: Record<string, string | undefined>;
  /** The folders the user added. */
  folders?: readonly string[];
}

const OLLAMA_MODEL_LAYER = 'application/vnd.ollama.image.model';
const OLLAMA_ADAPTER_LAYER = 'application/vnd.ollama.image.adapter';
const OLLAMA_REGISTRY = 'registry.ollama.ai';
/** How deep a walk goes below the folder it starts in, and how many entries it reads at most. */
const MAX_DEPTH = 4;
const MAX_ENTRIES = 20_000;
/** A later part of a split GGUF: the first part stands for the model. */
const LATER_PART = /-(\d{5})-of-\d{5}\.gguf$/i;

/** The places the catalog looks in, by source, for this home and environment. */
export function catalogLocations(options: CatalogOptions = {}): { source: ModelSource; path: string }[] {
  const home = options.home ?? os.homedir();
  const env = options.env ?? process.env;
  const hfHub = env.HF_HUB_CACHE || path.join(env.HF_HOME || path.join(env.XDG_CACHE_HOME || path.join(home, '.cache'), 'huggingface'), 'hub');
  const lmStudio = [path.join(home, '.lmstudio', 'models'), path.join(home, '.cache', 'lm-studio', 'models')];
  const moved = lmStudioDownloadsFolder(home);
  if (moved && !lmStudio.includes(moved)) lmStudio.unshift(moved);
  return [
    { source: 'ollama', path: env.OLLAMA_MODELS || path.join(home, '.ollama', 'models') },
    ...lmStudio.map((p) => ({ source: 'lmstudio' as const, path: p })),
    { source: 'huggingface', path: hfHub },
    ...(options.folders ?? []).map((f) => ({ source: 'folder' as const, path: f })),
  ];
}

/** The models folder chosen in LM Studio's settings (its "Models Directory", `downloadsFolder` in ~/.lmstudio/settings.json). */
function lmStudioDownloadsFolder(home: string): string | undefined {
  try {
    const folder = (JSON.parse(fs.readFileSync(path.join(home, '.lmstudio', 'settings.json'), 'utf8')) as { downloadsFolder?: unknown }).downloadsFolder;
    return typeof folder === 'string' && folder ? path.resolve(home, folder) : undefined;
  } catch {
    return undefined; // no settings, or unreadable: the default folders
  }
}

/** Every model in every location; those Hindsight can load first within each source. */
export function scanModels(options: CatalogOptions = {}): ModelCatalog {
  const models: CatalogModel[] = [];
  const searched: CatalogLocation[] = [];
  for (const loc of catalogLocations(options)) {
    const exists = isDir(loc.path);
    searched.push({ ...loc, exists });
    if (!exists) continue;
    const found = loc.source === 'ollama' ? scanOllama(loc.path) : loc.source === 'huggingface' ? scanHuggingFace(loc.path) : scanFolder(loc.source, loc.path);
    models.push(...found);
  }
  const seen = new Set<string>();
  const unique = models.filter((m) => {
    const key = `${m.source}\0${m.name}\0${m.path}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const order = (s: ModelSource) => MODEL_SOURCES.indexOf(s);
  unique.sort((a, b) => order(a.source) - order(b.source) || Number(b.loadable) - Number(a.loadable) || a.name.localeCompare(b.name));
  return { models: unique, searched, folders: [...(options.folders ?? [])] };
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The names in a folder, or none when it cannot be read. */
function list(dir: string): fs.Dirent[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

function entry(source: ModelSource, name: string, p: string, facts: ReturnType<typeof inspectModel>): CatalogModel {
  return { name, source, path: p, ...facts };
}

function broken(source: ModelSource, name: string, p: string, reason: string): CatalogModel {
  return entry(source, name, p, { format: null, architecture: null, parameters: null, bytes: null, quantization: null, contextLength: null, loadable: false, reason, answers: null });
}

// ---------------------------------------------------------------------------------------
// Ollama
// ---------------------------------------------------------------------------------------

/** `qwen2.5:7b-instruct` for the library, `user/model:tag` for a user's, `host/ns/model:tag` elsewhere. */
export function ollamaName(parts: string[]): string {
  const tag = parts.at(-1)!;
  const repo = parts.slice(0, -1);
  if (repo[0] === OLLAMA_REGISTRY) repo.shift();
  if (repo.length === 2 && repo[0] === 'library') repo.shift();
  return `${repo.join('/')}:${tag}`;
}

function scanOllama(root: string): CatalogModel[] {
  const out: CatalogModel[] = [];
  const manifests = path.join(root, 'manifests');
  const walk = (dir: string, parts: string[]) => {
    for (const d of list(dir)) {
      const p = path.join(dir, d.name);
      if (d.isDirectory() && parts.length < 4) walk(p, [...parts, d.name]);
      else if (!d.isDirectory() && parts.length >= 2) out.push(ollamaModel(root, p, ollamaName([...parts, d.name])));
    }
  };
  walk(manifests, []);
  return out;
}

function ollamaModel(root: string, manifestFile: string, name: string): CatalogModel {
  let layers: { mediaType?: unknown; digest?: unknown }[];
  try {
    const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as { layers?: unknown };
    if (!Array.isArray(manifest.layers)) throw new Error('it lists no layers');
    layers = manifest.layers as typeof layers;
  } catch (err) {
    return broken('ollama', name, manifestFile, `unreadable manifest: ${oneLine(err, manifestFile)}`);
  }
  const model = layers.find((l) => l?.mediaType === OLLAMA_MODEL_LAYER);
  if (!model) return broken('ollama', name, manifestFile, 'its manifest has no model layer');
  const digest = typeof model.digest === 'string' ? model.digest : '';
  if (!/^sha256[:-][0-9a-f]{64}$/.test(digest)) return broken('ollama', name, manifestFile, `its model layer names no blob (digest ${JSON.stringify(model.digest ?? null)})`);
  const blob = path.join(root, 'blobs', digest.replace(':', '-'));
  if (!fs.existsSync(blob)) return broken('ollama', name, blob, `blob ${path.basename(blob)} is missing (pull the model again: ollama pull ${name})`);
  const facts = inspectGguf(blob);
  if (facts.loadable && layers.some((l) => l?.mediaType === OLLAMA_ADAPTER_LAYER)) {
    return entry('ollama', name, blob, { ...facts, loadable: false, reason: 'built with an ADAPTER layer, which Hindsight would leave out: use its base model' });
  }
  return entry('ollama', name, blob, facts);
}

// ---------------------------------------------------------------------------------------
// The Hugging Face cache
// ---------------------------------------------------------------------------------------

/** The snapshot refs/main names, else the one written last. */
function hfSnapshot(repoDir: string): string | null {
  const snapshots = path.join(repoDir, 'snapshots');
  try {
    const main = fs.readFileSync(path.join(repoDir, 'refs', 'main'), 'utf8').trim();
    if (main && isDir(path.join(snapshots, main))) return path.join(snapshots, main);
  } catch {
    // no refs/main: a revision was asked for by hash
  }
  const revs = list(snapshots).filter((d) => d.isDirectory()).map((d) => path.join(snapshots, d.name));
  revs.sort((a, b) => mtime(b) - mtime(a));
  return revs[0] ?? null;
}

function mtime(p: string): number {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return 0;
  }
}

function scanHuggingFace(hub: string): CatalogModel[] {
  const out: CatalogModel[] = [];
  for (const d of list(hub)) {
    if (!d.isDirectory() || !d.name.startsWith('models--')) continue;
    const repo = d.name.slice('models--'.length).split('--').join('/');
    const snapshot = hfSnapshot(path.join(hub, d.name));
    if (!snapshot) {
      out.push(broken('huggingface', repo, path.join(hub, d.name), 'no snapshot downloaded'));
      continue;
    }
    // A checkpoint, else its .gguf files (a repository of neither, a tokenizer's say, is no model).
    if (list(snapshot).some((e) => e.name === 'config.json')) out.push(entry('huggingface', repo, snapshot, inspectCheckpoint(snapshot)));
    else for (const m of scanFolder('huggingface', snapshot)) out.push({ ...m, name: `${repo}/${m.name}` });
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// LM Studio and the user's folders: checkpoint folders and .gguf files in a tree
// ---------------------------------------------------------------------------------------

/**
 * The models under `root`, named by their path below it: every folder with config.json (not
 * looked into further) and every .gguf file (a split model once, by its first part). Links are
 * followed, each folder visited once (a link loop ends there); a link that leads nowhere, or
 * round in a loop, where a model should be is an entry with that reason.
 */
export function scanFolder(source: ModelSource, root: string): CatalogModel[] {
  const out: CatalogModel[] = [];
  const visited = new Set<string>();
  let budget = MAX_ENTRIES;
  const nameOf = (p: string) => path.relative(root, p).split(path.sep).join('/') || path.basename(p);
  if (!isDir(root)) {
    if (fs.existsSync(root)) out.push(entry(source, path.basename(root), root, inspectModel(root)));
    return out;
  }
  const walk = (dir: string, depth: number) => {
    let real: string;
    try {
      real = fs.realpathSync(dir);
    } catch {
      return;
    }
    if (visited.has(real)) return;
    visited.add(real);
    const entries = list(dir);
    if (entries.some((e) => e.name === 'config.json')) {
      out.push(entry(source, nameOf(dir), dir, inspectCheckpoint(dir)));
      return;
    }
    for (const e of entries) {
      if (--budget < 0) return;
      const p = path.join(dir, e.name);
      const gguf = /\.gguf$/i.test(e.name);
      let stat: fs.Stats;
      try {
        stat = fs.statSync(p);
      } catch (err) {
        if (gguf) out.push(broken(source, nameOf(p), p, oneLine(err, p)));
        continue;
      }
      if (stat.isDirectory()) {
        if (depth < MAX_DEPTH && !e.name.startsWith('.')) walk(p, depth + 1);
      } else if (gguf && !(LATER_PART.test(e.name) && !/-00001-of-/i.test(e.name))) {
        out.push(entry(source, nameOf(p), p, inspectGguf(p)));
      }
    }
  };
  walk(root, 0);
  return out;
}
