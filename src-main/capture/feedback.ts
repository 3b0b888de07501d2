/**
 * Explicit feedback from chat clients (docs/design.md §Feedback endpoint): `POST /v1/feedback`
 * turns a thumbs-up or -down on a captured reply into a manual label.
 *
 *   {"id": "chatcmpl-…", "reward": 1}                          the completion the client got
 *   {"session": "my-chat", "turn": 3, "reward": -1, "hint": "…"}  its session and reply turn
 *
 * The feedback is first appended to the capture log (fsync), like everything capture records,
 * then applied. A reply becomes a sample only once the next message arrives, and a client's
 * button is usually pressed before that: until then the feedback waits ("pending", 202) and is
 * applied as soon as the sample exists. Replaying the log applies feedback again only where no
 * manual label written after it is there (a later edit in the annotator wins), and never
 * rewrites a label that already says the same, so replay changes nothing twice. Several ratings
 * of one reply are folded into one (`foldFeedback`), in the order they were acknowledged: the
 * last reward, the last hint given, the last time. Applying them one by one would stamp the
 * first with the replay's clock and make the later ones look older than it.
 */
import type { Reward } from '../../src-shared/types.js';
import { integer, nullable, object, oneOf, optional, string, ValidationError } from '../../src-shared/validate.js';
import type { LabelView } from '../../src-shared/views.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { RequestError } from '../openai/protocol.js';
import type { CapturedReplyAt, CapturedReplyRef } from '../workspace/workspace.js';
import type { FeedbackRecord } from './capture-records.js';

const feedbackBody = object({
  id: optional(string({ min: 1, max: 500 })),
  session: optional(string({ min: 1, max: 500 })),
  turn: optional(integer({ min: 0, max: 1_000_000 })),
  reward: oneOf([1, -1, 0] as const),
  hint: optional(nullable(string({ max: 20_000 }))),
});

export interface FeedbackRequest {
  ref: CapturedReplyRef;
  reward: Reward;
  /** undefined: keep the label's hint; null: remove it. */
  hint: string | null | undefined;
}

/** Checks a request body; a RequestError (400, naming the field) when it is wrong. */
export function parseFeedback(body: unknown): FeedbackRequest {
  let parsed: ReturnType<typeof feedbackBody.parse>;
  try {
    parsed = feedbackBody.parse(body, '');
  } catch (err) {
    if (err instanceof ValidationError) throw new RequestError(err.message, err.field || null);
    throw err;
  }
  const byId = parsed.id !== undefined;
  const bySession = parsed.session !== undefined || parsed.turn !== undefined;
  if (byId === bySession || (bySession && (parsed.session === undefined || parsed.turn === undefined))) {
    throw new RequestError('name the reply either by "id" (the chat completion id) or by "session" and "turn"', byId ? 'id' : 'session');
  }
  const ref: CapturedReplyRef = byId ? { completionId: parsed.id! } : { session: parsed.session!, turn: parsed.turn! };
  return { ref, reward: parsed.reward, hint: parsed.hint };
}

/** What feedback needs of the workspace. */
export type FeedbackWorkspace = Pick<WorkspaceApi, 'listSamples' | 'setLabel'> & {
  findCapturedReply(ref: CapturedReplyRef): CapturedReplyAt | undefined;
};

/** The captured main reply a request names; 404 when there is none, 409 for a side request. */
export function feedbackTarget(ws: FeedbackWorkspace, ref: CapturedReplyRef): CapturedReplyAt & { replyTurn: number } {
  const found = ws.findCapturedReply(ref);
  const what = 'completionId' in ref ? `completion '${ref.completionId}'` : `reply at turn ${ref.turn} of session '${ref.session}'`;
  if (!found) throw new RequestError(`no captured ${what}: feedback can only rate replies recorded by live capture`, 'completionId' in ref ? 'id' : 'session', 404, 'invalid_request_error', 'not_found');
  if (found.kind !== 'main' || found.replyTurn === null) {
    throw new RequestError(`${what} is a side request (X-Turn-Type: side): it is not part of a conversation, so it has no sample to label`, null, 409, 'invalid_request_error', 'not_a_sample');
  }
  return { ...found, replyTurn: found.replyTurn };
}

export type FeedbackOutcome = { status: 'applied'; label: LabelView } | { status: 'pending' } | { status: 'superseded' };

function sameLabel(label: LabelView, f: FeedbackRecord): boolean {
  return label.source === 'manual' && label.reward === f.reward && (f.hint === undefined || (label.hint ?? null) === (f.hint?.trim() ? f.hint : null));
}

/**
 * The feedback records with those on the same reply folded into one, in log (acknowledged)
 * order: what applying them one after another at the time they were answered left.
 */
export function foldFeedback(records: readonly FeedbackRecord[]): FeedbackRecord[] {
  const byReply = new Map<string, FeedbackRecord>();
  for (const f of records) {
    const key = JSON.stringify([f.session, f.turn]);
    const before = byReply.get(key);
    const hint = f.hint !== undefined ? f.hint : before?.hint;
    byReply.delete(key); // re-inserted last: the folded record takes the place of the latest one
    byReply.set(key, { ...f, ...(hint !== undefined ? { hint } : {}) });
  }
  return [...byReply.values()];
}

/** Applies one feedback record as a manual label, if its sample exists and nothing later replaced it. */
export function applyFeedback(ws: FeedbackWorkspace, f: FeedbackRecord): FeedbackOutcome {
  let sample;
  try {
    sample = ws.listSamples(f.session).find((s) => s.responseTurn === f.turn);
  } catch {
    sample = undefined; // the session is not in the database yet: replay or the next request makes it
  }
  if (!sample) return { status: 'pending' };
  const label = sample.label;
  // A manual label written after this feedback (seconds against milliseconds) is the user's later word.
  if (label.source === 'manual' && label.updatedAt !== null && label.updatedAt > Math.floor(f.at / 1000)) return { status: 'superseded' };
  if (sameLabel(label, f)) return { status: 'applied', label };
  return { status: 'applied', label: ws.setLabel(f.session, f.turn, { reward: f.reward, ...(f.hint !== undefined ? { hint: f.hint } : {}) }) };
}
