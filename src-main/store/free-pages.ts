/**
 * A database saved before the store ran with `secure_delete` (./database.ts) may hold the text of
 * sessions deleted then in its free space (free pages, and the unused parts of pages a deleted
 * row shared with others, which `freelist_count` does not see), and every save writes it back to
 * disk. The first open by a writer since then rewrites the database without it once (VACUUM) and
 * notes that in the settings table, so later opens pay nothing. A new database is noted at once.
 */
import type { Store } from './database.js';

const CLEARED_KEY = 'free_pages_cleared';

/** Clears an older database's free space once; returns whether it rewrote the database. */
export function clearFreePagesOnce(store: Store): boolean {
  if (store.readOnly || store.get('SELECT 1 FROM settings WHERE key = ?', [CLEARED_KEY])) return false;
  const empty = !store.get('SELECT 1 FROM sessions LIMIT 1') && (store.get<{ freelist_count: number }>('PRAGMA freelist_count')?.freelist_count ?? 0) === 0;
  store.run('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)', [CLEARED_KEY, '1']);
  if (empty) return false;
  store.compact();
  return true;
}
