// Live capture's writes (src-main/capture/): the exchanges it recorded and the
// conversations they shape, as `capture` sessions.
import type { ImportedConversation } from '../../src-shared/types.js';
import type { ContextWindowSetting } from '../../src-shared/views.js';
import { insertCaptureExchange, type CaptureExchangeRow } from '../store/capture-exchanges.js';
import type { Store } from '../store/database.js';
import { readSampleTurns } from '../store/session-reads.js';
import { sessionIdFor } from '../store/session-writes.js';
import { captureSourceId } from '../store/source-rows.js';
import { nowSeconds } from './clock.js';
import { upsertConversation } from './import-into-store.js';

/**
 * Applies captured exchanges and the conversations they shape, in one transaction:
 * exchange rows are inserted by id (a replayed one is ignored), and each conversation is
 * upserted as a `capture` session (labels follow their replies, as for a re-import).
 * Returns, per session, the response turns of samples that did not exist before.
 */
export function applyCapture(
  store: Store,
  exchanges: readonly CaptureExchangeRow[],
  conversations: readonly ImportedConversation[],
  logPath: string,
  window: ContextWindowSetting,
): Map<string, number[]> {
  const fresh = new Map<string, number[]>();
  if (!exchanges.length && !conversations.length) return fresh;
  const now = nowSeconds();
  store.transaction(() => {
    for (const x of exchanges) insertCaptureExchange(store, x);
    if (!conversations.length) return;
    const sourceId = captureSourceId(store, logPath, now);
    for (const conv of conversations) {
      const id = sessionIdFor('capture', conv);
      const before = new Set(readSampleTurns(store, id));
      upsertConversation(store, conv, 'capture', sourceId, window, now);
      const added = readSampleTurns(store, id).filter((t) => !before.has(t));
      if (added.length) fresh.set(id, added);
    }
  });
  store.markDirty();
  return fresh;
}
