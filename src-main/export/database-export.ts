// Exporting a whole database: every session in stable order through one JSONL format
// (formats.ts), to a file (writer.ts) or as a preview of the first lines.
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import type { Store } from '../store/database.js';
import { databaseFileRole } from '../store/db-files.js';
import { iterateBundles } from '../store/session-reads.js';
import { sessionLines } from './formats.js';
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

/** The first `lines` lines of the export. */
export function previewLines(store: Store, format: ExportFormat, lines: number): string[] {
  const out: string[] = [];
  if (lines <= 0) return out;
  for (const line of exportLines(store, format)) {
    out.push(line);
    if (out.length >= lines) break;
  }
  return out;
}
