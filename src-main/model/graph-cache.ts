/**
 * The graph cache (docs/design.md §Graph cache): the inference graphs a process builds, kept
 * on disk so the next process loads them instead of building them again. Building is cheap;
 * what a new process pays is reading, transposing (and with --quantize, quantising) every
 * weight and writing them out for ONNX Runtime, a second or more for a 125M model.
 *
 * Layout, under the root (`HINDSIGHT_GRAPH_CACHE`, else `<OS cache folder>/hindsight/graphs`):
 *
 *   <hash of the weights' identity>/     one folder per checkpoint content and --quantize
 *     source.json                        that identity: folder, config.json hash, weight files
 *     index.json, weights-<layout>.data  the weights, laid out as ./weight-file.ts lays them
 *     generate-<fingerprint>.onnx        each graph built, referring into the weights file
 *
 * A graph's file is named by a fingerprint of everything it holds but the weights (nodes,
 * inputs, outputs, small constants, initializer names and shapes: ./graph-fingerprint.ts), so
 * a different build (another Hindsight, other options) gets its own file and never a wrong
 * one. The weights are named by the checkpoint's identity (Checkpoint.identity: its folder,
 * the hash of config.json, each weight file's size and modification time, and the
 * quantisation), so changed weights or a changed config.json get a new folder; the old
 * folders of that checkpoint are removed then, and so are folders whose checkpoint is gone and
 * folders unused for GRAPH_CACHE_UNUSED_DAYS. {@link graphCacheInfo} lists the folders (Settings,
 * `hindsight cache`) and {@link clearGraphCache} removes them; neither, nor the pruning, touches
 * anything under the root but the cache's own folders.
 *
 * Every file is written under a temporary name and renamed, so a reader never sees half a
 * file and two processes building the same graph at once each end with a whole one. Folders
 * are 0700 and files 0600: they hold the user's model. The training step's sessions use the
 * fp32 folder of a checkpoint too (their graphs are written, loaded and removed), so one
 * process that trains and generates maps one copy of the weights (docs/design.md §Memory).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import type { Graph } from '../graph/ir.js';
import { saveModel } from '../graph/onnx.js';
import { graphFingerprint, GRAPH_CACHE_VERSION } from './graph-fingerprint.js';
import { hasWholeWeights, placeWeights } from './weight-file.js';
import type { CachedModelFolder, GraphCacheInfo } from '../../src-shared/models-api.js';

const SOURCE = 'source.json';
/** A cache folder's name: the first hex digits of a hash of its weights' identity (every version so far). */
const FOLDER_NAME_LENGTH = 24;
const FOLDER_NAME = new RegExp(`^[0-9a-f]{${FOLDER_NAME_LENGTH}}$`);
const OFF = new Set(['off', '0', 'false', 'no']);

/** The per-user cache folder of the graph cache, by platform. */
export function defaultGraphCacheRoot(): string {
  const home = os.homedir();
  const base = process.platform === 'win32'
    ? process.env.LOCALAPPDATA ?? path.join(home, 'AppData', 'Local')
    : process.platform === 'darwin' ? path.join(home, 'Library', 'Caches') : process.env.XDG_CACHE_HOME || path.join(home, '.cache');
  return path.join(base, 'hindsight', 'graphs');
}

/**
 * The root in use: `option` when given (false: no cache), else HINDSIGHT_GRAPH_CACHE ('off'
 * turns it off, anything else is the folder), else {@link defaultGraphCacheRoot}.
 */
export function graphCacheRoot(option?: string | false): string | undefined {
  if (option === false) return undefined;
  if (option) return path.resolve(option);
  const env = process.env.HINDSIGHT_GRAPH_CACHE;
  if (env !== undefined && env !== '') return OFF.has(env.toLowerCase()) ? undefined : path.resolve(env);
  return defaultGraphCacheRoot();
}

interface Source {
  /** GRAPH_CACHE_VERSION when written (a number before the ONNX Runtime version was part of it). */
  format: string | number;
  identity: string;
}

