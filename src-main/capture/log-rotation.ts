/**
 * When the capture log sheds its settled sessions, and how an archived session comes back
 * (docs/design.md §Capture log rotation; the files themselves: ./log-archive.ts).
 *
 * - Rotation runs when the log has reached `rotateAt`: at open, after the replay, and after an
 *   append that crossed it (the capture service queues it behind the request in hand). It moves
 *   every settled session's records (LiveSessions.settled) and lets go of them in memory.
 *   The next rotation waits until the log is twice what was left, so a log of sessions that are
 *   all still open is not rewritten at every request.
 * - Recovery runs at open: archived conversations the database lacks (it was lost or replaced)
 *   are replayed from their archive files as the log is (idempotent: exchanges by id, sessions
 *   by content), their feedback with them.
 */
import type { ImportedConversation } from '../../src-shared/types.js';
import type { CaptureExchangeRow } from '../workspace/workspace.js';
import type { CaptureLog } from './capture-log.js';
import { recordSession, type FeedbackRecord } from './capture-records.js';
import { LiveSessions } from './capture-sessions.js';
import { applyFeedback, foldFeedback, type FeedbackWorkspace } from './feedback.js';
import { rotateCaptureLog, type CaptureArchive } from './log-archive.js';

/** The log's size at which settled sessions move out, unless `serve` was given another. */
export const ROTATE_AT_BYTES = 64 * 1024 * 1024;

/** What rotation and recovery read and change of one database's capture state. */
export interface ArchivingState {
  log: CaptureLog;
  archive: CaptureArchive;
  sessions: LiveSessions;
  /** The log size at which settled sessions next move to the archive (never below `rotateAtLeast`). */
  rotateAt: number;
  /** The least `rotateAt` (ROTATE_AT_BYTES unless `serve` was given another). */
  rotateAtLeast: number;
  /** Whether a rotation waits behind the request in hand. */
  rotationQueued: boolean;
  /** Feedback on replies that are not samples yet (no next message so far; an archived session's never will be). */
  pendingFeedback: FeedbackRecord[];
}

/**
 * After an append: once the log has reached `st.rotateAt`, a rotation runs after the request in
 * hand (it rewrites the log), while `current()` (the state is still the open database's).
 */
export function queueRotationIfDue(st: ArchivingState, current: () => boolean, log: (line: string) => void): void {
  if (st.log.size < st.rotateAt || st.rotationQueued) return;
  st.rotationQueued = true;
  setImmediate(() => {
    st.rotationQueued = false;
    if (current()) rotateIfDue(st, Date.now(), log);
  });
}

/** What recovery needs of the open workspace (the capture service's CaptureWorkspace has it). */
interface RecoveryWorkspace extends FeedbackWorkspace {
  applyCapture(exchanges: readonly CaptureExchangeRow[], conversations: readonly ImportedConversation[], logPath: string): unknown;
  captureCounts(): { sessionIds: string[] };
}

/** Moves the settled sessions to the archive once the log has reached `st.rotateAt`; a failure leaves the log as it was. */
export function rotateIfDue(st: ArchivingState, now: number, log: (line: string) => void): void {
  if (st.log.size < st.rotateAt) return;
  try {
    const stubs = rotateCaptureLog(st.log, st.archive, st.sessions.settled(now));
    for (const stub of stubs) st.sessions.apply(stub);
    // Feedback waiting for a next message that can no longer come; an open session's stays (in the log too).
    const ended = new Set(stubs.filter((stub) => !stub.open).map((stub) => stub.session));
    st.pendingFeedback = st.pendingFeedback.filter((f) => !ended.has(f.session));
    if (stubs.length) log(`capture: moved ${stubs.length} settled sessions to ${st.archive.dir}/${stubs[0]!.file}; the log is ${(st.log.size / 1e6).toFixed(1)} MB now`);
  } catch (err) {
    log(`capture: could not move settled sessions out of the log (it stays as it was): ${(err as Error).message}`);
  }
  st.rotateAt = Math.max(st.rotateAtLeast, 2 * st.log.size);
}

/** Replays the archived conversations the database lacks from their archive files; returns how many. */
export function recoverArchived(st: ArchivingState, ws: RecoveryWorkspace, log: (line: string) => void): number {
  const archived = st.sessions.archived();
  if (!archived.some((a) => a.conversation)) return 0; // the usual start: no database query
  const inDb = new Set(ws.captureCounts().sessionIds);
  const files = new Set(archived.filter((a) => a.conversation && !inDb.has(a.id)).flatMap((a) => a.files));
  if (files.size === 0) return 0;
  // Only sessions the log still names: one deleted since is gone from its archive file too.
  const stubbed = new Set(archived.map((a) => a.id));
  const records = [...files].flatMap((file) => {
    const { records: all, skipped } = st.archive.read(file);
    for (const line of skipped) log(`capture archive: skipped ${line}`);
    return all.filter((r) => stubbed.has(recordSession(r) ?? ''));
  });
  const sessions = new LiveSessions();
  for (const r of records) sessions.apply(r);
  const conversations = sessions.conversations();
  ws.applyCapture(sessions.exchangeRows(records), conversations, st.log.filePath);
  for (const f of foldFeedback(records.filter((r): r is FeedbackRecord => r.t === 'feedback'))) applyFeedback(ws, f);
  log(`capture: rebuilt ${conversations.length} archived sessions the database lacked from ${files.size} archive files`);
  return conversations.length;
}
