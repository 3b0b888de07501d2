// `hindsight import <file|dir|zip>… [--format auto|chatgpt|claude|sharegpt|openai|messages]`
// Imports every input in one transaction: a file that cannot be read leaves the database
// byte-for-byte as it was and exits 1 naming the file.
import { SOURCE_FORMATS, type SourceFormat } from '../../src-shared/types.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'import',
  synopsis: '<file|dir|zip>… [options]',
  about: 'Imports chat exports into the database, all inputs in one transaction: a file that cannot be\n' +
    'read leaves the database as it was. Importing the same export again adds nothing.',
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
    process.stdout.write(
      `imported ${positionals.join(', ')}: ${summary.sessions_added} session${summary.sessions_added === 1 ? '' : 's'} added, ${summary.sessions_updated} updated, ` +
        `${summary.sessions_unchanged} unchanged; ${summary.turns} turns, ${summary.samples} samples\n`,
    );
  }
  for (const w of summary.warnings) process.stderr.write(`warning: ${w}\n`);
  return 0;
};
