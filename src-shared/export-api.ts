/**
 * The Export page's calls (docs/design.md §Exports): how many lines each format would write,
 * the first lines of one, and writing it; all with the same filter. Node-free: the contract
 * spreads EXPORT_CALLS into its calls.
 */
import { call, returns } from './call-spec.js';
import { boolean, integer, object, oneOf, optional, string } from './validate.js';
import { EXPORT_FORMATS, type ExportFormat } from './views.js';

/** Which sessions an export takes: every one by default, held-out ones included (an export is a dataset). */
export interface ExportFilter {
  /** Leave out the held-out sessions (the evaluation split). */
  leaveOutHeldOut?: boolean;
}

export interface ExportCounts {
  /** Lines each format would write with this filter. */
  lines: Record<ExportFormat, number>;
  /** The sessions the filter keeps, and the held-out ones it left out. */
  sessions: number;
  heldOutLeftOut: number;
}

const format = oneOf(EXPORT_FORMATS);
const filter = { leaveOutHeldOut: optional(boolean()) };

export const EXPORT_CALLS = {
  exportCounts: call('How many lines each export format would write with the filter, before writing any.', object(filter), returns<ExportCounts>()),
  previewExport: call(
    'The first lines an export would write; with none, `needs` says what the format needs.',
    object({ format, lines: integer({ min: 1, max: 100 }), ...filter }),
    returns<{ lines: string[]; needs: string | null }>(),
  ),
  writeExport: call('Writes one JSONL export atomically.', object({ format, outPath: string({ min: 1, max: 4096 }), ...filter }), returns<{ lines: number; path: string }>()),
};
