// The stored part of the held-out split (docs/design.md §Evaluation): the user's choice per
// session and the held-out percentage. The rule itself lives in src-main/pipeline/.
import type { Store } from './database.js';

const PERCENT_KEY = 'held_out_percent';

/** The user's choices: session id → true (held out) or false (trained on). */
export function readSplitOverrides(store: Store): Map<string, boolean> {
  const rows = store.all<{ session_id: string; held_out: number }>('SELECT session_id, held_out FROM split_overrides');
  return new Map(rows.map((r) => [r.session_id, r.held_out === 1]));
}

/** Records the user's choice for each session, or forgets it (null: back to the rule). */
export function writeSplitOverrides(store: Store, sessionIds: readonly string[], heldOut: boolean | null, now = Date.now()): void {
  store.transaction(() => {
    for (const id of sessionIds) {
      if (heldOut === null) store.run('DELETE FROM split_overrides WHERE session_id = ?', [id]);
      else store.run('INSERT OR REPLACE INTO split_overrides (session_id, held_out, updated_at) VALUES (?, ?, ?)', [id, heldOut ? 1 : 0, now]);
    }
  });
}

export function clearSplitOverrides(store: Store): number {
  const n = store.get<{ n: number }>('SELECT COUNT(*) AS n FROM split_overrides')!.n;
  store.run('DELETE FROM split_overrides');
  return n;
}

export function readHeldOutPercent(store: Store): number | null {
  const row = store.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [PERCENT_KEY]);
  return row ? Number(row.value) : null;
}

export function writeHeldOutPercent(store: Store, percent: number): void {
  store.run('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)', [PERCENT_KEY, String(percent)]);
}

/** Every session with whether it has samples, for the split (in id order). */
export function readSplitSessions(store: Store): { id: string; title: string; samples: number }[] {
  return store.all<{ id: string; title: string; samples: number }>(
    'SELECT s.id, s.title, (SELECT COUNT(*) FROM samples p WHERE p.session_id = s.id) AS samples FROM sessions s ORDER BY s.id',
  );
}
