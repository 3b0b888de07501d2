/**
 * Where export bytes come from: a plain file, a directory of split files
 * (`conversations-000.json …` with `export_manifest.json`), or a zip archive.
 *
 * Each input resolves to an ordered list of `ByteSource`s that can be opened (and re-opened:
 * detection peeks at the first one, the import then reads them all) as streams. Zip entries are
 * streamed straight out of the archive by yauzl and never written to disk, so an entry name like
 * `../../x` can do no harm; we still refuse such archives because no real export contains them.
 */
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import yauzl from 'yauzl';
import { CONVERSATION_FILE } from '../../src-shared/import-files.js';
import { UserError } from '../../src-shared/types.js';

export interface ByteSource {
  /** How errors and warnings name it: the file path, or "archive.zip:conversations.json". */
  label: string;
  /** Byte length where known, to tell a truncated file from a malformed one. */
  size: number;
  /** The name inside the archive or directory: decides whether a `.jsonl` extension applies. */
  name: string;
}

/** An input made concrete: its sources in import order and how to open each. */
export interface ReadingPass {
  open(source: ByteSource): Promise<Readable>;
  close(): void;
}

export interface ResolvedInput {
  kind: 'file' | 'directory' | 'zip';
  sources: ByteSource[];
  warnings: string[];
  /** Starts one reading pass over the sources; `close()` it when the pass ends. */
  startPass(): Promise<ReadingPass>;
  /** sha256 of the file bytes (a directory: of its conversation files concatenated in order). */
  sha256(): Promise<string>;
}

const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const EMPTY_ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x05, 0x06]);

