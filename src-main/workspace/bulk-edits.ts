// The Sessions list's bulk actions (src-shared/sessions-api.ts): every sample of the chosen
// sessions given one manual reward, or the sessions deleted. Each is one transaction: an
// unknown session rolls the whole call back, so a half-labelled selection never stays.
import { UserError } from '../../src-shared/types.js';
import type { BulkLabelResult } from '../../src-shared/sessions-api.js';
import type { Store } from '../store/database.js';
import { readSampleTurns, readSessionRecord } from '../store/session-reads.js';
import { deleteSessionRows } from '../store/session-writes.js';
import { hasCaptureExchanges } from '../store/capture-exchanges.js';
import { noSession, setManualLabel } from './label-edits.js';

/** A manual reward (+1, −1, or null: cleared) on every sample of the sessions; hints, repairs and notes kept. */
export function labelSessions(store: Store, sessionIds: readonly string[], reward: 1 | -1 | null): BulkLabelResult {
  const ids = [...new Set(sessionIds)];
  if (ids.length === 0) throw new UserError('choose at least one session to label');
  let samples = 0;
  store.transaction(() => {
    for (const id of ids) {
      if (!readSessionRecord(store, id)) throw noSession(store, id);
      for (const turn of readSampleTurns(store, id)) {
        setManualLabel(store, id, turn, { reward });
        samples++;
      }
    }
  });
  return { sessions: ids.length, samples };
}

/** Deletes the sessions with their turns, samples, labels and captured exchanges; returns how many there were. */
export function deleteSessions(store: Store, sessionIds: readonly string[]): number {
  const ids = [...new Set(sessionIds)];
  let deleted = 0;
  store.transaction(() => {
    for (const id of ids) {
      if (readSessionRecord(store, id) || hasCaptureExchanges(store, id)) deleted++;
      deleteSessionRows(store, id);
    }
  });
  if (deleted) store.markDirty();
  return deleted;
}
