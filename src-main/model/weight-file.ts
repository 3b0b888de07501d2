/**
 * One copy of a checkpoint's weights per process (docs/design.md §Memory): one ONNX
 * external-data file that every session of the checkpoint reads.
 *
 * ONNX Runtime maps external data into memory instead of copying it, so sessions loaded
 * from graphs that point at the same file share its pages (the OS page cache holds them
 * once). Without it each session (the training step, the teacher/reference pass, score,
 * generate) held its own fp32 copy. The weights a graph reads as they are (the embedding
 * and LM head rows, norms, and the linears when prepacking is off, ./ort-session.ts) stay
 * in the mapping; a session that prepacks its matmul weights for speed keeps a packed copy of
 * those instead.
 *
 * The file: `<tmp>/hindsight-weights-<pid>/<hash of the checkpoint's identity>/weights-<layout>.data`,
 * with `index.json` (the data file's name, and name → offset, length) beside it; each graph's
 * .onnx is written into the same folder, loaded and deleted. The first graph of a checkpoint
 * writes every weight it holds from the checkpoint (the initializers whose data is loaded
 * lazily); later graphs, in this thread or another worker of the process, reuse what the index
 * lists and write anything else into their own data file. The data file is named after its
 * layout (the hash of its names, offsets and lengths) and written under a temporary name and
 * renamed, then the index is: a reader never sees half a file, and the index always names a
 * data file laid out as it says, even when two writers race (each then gets a whole file, two
 * copies that once). The folder is removed when the process exits (the main thread's exit
 * handler: a worker that opens the model is started through {@link removeWeightFilesAtExit});
 * folders of processes that no longer run are removed when a new one is made.
 *
 * The graph cache (./graph-cache.ts) keeps the same layout in a folder that outlives the
 * process, so {@link placeWeights} serves both.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import { bytesPerElement, numel, tensorValues, type Graph, type Tensor } from '../graph/ir.js';
import { writeAllSync } from '../store/atomic-file.js';
import type { ExternalRef } from '../graph/onnx.js';

const INDEX = 'index.json';
const ALIGN = 4096;
const PREFIX = 'hindsight-weights-';

/** index.json: the data file (in the same folder) and where each weight lies in it. */
interface Index {
  file: string;
  tensors: Record<string, { offset: number; length: number }>;
}

const folders = new Map<string, string>();
const cleanedAtExit = new Set<string>();

/**
 * Told how far a weights file being written is (bytes of weights written, of the total): a
 * model's first load converts every weight (dequantising a GGUF, transposing, quantising), which
 * for a 7–8B model takes minutes; the model worker passes it on, so the page and the commands
 * can say so (./model-worker.ts). One reporter a thread.
 */
let weightsProgress: ((done: number, total: number) => void) | undefined;
export function reportWeightsProgress(report: ((done: number, total: number) => void) | undefined): void {
  weightsProgress = report;
}

/** A conversion is told of once it has taken this long: a small model's, done in a moment, says nothing. */
export const CONVERSION_QUIET_MS = 2000;

/**
 * LoadOptions.onConversion that writes a line each tenth of the way (`generate` on stderr, `serve`
 * in its log, a fine-tune's status) once the conversion has taken {@link CONVERSION_QUIET_MS}, and its end where it said
 * anything: "converting the model's weights for this machine, the first time only (kept for the
 * next load): 40%".
 */
export function conversionLines(write: (line: string) => void, now: () => number = Date.now): (done: number, total: number) => void {
  let said = -1;
  let started: number | undefined;
  return (done, total) => {
    started ??= now();
    const tenth = total > 0 ? Math.floor((done / total) * 10) : 10;
    // Silent until it has taken a while; then every tenth, its end included.
    if (tenth === said || (said < 0 && now() - started < CONVERSION_QUIET_MS)) return;
    said = tenth;
    write(`converting the model's weights for this machine, the first time only (kept for the next load): ${tenth * 10}%`);
  };
}