export async function resolveInput(inputPath: string): Promise<ResolvedInput> {
  let stat;
  try {
    stat = await fs.stat(inputPath);
  } catch (err) {
    throw new UserError(`${inputPath}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (stat.isDirectory()) return resolveDirectory(inputPath);
  if (!stat.isFile()) throw new UserError(`${inputPath}: not a regular file or directory`);
  const magic = await readFirstBytes(inputPath, 4);
  if (magic.equals(ZIP_MAGIC) || magic.equals(EMPTY_ZIP_MAGIC)) return resolveZip(inputPath);
  return filesInput('file', [{ label: inputPath, size: stat.size, name: path.basename(inputPath) }], [inputPath], []);
}

async function readFirstBytes(file: string, n: number): Promise<Buffer> {
  const handle = await fs.open(file, 'r');
  try {
    const buf = Buffer.alloc(n);
    const { bytesRead } = await handle.read(buf, 0, n, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

function filesInput(kind: 'file' | 'directory', sources: ByteSource[], files: string[], warnings: string[]): ResolvedInput {
  return {
    kind,
    sources,
    warnings,
    startPass: async () => ({
      open: async (source) => createReadStream(files[sources.indexOf(source)]!),
      close: () => {},
    }),
    sha256: async () => {
      const hash = createHash('sha256');
      for (const file of files) {
        for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
      }
      return hash.digest('hex');
    },
  };
}

/** Orders conversations.json first, then the split parts by their number. */
function conversationFileOrder(a: string, b: string): number {
  const na = Number(CONVERSATION_FILE.exec(path.basename(a))?.[1] ?? -1);
  const nb = Number(CONVERSATION_FILE.exec(path.basename(b))?.[1] ?? -1);
  return na - nb || a.localeCompare(b);
}

async function resolveDirectory(dir: string): Promise<ResolvedInput> {
  const names = (await fs.readdir(dir)).filter((name) => CONVERSATION_FILE.test(name)).sort(conversationFileOrder);
  if (names.length === 0) {
    throw new UserError(`${dir}: a directory must hold conversations.json or split files conversations-000.json …; found none`);
  }
  const warnings = await checkManifest(dir, names);
  const files = names.map((name) => path.join(dir, name));
  const sources: ByteSource[] = [];
  for (const file of files) sources.push({ label: file, size: (await fs.stat(file)).size, name: path.basename(file) });
  return filesInput('directory', sources, files, warnings);
}

/**
 * The manifest's exact schema is not documented, so it is read leniently: every string in it
 * that names a conversation file counts as listed. Listed-but-missing parts are the case that
 * matters (an incomplete download); they are reported, and the parts present still import.
 */
async function checkManifest(dir: string, present: string[]): Promise<string[]> {
  const manifestPath = path.join(dir, 'export_manifest.json');
  const isSplit = present.some((name) => /-\d+\.json$/i.test(name));
  let manifest: unknown;
  try {
    manifest = JSON.parse(await fs.readFile(manifestPath, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      return isSplit ? [`${dir}: no export_manifest.json; importing ${present.length} conversation files in name order`] : [];
    }
    return [`${manifestPath}: unreadable manifest (${(err as Error).message}); importing the ${present.length} conversation files found`];
  }
  const listed = new Set<string>();
  const collect = (value: unknown): void => {
    if (typeof value === 'string') {
      const base = value.split(/[\\/]/).pop()!;
      if (CONVERSATION_FILE.test(base)) listed.add(base);
    } else if (Array.isArray(value)) value.forEach(collect);
    else if (value && typeof value === 'object') Object.values(value).forEach(collect);
  };
  collect(manifest);
  const warnings: string[] = [];
  const missing = [...listed].filter((name) => !present.includes(name)).sort(conversationFileOrder);
  if (missing.length) warnings.push(`${manifestPath}: lists files that are missing: ${missing.join(', ')}`);
  const unlisted = listed.size ? present.filter((name) => !listed.has(name)) : [];
  if (unlisted.length) warnings.push(`${manifestPath}: does not list ${unlisted.join(', ')}; imported anyway`);
  return warnings;
}

function openZip(zipPath: string): Promise<yauzl.ZipFile> {
  return yauzl.openPromise(zipPath, { lazyEntries: true, autoClose: false, strictFileNames: false }).catch((err: Error) => {
    throw new UserError(`${zipPath}: not a readable zip archive (${err.message})`);
  });
}

/** Lists entry headers only (no data is read); rejects names that would escape a folder. */
function listEntries(zipPath: string, zip: yauzl.ZipFile): Promise<yauzl.Entry[]> {
  return new Promise((resolve, reject) => {
    const entries: yauzl.Entry[] = [];
    zip.on('entry', (entry: yauzl.Entry) => {
      const name = entry.fileName;
      if (isUnsafeEntryName(name)) {
        reject(new UserError(`${zipPath}: refusing an archive with an unsafe entry name '${name}'`));
        return;
      }
      entries.push(entry);
      zip.readEntry();
    });
    zip.on('end', () => resolve(entries));
    zip.on('error', (err: Error) =>
      reject(new UserError(`${zipPath}: damaged or unsafe zip archive (${err.message})`)),
    );
    zip.readEntry();
  });
}

export function isUnsafeEntryName(name: string): boolean {
  return (
    name.startsWith('/') || name.startsWith('\\') || /^[a-zA-Z]:/.test(name) || name.split(/[\\/]/).includes('..')
  );
}

/**
 * Picks the conversation entries: conversations.json / conversations-NNN.json at any depth
 * (ChatGPT and Claude exports both use that name). Failing that, an archive holding exactly
 * one .json/.jsonl file is taken to be that file. Everything else (chat.html, images, user.json)
 * is ignored.
 */
function pickConversationEntries(zipPath: string, entries: yauzl.Entry[]): yauzl.Entry[] {
  const files = entries.filter((e) => !e.fileName.endsWith('/'));
  const conversations = files
    .filter((e) => CONVERSATION_FILE.test(path.posix.basename(e.fileName)))
    .sort((a, b) => conversationFileOrder(a.fileName, b.fileName));
  if (conversations.length) return conversations;
  const jsonFiles = files.filter((e) => /\.jsonl?$/i.test(e.fileName) && !/(^|\/)__MACOSX\//.test(e.fileName));
  if (jsonFiles.length === 1) return jsonFiles;
  throw new UserError(
    `${zipPath}: the archive holds no conversations.json` +
      (jsonFiles.length ? ` (and ${jsonFiles.length} other JSON files: ${jsonFiles.map((e) => e.fileName).slice(0, 5).join(', ')})` : ''),
  );
}

async function resolveZip(zipPath: string): Promise<ResolvedInput> {
  const zip = await openZip(zipPath);
  let picked: yauzl.Entry[];
  try {
    picked = pickConversationEntries(zipPath, await listEntries(zipPath, zip));
  } finally {
    zip.close();
  }
  const names = picked.map((e) => e.fileName);
  const sources: ByteSource[] = picked.map((e) => ({
    label: `${zipPath}:${e.fileName}`,
    size: e.uncompressedSize,
    name: path.posix.basename(e.fileName),
  }));
  return {
    kind: 'zip',
    sources,
    warnings: [],
    // Each pass opens the archive afresh, so an OpenedExport never holds a file descriptor
    // between detection and import, or after an abandoned iteration.
    startPass: async () => {
      const zip = await openZip(zipPath);
      let byName: Map<string, yauzl.Entry>;
      try {
        byName = new Map((await listEntries(zipPath, zip)).map((e) => [e.fileName, e]));
      } catch (err) {
        zip.close();
        throw err;
      }
      return {
        open: async (source) => {
          const entry = byName.get(names[sources.indexOf(source)]!);
          if (!entry) throw new UserError(`${source.label}: the entry vanished from the archive`);
          return zip.openReadStreamPromise(entry).catch((err: Error) => {
            throw new UserError(`${source.label}: cannot read the entry (${err.message})`);
          });
        },
        close: () => zip.close(),
      };
    },
    sha256: async () => {
      const hash = createHash('sha256');
      for await (const chunk of createReadStream(zipPath)) hash.update(chunk as Buffer);
      return hash.digest('hex');
    },
  };
}
