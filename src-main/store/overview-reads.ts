// Database-wide reads for the session list, the stats and the checks.
import type { SessionFormat } from '../../src-shared/types.js';
import type { SessionSortKey } from '../../src-shared/sessions-api.js';
import type { NoSampleReason, SessionFilter, SessionSummary, Stats } from '../../src-shared/views.js';
import type { Store } from './database.js';

export function readStats(store: Store): Stats {
  const row = store.get<Record<string, number>>(`
      SELECT
        (SELECT COUNT(*) FROM sessions) AS sessions,
        (SELECT COUNT(*) FROM turns) AS turns,
        (SELECT COUNT(*) FROM samples) AS samples,
        (SELECT COUNT(*) FROM labels WHERE reward = 1) AS pos,
        (SELECT COUNT(*) FROM labels WHERE reward = -1) AS neg,
        (SELECT COUNT(*) FROM labels WHERE reward = 0) AS neutral,
        (SELECT COUNT(*) FROM sessions WHERE no_sample_reason IS NOT NULL) AS without`)!;
  return {
    sessions: row.sessions,
    turns: row.turns,
    samples: row.samples,
    labeled: { pos: row.pos, neg: row.neg, neutral: row.neutral, unlabeled: row.samples - row.pos - row.neg - row.neutral },
    sessions_without_samples: row.without,
  };
}

function likePattern(text: string): string {
  return '%' + text.replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

/** The WHERE clause (with its parameters) that a session filter asks for. */
function filterClause(filter: SessionFilter): { where: string; params: (string | number)[] } {
  const where: string[] = [];
  const params: (string | number)[] = [];
  if (filter.search?.trim()) {
    const like = likePattern(filter.search.trim());
    where.push(`(s.title LIKE ? ESCAPE '\\' OR s.id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.text LIKE ? ESCAPE '\\'))`);
    params.push(like, like, like);
  }
  if (filter.source) {
    where.push('s.format = ?');
    params.push(filter.source);
  }
  if (filter.hasSamples !== undefined) where.push(filter.hasSamples ? 'c.sample_count > 0' : 'c.sample_count = 0');
  if (filter.labelStatus === 'labeled') where.push('c.sample_count > 0 AND c.labeled_count = c.sample_count');
  if (filter.labelStatus === 'unlabeled') where.push('c.sample_count > 0 AND c.labeled_count = 0');
  if (filter.labelStatus === 'partial') where.push('c.labeled_count > 0 AND c.labeled_count < c.sample_count');
  return { where: where.length ? 'WHERE ' + where.join(' AND ') : '', params };
}

/**
 * The ORDER BY terms of each sort key in a direction (fixed strings: nothing of the filter's
 * text reaches the SQL). Labels sort by the share of samples labelled, sessions without samples last.
 */
const SORT_TERMS: Record<SessionSortKey, (dir: 'ASC' | 'DESC') => string> = {
  created: (dir) => `s.created_at IS NULL, s.created_at ${dir}`,
  title: (dir) => `s.title COLLATE NOCASE ${dir}`,
  source: (dir) => `s.format ${dir}`,
  turns: (dir) => `c.turn_count ${dir}`,
  samples: (dir) => `c.sample_count ${dir}`,
  labels: (dir) => `c.sample_count = 0, CAST(c.labeled_count AS REAL) / MAX(c.sample_count, 1) ${dir}, c.sample_count ${dir}`,
};

/** ORDER BY for a filter: its terms, then ties by date (newest first, undated last) and id. */
function orderClause(filter: SessionFilter): string {
  const key = filter.sort && Object.hasOwn(SORT_TERMS, filter.sort) ? filter.sort : 'created';
  const dir = (filter.order ?? (key === 'created' ? 'desc' : 'asc')) === 'desc' ? 'DESC' : 'ASC';
  return key === 'created' ? `${SORT_TERMS.created(dir)}, s.id` : `${SORT_TERMS[key](dir)}, ${SORT_TERMS.created('DESC')}, s.id`;
}

/** A session summary as the store knows it; the workspace adds its place in the held-out split. */
export type StoredSessionSummary = Omit<SessionSummary, 'split'>;

/** One page of the sessions a filter matches, in its order (newest first by default), with the total count. */
export function listSessionSummaries(store: Store, filter: SessionFilter): { total: number; sessions: StoredSessionSummary[] } {
  const { where, params } = filterClause(filter);
  const base = `
      FROM sessions s JOIN (
        SELECT s2.id,
          (SELECT COUNT(*) FROM turns t WHERE t.session_id = s2.id) AS turn_count,
          (SELECT COUNT(*) FROM samples p WHERE p.session_id = s2.id) AS sample_count,
          (SELECT COUNT(*) FROM labels l WHERE l.session_id = s2.id AND l.reward IS NOT NULL) AS labeled_count
        FROM sessions s2) c ON c.id = s.id
      ${where}`;
  const total = store.get<{ n: number }>(`SELECT COUNT(*) AS n ${base}`, params)!.n;
  const limit = filter.limit ?? -1;
  const offset = filter.offset ?? 0;
  const rows = store.all<{
    id: string; title: string; format: SessionFormat; created_at: number | null; no_sample_reason: NoSampleReason | null;
    turn_count: number; sample_count: number; labeled_count: number;
  }>(
    `SELECT s.id, s.title, s.format, s.created_at, s.no_sample_reason, c.turn_count, c.sample_count, c.labeled_count ${base}
       ORDER BY ${orderClause(filter)} LIMIT ? OFFSET ?`,
    [...params, limit, offset],
  );
  return {
    total,
    sessions: rows.map((r) => ({
      id: r.id, title: r.title, source: r.format, createdAt: r.created_at, turnCount: r.turn_count,
      sampleCount: r.sample_count, labeledCount: r.labeled_count, noSampleReason: r.no_sample_reason,
    })),
  };
}

/** The sessions that yield no sample, oldest first, with the reason. */
export function sessionsWithoutSamples(store: Store): { id: string; title: string; reason: NoSampleReason }[] {
  return store
    .all<{ id: string; title: string; no_sample_reason: NoSampleReason }>(
      'SELECT id, title, no_sample_reason FROM sessions WHERE no_sample_reason IS NOT NULL ORDER BY created_at IS NULL, created_at, id',
    )
    .map((r) => ({ id: r.id, title: r.title, reason: r.no_sample_reason }));
}

/**
 * Samples whose reply calls tools where its conversation defined none (ChatGPT's and Claude's
 * exports: their built-in web search and code runner come without definitions), by the list the
 * reply was written with (a capture's `toolsByTurn`, else the session's `tools`: toolsOfferedAt).
 * Training leaves those calls out of the reply (src-main/train/batches.ts trainedReply); Checks
 * says so.
 */
export function countCallsToUndefinedTools(store: Store): number {
  return store.get<{ n: number }>(
    `SELECT COUNT(*) AS n FROM samples s
       JOIN turns t ON t.session_id = s.session_id AND t.idx = s.response_turn
       JOIN sessions se ON se.id = s.session_id
      WHERE t.tool_calls != '[]' AND (NOT json_valid(se.metadata)
        OR COALESCE(json_extract(se.metadata, '$.toolsByTurn."' || s.response_turn || '"'), json_extract(se.metadata, '$.tools'), '[]') = '[]')`,
  )!.n;
}
