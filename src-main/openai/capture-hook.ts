// The endpoint's side of live capture (src-main/capture/capture-service.ts implements it):
// what a served reply looks like when it is recorded. Both answer paths, the local model
// (./handler.ts) and proxy mode (./upstream.ts), hand their replies over in this shape.
import type http from 'node:http';
import type { ChatRequest, FinishReason, ToolCallOut } from './protocol.js';

/** A reply as live capture records it. */
export interface CapturedReplyIn {
  content: string;
  reasoning?: string;
  toolCalls: ToolCallOut[];
  finishReason: FinishReason;
  servedBy: 'local' | 'upstream';
  /** The id the answer carried. */
  model: string | null;
  /** The local model folder that generated it (null upstream). */
  modelDir: string | null;
  rollout: { promptIds: number[]; tokens: number[]; logprobs: number[] } | null;
  /** The chat completion's id as the client received it (`chatcmpl-…`), so feedback can name the reply. */
  completionId: string | null;
}

/** What an answer says about its reply, before the endpoint adds how it was served. */
export type ReplyText = Omit<CapturedReplyIn, 'servedBy' | 'modelDir' | 'rollout'>;

/** `POST /v1/feedback` (docs/design.md §Feedback endpoint): the answer's status and JSON body. */
export type FeedbackHandler = (body: unknown) => { status: number; body: object };

/** One captured request: commit its reply (durably) before the response finishes. */
export interface CaptureTicket {
  /** Records the request (once): when it is accepted. `commit` records it too if it was not yet. */
  start(): void;
  commit(reply: CapturedReplyIn): void;
}

/** Live capture's side of the endpoint. */
export interface CaptureHook {
  /**
   * Called for each valid request; null when capture is off. May throw a RequestError (a bad
   * header). The request is recorded at once, or with `defer` only at the ticket's `start()`
   * (proxy mode: once the upstream accepted it, so a request it refuses leaves nothing).
   */
  begin(headers: http.IncomingHttpHeaders, body: Record<string, unknown>, request: ChatRequest, options?: { defer?: boolean }): CaptureTicket | null;
}
