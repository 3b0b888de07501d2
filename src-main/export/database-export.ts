// Exporting a whole database: every session in stable order through one JSONL format
// (formats.ts), to a file (writer.ts) or as a preview of the first lines.
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import type { Store } from '../store/database.js';
import { databaseFileRole } from '../store/db-files.js';
import { iterateBundles } from '../store/session-reads.js';
import { sessionLineCount, sessionLines } from './formats.js';
import { writeJsonl } from './writer.js';

function* exportLines(store: Store, format: ExportFormat, keep: (sessionId: string) => boolean = () => true): Generator<string> {
  if (!EXPORT_FORMATS.includes(format)) throw new UserError(`unknown export format '${format}'; choose one of ${EXPORT_FORMATS.join(', ')}`);
  for (const bundle of iterateBundles(store)) if (keep(bundle.id)) yield* sessionLines(format, bundle);
}

/**
 * Writes the export to `outPath` atomically; refuses to overwrite the database or a file it keeps.
 * Every session by default (held-out ones too: docs/design.md §Exports); `keep` narrows it.
 */
export function exportToFile(store: Store, format: ExportFormat, outPath: string, keep?: (sessionId: string) => boolean): { lines: number; path: string } {
  const resolved = path.resolve(outPath);
  const role = databaseFileRole(store.path, resolved);
  if (role) throw new UserError(`${outPath}: that is ${role}; choose another output file`);
  const lines = writeJsonl(resolved, exportLines(store, format, keep));
  return { lines, path: resolved };
}

/** The first `lines` lines of the export (of the sessions `keep` keeps). */
export function previewLines(store: Store, format: ExportFormat, lines: number, keep?: (sessionId: string) => boolean): string[] {
  const out: string[] = [];
  if (lines <= 0) return out;
  for (const line of exportLines(store, format, keep)) {
    out.push(line);
    if (out.length >= lines) break;
  }
  return out;
}

/** How many lines each format would write, of the sessions `keep` keeps (and how many it kept and left), in one pass. */
export function exportCounts(store: Store, keep: (sessionId: string) => boolean = () => true): { lines: Record<ExportFormat, number>; sessions: number; leftOut: number } {
  const lines = Object.fromEntries(EXPORT_FORMATS.map((f) => [f, 0])) as Record<ExportFormat, number>;
  let sessions = 0;
  let leftOut = 0;
  for (const bundle of iterateBundles(store)) {
    if (!keep(bundle.id)) {
      leftOut++;
      continue;
    }
    sessions++;
    for (const f of EXPORT_FORMATS) lines[f] += sessionLineCount(f, bundle);
  }
  return { lines, sessions, leftOut };
}
