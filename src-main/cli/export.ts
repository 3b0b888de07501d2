// `hindsight export --format samples|openclaw|kto|sft|dpo|sdft --out FILE` — one JSONL file,
// written atomically, byte-identical for the same database (see src-main/export/formats.ts).
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'export',
  synopsis: '--format FORMAT --out FILE [options]',
  about: 'Writes one JSONL dataset, atomically; the same database always gives the same bytes.\n' +
    'samples and openclaw write every sample; kto the samples labelled ±1; sft the replies labelled +1\n' +
    'or repaired; dpo regenerations with a different text and repairs; sdft the samples with a hint.\n' +
    'Every session is exported, held-out ones included; `hindsight handoff` leaves them out of training.',
  options: {
    format: { type: 'string', value: EXPORT_FORMATS.join('|'), help: 'the dataset format', required: true },
    out: { type: 'string', value: 'FILE', help: 'the JSONL file to write', required: true },
    ...DB_OPTION,
    ...jsonOption('print {format, lines, path} as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const format = values.format as ExportFormat | undefined;
  if (!format || !EXPORT_FORMATS.includes(format)) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')}\n${USAGE}`);
  if (!values.out) throw new UsageError(`--out FILE is required\n${USAGE}`);
  const out = values.out;
  const result = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.exportJsonl(format, out), { access: 'read' });
  if (values.json) printJson({ format, ...result });
  else process.stdout.write(`wrote ${result.lines} ${format} line(s) to ${result.path}\n`);
  return 0;
};
