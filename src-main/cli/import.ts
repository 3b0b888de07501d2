// `hindsight import <file|dir|zip>… [--format auto|chatgpt|claude|sharegpt|openai|messages]`
// Imports every input in one transaction: a file that cannot be read leaves the database
// byte-for-byte as it was and exits 1 naming the file. A folder of exports imports every export
// in it; a file there that is not a chat export is skipped and listed with why.
import { SOURCE_FORMATS, type SourceFormat } from '../../src-shared/types.js';
import type { ImportFileResult } from '../../src-shared/views.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'import',
  synopsis: '<file|dir|zip>… [options]',
  about: 'Imports chat exports into the database, all inputs in one transaction: a file that cannot be\n' +
    'read leaves the database as it was. Importing the same export again adds nothing. A folder of\n' +
    'exports imports every .json, .jsonl and .zip in it (and its subfolders); one that is not a chat\n' +
    'export is skipped and listed.',
  positionals: true,
  options: {
    format: { type: 'string', default: 'auto', value: `auto|${SOURCE_FORMATS.join('|')}`, help: 'the export format; auto detects it per file' },
    ...DB_OPTION,
    ...jsonOption('print the import summary as one JSON object'),
  },
} as const;

export const command: Command = async (argv) => {
  const { values, positionals } = parseCommandArgs(argv, spec);
  if (positionals.length === 0) throw new UsageError(`give at least one file, folder or zip to import\n${usageLine(spec)}`);
  const format = values.format as SourceFormat | 'auto';
  if (format !== 'auto' && !SOURCE_FORMATS.includes(format)) {
    throw new UsageError(`--format must be auto or one of ${SOURCE_FORMATS.join(', ')}, got '${format}'`);
  }
  const summary = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.importFiles(positionals, format));
  if (values.json) {
    printJson(summary);
  } else {
    // Several files (or a folder of exports): one line each, then the total.
    const several = summary.files.length > 1 || summary.files.some((f) => f.outcome !== 'imported');
    if (several) for (const file of summary.files) process.stdout.write(`  ${fileLine(file)}\n`);
    process.stdout.write(`imported ${positionals.join(', ')}: ${counts(summary)}${several ? ` (${fileCount(summary.files)})` : ''}\n`);
  }
  for (const w of summary.warnings) process.stderr.write(`warning: ${w}\n`);
  return 0;
};

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function counts(c: { sessions_added: number; sessions_updated: number; sessions_unchanged: number; turns: number; samples: number }): string {
  return `${plural(c.sessions_added, 'session')} added, ${c.sessions_updated} updated, ${c.sessions_unchanged} unchanged; ${plural(c.turns, 'turn')}, ${plural(c.samples, 'sample')}`;
}

function fileLine(file: ImportFileResult): string {
  if (file.outcome === 'imported') return `${file.path} (${file.format}): ${counts(file)}`;
  return `${file.path}: ${file.outcome}, ${file.reason}`;
}

function fileCount(files: ImportFileResult[]): string {
  const imported = files.filter((f) => f.outcome === 'imported').length;
  const skipped = files.filter((f) => f.outcome === 'skipped').length;
  const refused = files.filter((f) => f.outcome === 'refused').length;
  return [plural(imported, 'file') + ' imported', skipped ? `${skipped} skipped` : '', refused ? `${refused} refused` : ''].filter(Boolean).join(', ');
}
