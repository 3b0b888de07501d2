// `hindsight export --format samples|openclaw|kto|sft|dpo|sdft --out FILE` — one JSONL file,
// written atomically, byte-identical for the same database (see src-main/export/formats.ts).
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import { withWorkspace } from '../workspace/workspace.js';
import { defaultDbPath, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const USAGE = `usage: hindsight export --format ${EXPORT_FORMATS.join('|')} --out FILE [--db PATH] [--json]`;

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, { format: { type: 'string' }, out: { type: 'string' } });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const format = values.format as ExportFormat | undefined;
  if (!format || !EXPORT_FORMATS.includes(format)) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')}\n${USAGE}`);
  if (!values.out) throw new UsageError(`--out FILE is required\n${USAGE}`);
  const out = values.out;
  const result = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.exportJsonl(format, out), { access: 'read' });
  if (values.json) printJson({ format, ...result });
  else process.stdout.write(`wrote ${result.lines} ${format} line(s) to ${result.path}\n`);
  return 0;
};
