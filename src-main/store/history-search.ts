/**
 * Full-text search over the imported turns, for the rollouts' `search_history` tool
 * (docs/design.md §Rollouts). The index is an FTS4 table in the connection's TEMP schema,
 * built from `turns` on the first search: it is never saved with the database (a save reopens
 * sql.js's connection, which drops it), costs nothing to a process that never searches, and
 * is rebuilt when the turns have changed since (their count or largest rowid differ) or it is gone.
 *
 * A query is words, not FTS syntax: each run of letters and digits becomes a quoted term and
 * every term must occur (so a model's stray quotes or operators cannot break the query).
 * Hits are ranked by how often the terms occur, then newest session first.
 */
import type { Store } from './database.js';

export interface HistoryHit {
  sessionId: string;
  title: string;
  turn: number;
  role: string;
  /** A piece of the turn around the match, the matched words in [brackets]. */
  snippet: string;
}

const INDEX = 'temp.turn_search';
/** Most words a query may have; the rest are ignored. */
const MAX_TERMS = 12;
/** Candidates ranked in JavaScript before the best `limit` are kept. */
const CANDIDATES = 200;

interface IndexState {
  turns: number;
  maxRowid: number;
}

const built = new WeakMap<Store, IndexState>();

function turnState(store: Store): IndexState {
  const row = store.get<{ n: number; m: number | null }>('SELECT COUNT(*) AS n, MAX(rowid) AS m FROM turns')!;
  return { turns: row.n, maxRowid: row.m ?? 0 };
}

function indexExists(store: Store): boolean {
  return store.get("SELECT 1 AS x FROM sqlite_temp_master WHERE name = 'turn_search'") !== undefined;
}

/** Builds (or rebuilds) the temporary index when it is missing or stale. */
function ensureIndex(store: Store): void {
  const now = turnState(store);
  const last = built.get(store);
  if (last && last.turns === now.turns && last.maxRowid === now.maxRowid && indexExists(store)) return;
  store.db.exec(`DROP TABLE IF EXISTS ${INDEX}`);
  store.db.exec(`CREATE VIRTUAL TABLE ${INDEX} USING fts4(text, tokenize=unicode61)`);
  store.db.exec(`INSERT INTO ${INDEX}(docid, text) SELECT rowid, text FROM turns WHERE hidden = 0 AND text <> ''`);
  built.set(store, now);
}

/** The query's words as an FTS4 query (each quoted, all required), or null when it has none. */
export function ftsQuery(text: string): string | null {
  const words = text.match(/[\p{L}\p{N}]+/gu) ?? [];
  if (!words.length) return null;
  return words.slice(0, MAX_TERMS).map((w) => `"${w}"`).join(' ');
}

/**
 * Turns that contain every word of `query`, best first; [] when nothing matches. Sessions in
 * `hidden` are never found (a training run passes the held-out split, docs/design.md §Evaluation).
 */
export function searchHistory(store: Store, query: string, limit = 5, hidden: readonly string[] = []): HistoryHit[] {
  const match = ftsQuery(query);
  if (!match) return [];
  ensureIndex(store);
  const rows = store.all<{ session_id: string; title: string; idx: number; role: string; snippet: string; offsets: string; created_at: number | null }>(
    `SELECT t.session_id, s.title, t.idx, t.role, s.created_at,
            snippet(turn_search, '[', ']', '…', 0, 24) AS snippet, offsets(turn_search) AS offsets
       FROM ${INDEX} JOIN turns t ON t.rowid = turn_search.docid JOIN sessions s ON s.id = t.session_id
      WHERE turn_search MATCH ? AND t.session_id NOT IN (SELECT value FROM json_each(?)) LIMIT ${CANDIDATES}`,
    [match, JSON.stringify(hidden)],
  );
  // offsets() lists four numbers per occurrence of a term.
  const occurrences = (offsets: string) => offsets.trim().split(/\s+/).length / 4;
  rows.sort((a, b) => occurrences(b.offsets) - occurrences(a.offsets) || (b.created_at ?? -1e300) - (a.created_at ?? -1e300) || a.idx - b.idx);
  return rows.slice(0, Math.max(0, limit)).map((r) => ({ sessionId: r.session_id, title: r.title, turn: r.idx, role: r.role, snippet: r.snippet }));
}
