// Which files a folder import takes (docs/design.md §Imports): the rule the back end's folder walk
// (src-main/import/folder-inputs.ts) and the Import panel's folder upload share. Node-free.
//
// A folder that holds conversations.json or split files conversations-000.json … is one ChatGPT
// or Claude export and imports as it always did. Any other folder is a folder of exports: every
// .json, .jsonl and .zip file in it and in its subfolders (at most FOLDER_MAX_DEPTH levels down,
// at most FOLDER_MAX_FILES files) is one input, and a subfolder that is an export folder is one
// input too. Hidden entries and __MACOSX are left alone without a word; other files (chat.html,
// images) are counted as left alone.

/** conversations.json, or the split parts conversations-000.json … of a large ChatGPT export. */
export const CONVERSATION_FILE = /^conversations(?:-(\d+))?\.json$/i;
/** The extensions a folder import takes. */
export const IMPORT_EXTENSIONS = ['.json', '.jsonl', '.zip'] as const;
/** How many folder levels below the one given a folder import looks into. */
export const FOLDER_MAX_DEPTH = 8;
/** The most files one folder import takes (the API's limit on paths per import, too). */
export const FOLDER_MAX_FILES = 1000;

/** Why a folder with too many files is not imported at all. */
export function tooManyFiles(folder = 'the folder'): string {
  return `${folder} holds more than ${FOLDER_MAX_FILES} files to import: import its subfolders one at a time`;
}

/** Whether a file name is one a folder import takes. */
export function isImportFile(name: string): boolean {
  const lower = name.toLowerCase();
  return IMPORT_EXTENSIONS.some((ext) => lower.endsWith(ext));
}

/** Hidden files and folders, and the resource forks macOS adds to zips, are not looked at. */
export function isSkippedName(name: string): boolean {
  return name.startsWith('.') || name === '__MACOSX';
}

/** What a folder upload sends: the files to import, how many were left alone, and why some were refused. */
export interface FolderPick {
  files: string[];
  /** Files that are not .json, .jsonl or .zip. */
  leftAlone: number;
  /** One line each: too deep, or (then nothing is picked) more files than a folder import takes. */
  refused: string[];
}

/**
 * The Import panel's folder upload: from the relative paths a browser gives for a chosen folder
 * ("exports/claude/conversations.json"), the files to upload under the same rule as the back
 * end's walk. An export folder's conversation files are uploaded each on its own.
 */
export function pickFolderFiles(relativePaths: readonly string[]): FolderPick {
  const paths = [...relativePaths].map((p) => p.replace(/\\/g, '/')).sort();
  const dirOf = (p: string) => p.slice(0, Math.max(0, p.lastIndexOf('/')));
  const exportDirs = new Set(paths.filter((p) => CONVERSATION_FILE.test(p.slice(p.lastIndexOf('/') + 1))).map(dirOf));
  const insideExport = (dir: string) => [...exportDirs].some((e) => dir.startsWith(e + '/'));
  const pick: FolderPick = { files: [], leftAlone: 0, refused: [] };
  for (const p of paths) {
    const parts = p.split('/');
    if (parts.some(isSkippedName)) continue;
    const name = parts.at(-1)!;
    const dir = dirOf(p);
    // The first part is the chosen folder itself.
    const depth = parts.length - 2;
    if (insideExport(dir)) continue;
    if (exportDirs.has(dir)) {
      if (CONVERSATION_FILE.test(name)) pick.files.push(p);
      continue;
    }
    if (!isImportFile(name)) {
      pick.leftAlone++;
      continue;
    }
    if (depth > FOLDER_MAX_DEPTH) {
      pick.refused.push(`${p}: more than ${FOLDER_MAX_DEPTH} folders deep; import its folder on its own`);
      continue;
    }
    pick.files.push(p);
  }
  if (pick.files.length > FOLDER_MAX_FILES) return { files: [], leftAlone: pick.leftAlone, refused: [tooManyFiles()] };
  return pick;
}