/** Fields of a Checkpoint.identity string; undefined for identities of another form. */
function parseIdentity(identity: string): { dir: string; weights: string; variant: string | null } | undefined {
  try {
    const v = JSON.parse(identity) as { dir?: unknown; config?: unknown; files?: unknown; variant?: unknown };
    return typeof v.dir === 'string' ? { dir: v.dir, weights: JSON.stringify([v.config, v.files]), variant: typeof v.variant === 'string' ? v.variant : null } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A folder not used for this many days is removed when another folder is made: a model tried
 * once keeps no copy for ever. Every load marks its folder used (source.json's modification time).
 */
export const GRAPH_CACHE_UNUSED_DAYS = 30;
const UNUSED_MS = GRAPH_CACHE_UNUSED_DAYS * 24 * 3600 * 1000;

/**
 * The cache folder for `identity` under the root `option` resolves to, or undefined when the
 * cache is off or its folder cannot be made (a read-only or full disk): the cache only saves
 * time, so the caller goes on without it.
 */
export function openCacheFolder(option: string | false | undefined, identity: string): string | undefined {
  const root = graphCacheRoot(option);
  if (!root) return undefined;
  try {
    return cachedWeightFolder(root, identity);
  } catch {
    return undefined;
  }
}

/** The cache folder of the weights named `identity` (created, with its source.json); prunes stale folders when it is new. */
export function cachedWeightFolder(root: string, identity: string): string {
  const dir = path.join(root, crypto.createHash('sha256').update(`${GRAPH_CACHE_VERSION}|${identity}`).digest('hex').slice(0, FOLDER_NAME_LENGTH));
  const source = path.join(dir, SOURCE);
  if (!fs.existsSync(source)) {
    removeStaleFolders(root, identity);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeAtomically(source, JSON.stringify({ format: GRAPH_CACHE_VERSION, identity } satisfies Source));
  } else {
    try {
      const now = new Date();
      fs.utimesSync(source, now, now); // used now (GRAPH_CACHE_UNUSED_DAYS)
    } catch {
      // a read-only cache is still read
    }
  }
  return dir;
}

/**
 * Folders of an older cache format or ONNX Runtime, of a checkpoint folder that is gone, or of this same
 * checkpoint folder with other weights or another config.json: nothing will read them again. And
 * folders unused for {@link GRAPH_CACHE_UNUSED_DAYS} days.
 */
function removeStaleFolders(root: string, identity: string): void {
  const mine = parseIdentity(identity);
  for (const { folder, source } of ownFolders(root)) {
    const theirs = parseIdentity(source.identity);
    const stale = source.format !== GRAPH_CACHE_VERSION
      || (theirs !== undefined && !fs.existsSync(theirs.dir))
      || (theirs !== undefined && mine !== undefined && theirs.dir === mine.dir && theirs.weights !== mine.weights)
      || lastUsed(folder) < Date.now() - UNUSED_MS;
    if (!stale) continue;
    try {
      fs.rmSync(folder, { recursive: true, force: true });
    } catch {
      // Windows keeps mapped files locked while a process uses them: a later process removes it.
    }
  }
}

function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.${process.pid}-${threadId}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** The cached file of `graph` in `dir` (a {@link cachedWeightFolder}), written first if it is not there. */
export function cachedGraphFile(dir: string, graph: Graph): { onnxPath: string; cached: boolean } {
  const base = `${graph.name}-${graphFingerprint(graph)}`;
  const onnxPath = path.join(dir, `${base}.onnx`);
  if (fs.existsSync(onnxPath) && hasWholeWeights(dir)) return { onnxPath, cached: true };
  // Weights the folder's file lacks go to this graph's own data file, named for this writer
  // so a racing writer's graph never points into it.
  const unique = `${base}.${process.pid}-${threadId}`;
  const tmp = path.join(dir, `${unique}.onnx.tmp`);
  const { dataPath } = saveModel(graph, tmp, placeWeights(dir, graph), path.join(dir, `${unique}.data`));
  if (fs.statSync(dataPath).size === 0) fs.rmSync(dataPath); // nothing refers to an empty one
  fs.renameSync(tmp, onnxPath);
  return { onnxPath, cached: false };
}

/** Forgets a cached graph file that would not load (a folder emptied under it, a damaged file). */
export function dropCachedGraph(onnxPath: string): void {
  fs.rmSync(onnxPath, { force: true });
}

/** When a cache folder was last used (source.json's modification time, which each load sets); 0 where unreadable. */
function lastUsed(folder: string): number {
  try {
    return fs.statSync(path.join(folder, SOURCE)).mtimeMs;
  } catch {
    return 0;
  }
}

/** What the cache under `option`'s root holds (docs/design.md §Graph cache): Settings and `hindsight cache` show it. */
export function graphCacheInfo(option?: string | false): GraphCacheInfo {
  const root = graphCacheRoot(option) ?? null;
  const folders: CachedModelFolder[] = [];
  for (const { folder, source } of root ? ownFolders(root) : []) {
    const identity = parseIdentity(source.identity);
    folders.push({ folder, model: identity?.dir ?? null, form: identity ? identity.variant ?? 'fp32' : null, bytes: folderBytes(folder), lastUsed: lastUsed(folder) });
  }
  folders.sort((a, b) => b.lastUsed - a.lastUsed);
  return { root, folders, bytes: folders.reduce((a, f) => a + f.bytes, 0) };
}

/**
 * Removes every folder of the cache ({@link graphCacheInfo}'s: its own alone). A model loaded now
 * keeps working (its files stay mapped until it closes; a graph it builds later makes its folder
 * again); where the system keeps a file in use from being removed (Windows), that folder stays and
 * is counted in `kept`.
 */
export function clearGraphCache(option?: string | false): { removed: number; bytes: number; kept: number } {
  const before = graphCacheInfo(option);
  let removed = 0, bytes = 0, kept = 0;
  for (const f of before.folders) {
    try {
      fs.rmSync(f.folder, { recursive: true, force: true });
      removed++;
      bytes += f.bytes;
    } catch {
      kept++;
    }
  }
  return { removed, bytes, kept };
}

/**
 * The cache's own folders under `root`, whatever version wrote them: real folders (not links)
 * named as {@link cachedWeightFolder} names them, with a source.json of this shape. Nothing else
 * there is read further, listed, or removed: a mistaken HINDSIGHT_GRAPH_CACHE (a home folder)
 * loses nothing, and a folder being made (no source.json yet) is left to its maker.
 */
function ownFolders(root: string): { folder: string; source: Source }[] {
  const out: { folder: string; source: Source }[] = [];
  for (const name of safeList(root)) {
    const folder = path.join(root, name);
    if (!FOLDER_NAME.test(name) || !fs.lstatSync(folder, { throwIfNoEntry: false })?.isDirectory()) continue;
    try {
      const source = JSON.parse(fs.readFileSync(path.join(folder, SOURCE), 'utf8')) as Source;
      if (typeof source?.identity === 'string' && (typeof source.format === 'string' || typeof source.format === 'number')) out.push({ folder, source });
    } catch {
      // not ours, or being made right now
    }
  }
  return out;
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

function folderBytes(folder: string): number {
  let bytes = 0;
  for (const name of safeList(folder)) bytes += fs.lstatSync(path.join(folder, name), { throwIfNoEntry: false })?.size ?? 0;
  return bytes;
}
