// The `sources` table: one row per imported export file (by content hash), and one for the
// live-capture log, with the totals the import found.
import path from 'node:path';
import type { SourceFormat } from '../../src-shared/types.js';
import type { Store } from './database.js';

/** The id of the source with this content hash, if it was imported before. */
export function findSourceId(store: Store, sha256: string): number | undefined {
  return store.get<{ id: number }>('SELECT id FROM sources WHERE sha256 = ?', [sha256])?.id;
}

function lastInsertId(store: Store): number {
  return store.get<{ id: number }>('SELECT last_insert_rowid() AS id')!.id;
}

/** Records a newly imported export file; its totals are filled in by `recordSourceTotals`. */
export function insertSource(store: Store, file: { path: string; format: SourceFormat; sha256: string }, importedAt: number): number {
  store.run('INSERT INTO sources (path, format, sha256, imported_at, sessions, turns) VALUES (?, ?, ?, ?, 0, 0)', [
    path.resolve(file.path), file.format, file.sha256, importedAt,
  ]);
  return lastInsertId(store);
}

export function recordSourceTotals(store: Store, sourceId: number, totals: { sessions: number; turns: number; warnings: readonly string[] }): void {
  store.run('UPDATE sources SET sessions = ?, turns = ?, warnings = ? WHERE id = ?', [
    totals.sessions, totals.turns, JSON.stringify(totals.warnings), sourceId,
  ]);
}

/** The one source that live-capture sessions belong to, created on first use. */
export function captureSourceId(store: Store, logPath: string, now: number): number {
  const found = findSourceId(store, 'capture');
  if (found !== undefined) return found;
  store.run("INSERT INTO sources (path, format, sha256, imported_at, sessions, turns) VALUES (?, 'capture', 'capture', ?, 0, 0)", [logPath, now]);
  return lastInsertId(store);
}
