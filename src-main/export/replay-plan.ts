// What a replay to OpenClaw-RL sends (docs/design.md §Hand-off): each recorded session becomes
// a list of requests, one per recorded assistant reply (the slot the server fills with its own,
// on-policy reply), carrying the recorded user, tool and system messages that came before it.
//
//   - A request is `main` when any message it adds is a conversational user turn or a tool
//     turn (a reaction: Hindsight's classification, src-main/pipeline/classify.ts); it is
//     `side` when everything it adds is side by nature (metadata, hidden or empty turns).
//     A side request does not extend the conversation the later requests carry.
//   - Messages after the last reply (its next state) go out as a final request of their own,
//     so the server sees the user's real follow-up.
//   - Consecutive recorded replies with nothing between them are one slot.
//   - The last request carries X-Session-Done.
import type { ReplayRequest, ReplaySession } from '../../src-shared/handoff.js';
import { toMessage } from '../pipeline/chat-messages.js';
import type { Store } from '../store/database.js';
import { iterateBundles, type SessionBundle, type TurnRecord } from '../store/session-reads.js';

function isMainAddition(turn: TurnRecord): boolean {
  return turn.role === 'tool' ? !turn.hidden && turn.text.trim() !== '' : turn.classification === 'main';
}

export function sessionPlan(bundle: SessionBundle): ReplaySession {
  const requests: ReplayRequest[] = [];
  let pending: TurnRecord[] = [];
  const flush = (replyTurn: number | null) => {
    if (!pending.length) return;
    requests.push({ index: requests.length, turnType: pending.some(isMainAddition) ? 'main' : 'side', messages: pending.map(toMessage), replyTurn, last: false });
    pending = [];
  };
  for (const turn of bundle.turns) {
    if (turn.role === 'assistant') flush(turn.index);
    else pending.push(turn);
  }
  flush(null);
  if (requests.length) requests[requests.length - 1]!.last = true;
  return { sessionId: bundle.id, requests };
}

/** Every session that has something to send, in the export order. */
export function replayPlan(store: Store): ReplaySession[] {
  const out: ReplaySession[] = [];
  for (const bundle of iterateBundles(store)) {
    const plan = sessionPlan(bundle);
    if (plan.requests.length) out.push(plan);
  }
  return out;
}

export type { ReplayRequest, ReplaySession };
