// `hindsight export --format samples|openclaw|kto|sft|dpo|sdft --out FILE` — one JSONL file,
// written atomically, byte-identical for the same database (see src-main/export/formats.ts).
// `--dry-run` writes nothing: it prints how many lines each format would write (the Export
// page's counts); `--exclude-heldout` leaves the held-out sessions out of either.
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import type { ExportCounts } from '../../src-shared/export-api.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'export',
  synopsis: '--format FORMAT --out FILE [options] | --dry-run [options]',
  about: 'Writes one JSONL dataset, atomically; the same database always gives the same bytes.\n' +
    'samples and openclaw write every sample; kto the samples labelled ±1; sft the replies labelled +1\n' +
    'or repaired; dpo regenerations with a different text and repairs; sdft the samples with a hint.\n' +
    'Every session is exported, held-out ones included, unless --exclude-heldout; `hindsight handoff`\n' +
    'leaves them out of training. --dry-run writes nothing and prints how many lines each format would write.',
  options: {
    format: { type: 'string', value: EXPORT_FORMATS.join('|'), help: 'the dataset format', required: 'unless --dry-run' },
    out: { type: 'string', value: 'FILE', help: 'the JSONL file to write', required: 'unless --dry-run' },
    'dry-run': { type: 'boolean', default: false, help: 'write nothing: print how many lines each format would write (--format marks one)' },
    'exclude-heldout': { type: 'boolean', default: false, help: 'leave the held-out sessions (hindsight split) out' },
    ...DB_OPTION,
    ...jsonOption('print {format, lines, path} as one JSON object; with --dry-run {lines: {format: n}, sessions, heldOutLeftOut}'),
  },
} as const;
const USAGE = usageLine(spec);

/** The counts as a small table: the formats in the page's order, the chosen one marked. */
function countsTable(counts: ExportCounts, chosen: ExportFormat | undefined): string {
  const width = Math.max(...Object.values(counts.lines).map((n) => String(n).length));
  const rows = EXPORT_FORMATS.map((f) => `${f === chosen ? '*' : ' '} ${f.padEnd(9)}${String(counts.lines[f]).padStart(width)} line${counts.lines[f] === 1 ? '' : 's'}`);
  const sessions = `${counts.sessions} session${counts.sessions === 1 ? '' : 's'}`;
  const left = counts.heldOutLeftOut ? `, ${counts.heldOutLeftOut} held-out left out` : ', held-out ones included';
  return `would write (dry run, nothing written; ${sessions}${left}):\n${rows.join('\n')}\n`;
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const format = values.format as ExportFormat | undefined;
  if (format !== undefined && !EXPORT_FORMATS.includes(format)) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')}\n${USAGE}`);
  const filter = { leaveOutHeldOut: values['exclude-heldout'] === true };
  const db = values.db ?? defaultDbPath();
  if (values['dry-run']) {
    const counts = await withWorkspace(db, (ws) => ws.exportCounts(filter), { access: 'read' });
    if (values.json) printJson({ dryRun: true, ...counts });
    else process.stdout.write(countsTable(counts, format));
    return 0;
  }
  if (!format) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')} (or --dry-run to count every format)\n${USAGE}`);
  if (!values.out) throw new UsageError(`--out FILE is required (or --dry-run to write nothing)\n${USAGE}`);
  const out = values.out;
  const result = await withWorkspace(db, (ws) => ws.exportJsonl(format, out, filter), { access: 'read' });
  if (values.json) printJson({ format, ...result });
  else process.stdout.write(`wrote ${result.lines} ${format} line${result.lines === 1 ? '' : 's'} to ${result.path}\n`);
  return 0;
};