/** The shared folder of a checkpoint's weights in this process. */
export function weightFolder(identity: string, root = os.tmpdir()): string {
  const key = `${root}|${identity}`;
  let dir = folders.get(key);
  if (!dir) {
    const processDir = path.join(root, `${PREFIX}${process.pid}`);
    if (!fs.existsSync(processDir)) removeStaleFolders(root);
    dir = path.join(processDir, crypto.createHash('sha256').update(identity).digest('hex').slice(0, 16));
    fs.mkdirSync(dir, { recursive: true });
    folders.set(key, dir);
    if (isMainThread) removeWeightFilesAtExit(root);
  }
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Where each lazily loaded weight of `graph` lies in the shared file, writing the file first
 * if no graph of this checkpoint has yet. Returns saveModel's `placed` callback.
 */
export function placeWeights(dir: string, graph: Graph): (name: string, t: Tensor) => ExternalRef | undefined {
  const index = readIndex(dir) ?? writeWeights(dir, graph);
  return (name, t) => {
    const at = index.tensors[name];
    if (!at || typeof t.data !== 'function' || at.length !== numel(t.dims) * bytesPerElement(t.dtype)) return undefined;
    return { location: index.file, offset: at.offset, length: at.length };
  };
}

/** Whether `dir` holds an index and the whole data file it names. */
export function hasWholeWeights(dir: string): boolean {
  return readIndex(dir) !== undefined;
}

/** The folder's index, if it is there and its data file is whole; else undefined (write it again). */
function readIndex(dir: string): Index | undefined {
  try {
    const index = JSON.parse(fs.readFileSync(path.join(dir, INDEX), 'utf8')) as Index;
    const end = Math.max(0, ...Object.values(index.tensors).map((t) => t.offset + t.length));
    return typeof index.file === 'string' && fs.statSync(path.join(dir, index.file)).size >= end ? index : undefined;
  } catch {
    return undefined;
  }
}

function writeWeights(dir: string, graph: Graph): Index {
  const tensors: Index['tensors'] = {};
  let offset = 0;
  for (const [name, t] of graph.initializers) {
    if (typeof t.data !== 'function') continue; // constants of this graph, not checkpoint weights
    const length = numel(t.dims) * bytesPerElement(t.dtype);
    tensors[name] = { offset, length };
    offset = Math.ceil((offset + length) / ALIGN) * ALIGN;
  }
  const layout = crypto.createHash('sha256').update(JSON.stringify(tensors)).digest('hex').slice(0, 16);
  const index: Index = { file: `weights-${layout}.data`, tensors };
  const suffix = `.${process.pid}-${threadId}.tmp`;
  const dataTmp = path.join(dir, index.file + suffix);
  const fd = fs.openSync(dataTmp, 'w', 0o600);
  try {
    const total = Object.values(tensors).reduce((a, t) => a + t.length, 0);
    let done = 0;
    weightsProgress?.(0, total);
    for (const [name, at] of Object.entries(tensors)) {
      const v = tensorValues(graph.initializers.get(name)!);
      writeAllSync(fd, new Uint8Array(v.buffer, v.byteOffset, v.byteLength), at.offset);
      done += at.length;
      weightsProgress?.(done, total);
    }
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(dataTmp, path.join(dir, index.file));
  fs.writeFileSync(path.join(dir, INDEX + suffix), JSON.stringify(index), { mode: 0o600 });
  fs.renameSync(path.join(dir, INDEX + suffix), path.join(dir, INDEX));
  return index;
}

/**
 * Removes this process's weight folders when it exits. Call it from the main thread of a
 * process whose workers open models: a worker's own exit must not remove files that other
 * threads still read.
 */
export function removeWeightFilesAtExit(root = os.tmpdir()): void {
  if (cleanedAtExit.has(root) || !isMainThread) return;
  cleanedAtExit.add(root);
  const processDir = path.join(root, `${PREFIX}${process.pid}`);
  process.on('exit', () => {
    try {
      fs.rmSync(processDir, { recursive: true, force: true });
    } catch {
      // Windows keeps mapped files locked; the next process removes the folder.
    }
  });
}

/** Folders left by processes that are gone (killed before their exit handler ran). */
function removeStaleFolders(root: string): void {
  let names: string[] = [];
  try {
    names = fs.readdirSync(root).filter((n) => n.startsWith(PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(name.slice(PREFIX.length));
    if (!Number.isInteger(pid) || pid === process.pid || isRunning(pid)) continue;
    try {
      fs.rmSync(path.join(root, name), { recursive: true, force: true });
    } catch {
      // In use or not ours: leave it.
    }
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
