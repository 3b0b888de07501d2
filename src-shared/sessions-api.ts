/**
 * The Sessions list's sort order and its bulk actions (select sessions → label their samples,
 * delete them; holding out is `setHeldOut`, which already takes many sessions). Each bulk call
 * is one store transaction: all of the sessions change, or none does. Node-free: the contract
 * spreads SESSION_BULK_CALLS into its calls.
 */
import { call, returns } from './call-spec.js';
import { array, nullable, object, oneOf, string } from './validate.js';

/** The columns the Sessions list sorts by (server-side, so that paging keeps the order). */
export const SESSION_SORT_KEYS = ['created', 'title', 'source', 'turns', 'samples', 'labels'] as const;
export type SessionSortKey = (typeof SESSION_SORT_KEYS)[number];
export const SORT_ORDERS = ['asc', 'desc'] as const;
export type SortOrder = (typeof SORT_ORDERS)[number];

/** The most sessions one bulk call changes (the Sessions list shows at most this many at once). */
export const BULK_MAX_SESSIONS = 10_000;

export interface BulkLabelResult {
  sessions: number;
  /** Samples whose reward was written (every sample of the sessions). */
  samples: number;
}

const sessionIds = array(string({ min: 1, max: 500 }), { min: 1, max: BULK_MAX_SESSIONS });

export const SESSION_BULK_CALLS = {
  labelSessions: call(
    "Gives every sample of the sessions the same manual reward (+1, −1, or none: cleared); hints, repairs and notes are kept. One transaction.",
    object({ sessionIds, reward: nullable(oneOf([1, -1] as const)) }),
    returns<BulkLabelResult>(),
  ),
  deleteSessions: call(
    'Deletes the sessions with their turns, samples and labels (captured ones leave the capture log too). One transaction.',
    object({ sessionIds }),
    returns<{ deleted: number }>(),
  ),
};
