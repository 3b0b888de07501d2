// The held-out split over a database (docs/design.md §Evaluation): the rule of
// src-main/pipeline/split-rule.ts applied to the stored sessions, with the user's stored
// choices and percentage.
import { UserError } from '../../src-shared/types.js';
import type { SessionSplit, SplitView } from '../../src-shared/views.js';
import { checkPercent, decideSplit, DEFAULT_HELD_OUT_PERCENT } from '../pipeline/split-rule.js';
import type { Store } from '../store/database.js';
import { readHeldOutPercent, readSplitOverrides, readSplitSessions, writeHeldOutPercent, writeSplitOverrides } from '../store/split-overrides.js';

/** The split of every session, computed once per change of the database. */
export interface ComputedSplit {
  percent: number;
  bySession: Map<string, SessionSplit>;
  sessions: { id: string; title: string; samples: number }[];
  heldOut: ReadonlySet<string>;
}

export function computeSplit(store: Store): ComputedSplit {
  const percent = readHeldOutPercent(store) ?? DEFAULT_HELD_OUT_PERCENT;
  const sessions = readSplitSessions(store);
  const bySession = decideSplit(sessions.map((s) => ({ id: s.id, samples: s.samples })), percent, readSplitOverrides(store));
  const heldOut = new Set([...bySession].filter(([, d]) => d.heldOut).map(([id]) => id));
  return { percent, bySession, sessions, heldOut };
}

export function splitView(split: ComputedSplit): SplitView {
  const withSamples = split.sessions.filter((s) => s.samples > 0);
  const held = withSamples.filter((s) => split.heldOut.has(s.id));
  const listed = split.sessions
    .filter((s) => (split.heldOut.has(s.id) && s.samples > 0) || split.bySession.get(s.id)!.why === 'user' || split.bySession.get(s.id)!.why === 'too-large')
    .map((s) => ({ ...s, ...split.bySession.get(s.id)! }));
  return {
    percent: split.percent,
    sessions: withSamples.length,
    samples: withSamples.reduce((a, s) => a + s.samples, 0),
    heldOut: { sessions: held.length, samples: held.reduce((a, s) => a + s.samples, 0) },
    listed,
  };
}

/** Records the user's choice for these sessions (null: back to the rule); every id must exist. */
export function placeSessions(store: Store, split: ComputedSplit, sessionIds: readonly string[], heldOut: boolean | null): void {
  const unknown = sessionIds.filter((id) => !split.bySession.has(id));
  if (unknown.length) throw new UserError(`no session ${unknown.map((id) => `'${id}'`).join(', ')} in ${store.path}`);
  writeSplitOverrides(store, sessionIds, heldOut);
}

export function setPercent(store: Store, percent: number): void {
  try {
    writeHeldOutPercent(store, checkPercent(percent));
  } catch (err) {
    throw new UserError((err as Error).message);
  }
}
