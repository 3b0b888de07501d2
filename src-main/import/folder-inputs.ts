/**
 * The inputs of one import, with folders of exports opened up (docs/design.md §Imports). A path
 * that is a file, a zip or an export folder (conversations.json or split files) is one input, as
 * it always was. Any other folder is a folder of exports: every .json, .jsonl and .zip file in it
 * and its subfolders, and each export folder below it, is one input (the rule is
 * src-shared/import-files.ts's, which the Import panel's folder upload shares).
 *
 * Inside a folder nothing is followed: a symbolic link, or anything that is not a regular file or
 * a folder (a FIFO, a socket, a device), is refused with one line and not read, and so is a
 * folder more than FOLDER_MAX_DEPTH levels down. A folder with more than FOLDER_MAX_FILES files
 * to import is refused whole. A path the user names is taken as named (a link to an export works).
 */
import { promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';
import { CONVERSATION_FILE, FOLDER_MAX_DEPTH, FOLDER_MAX_FILES, isImportFile, isSkippedName, tooManyFiles } from '../../src-shared/import-files.js';
import { UserError } from '../../src-shared/types.js';

export interface ImportInput {
  path: string;
  /** The folder of exports it was found in; null for a path given as it is. */
  folder: string | null;
}

export interface RefusedEntry {
  path: string;
  reason: string;
}

export interface ExpandedInputs {
  inputs: ImportInput[];
  refused: RefusedEntry[];
  /** One line per folder of exports that holds other files (chat.html, images), which are left alone. */
  notes: string[];
}

export async function expandImportPaths(paths: readonly string[]): Promise<ExpandedInputs> {
  const out: ExpandedInputs = { inputs: [], refused: [], notes: [] };
  for (const given of paths) {
    if (!(await isFolderOfExports(given))) {
      out.inputs.push({ path: given, folder: null });
      continue;
    }
    const walk: Walk = { root: given, inputs: [], refused: [], leftAlone: 0 };
    await walkFolder(walk, given, 0);
    if (walk.inputs.length > FOLDER_MAX_FILES) throw new UserError(tooManyFiles(given));
    if (walk.inputs.length === 0) {
      const refused = walk.refused.length ? `; ${walk.refused.length} ${walk.refused.length === 1 ? 'entry' : 'entries'} refused: ${walk.refused[0]!.path}: ${walk.refused[0]!.reason}` : '';
      throw new UserError(`${given}: no chat export in this folder (no .json, .jsonl or .zip file, and no conversations.json)${refused}`);
    }
    out.inputs.push(...walk.inputs.map((p) => ({ path: p, folder: given })));
    out.refused.push(...walk.refused);
    if (walk.leftAlone) out.notes.push(`${given}: ${walk.leftAlone} ${walk.leftAlone === 1 ? 'file' : 'files'} not .json, .jsonl or .zip left alone`);
  }
  return out;
}

/** A folder that is not itself an export folder. Anything else (a file, a zip, a missing path) is one input. */
async function isFolderOfExports(given: string): Promise<boolean> {
  try {
    if (!(await fs.stat(given)).isDirectory()) return false;
    return !(await holdsConversationFiles(given));
  } catch {
    return false; // the importer says why it cannot read it
  }
}

async function holdsConversationFiles(dir: string): Promise<boolean> {
  return (await fs.readdir(dir)).some((name) => CONVERSATION_FILE.test(name));
}

interface Walk {
  root: string;
  inputs: string[];
  refused: RefusedEntry[];
  leftAlone: number;
}

async function walkFolder(walk: Walk, dir: string, depth: number): Promise<void> {
  let entries: Dirent[];
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (err) {
    walk.refused.push({ path: dir, reason: `cannot read the folder (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` });
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (isSkippedName(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) {
      walk.refused.push({ path: full, reason: 'a symbolic link: not followed inside a folder; import what it points to by its own path' });
    } else if (entry.isDirectory()) {
      if (depth + 1 > FOLDER_MAX_DEPTH) walk.refused.push({ path: full, reason: `more than ${FOLDER_MAX_DEPTH} folders below ${walk.root}: import it on its own` });
      else if (await holdsConversationFiles(full).catch(() => false)) walk.inputs.push(full);
      else await walkFolder(walk, full, depth + 1);
    } else if (entry.isFile()) {
      if (isImportFile(entry.name)) walk.inputs.push(full);
      else walk.leftAlone++;
    } else {
      walk.refused.push({ path: full, reason: 'not a regular file (a FIFO, socket or device): not read' });
    }
    // A tree with more files than one import takes is refused whole: no need to walk the rest.
    if (walk.inputs.length > FOLDER_MAX_FILES) return;
  }
}

/**
 * Why a file found in a folder was skipped, for its line in the summary (which names the file):
 * the importer's error without the file's name in front, nor the list of supported formats
 * that every "not a chat export" error ends with.
 */
export function skipReason(filePath: string, message: string): string {
  const own = message.startsWith(`${filePath}: `) ? message.slice(filePath.length + 2) : message;
  return own.split(' Supported formats: ')[0]!.trim();
}
