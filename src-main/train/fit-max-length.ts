/**
 * The context window of a training row rendered from the database (docs/design.md §Training
 * runs). When a sample's conversation and reply come to more than `maxLength` tokens through
 * the chat template, the row keeps, in this order of priority:
 *   1. the reply, whole: it is what trains, so it is never cut (a reply that alone needs
 *      `maxLength` tokens or more leaves the sample out, counted as over the window);
 *   2. the leading system turn(s), whole (when they and the reply leave no room, the sample
 *      is left out the same way);
 *   3. as many of the latest turns as fit, each whole. A turn starts at a user message and
 *      runs to the next one: the assistant's replies, tool calls and tool results in between
 *      stay with the question they answer, so templates see the roles in an order they accept;
 *   4. when not even the latest turn fits, its oldest messages lose tokens from the left
 *      (the first message down to nothing, then the next), so the words nearest the reply stay.
 * The conversation is rendered anew for each candidate window, so the template writes every
 * kept turn exactly as it would for that shorter chat (BOS, headers, the date line).
 */
import type { ChatMessage, ChatTokenizer, Reply, ResponseSpan, TemplateOptions } from '../model/tokenizer.js';

export type WindowedResponse =
  | { fits: true; span: ResponseSpan; messages: ChatMessage[]; cut: boolean }
  | { fits: false; why: 'reply' | 'system turn' };

/**
 * The longest window of `messages` whose rendering with `reply` fits `maxLength` tokens (see the
 * module comment). `options` are the template's (the tools the conversation offered).
 */
export function windowedResponse(
  tokenizer: ChatTokenizer, messages: readonly ChatMessage[], reply: Reply, maxLength: number, options: Pick<TemplateOptions, 'tools'> = {},
): WindowedResponse {
  const render = (kept: ChatMessage[]) => tokenizer.encodeResponse(kept, reply, options);
  const fitsIn = (span: ResponseSpan) => span.inputIds.length <= maxLength;
  const whole = render([...messages]);
  if (fitsIn(whole)) return { fits: true, span: whole, messages: [...messages], cut: false };
  if (whole.inputIds.length - whole.responseStart >= maxLength) return { fits: false, why: 'reply' };

  const head = leadingSystemCount(messages);
  const system = messages.slice(0, head);
  const body = messages.slice(head);
  const starts = turnStarts(body);
  // The fewest dropped turns that fit: binary search over where the kept turns begin (a
  // later start is never longer).
  let lo = 1, hi = starts.length - 1, best: { span: ResponseSpan; messages: ChatMessage[] } | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const kept = [...system, ...body.slice(starts[mid])];
    const span = render(kept);
    if (fitsIn(span)) {
      best = { span, messages: kept };
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  if (best) return { fits: true, ...best, cut: true };
  return cutLatestTurn(render, tokenizer, system, body.slice(starts.at(-1) ?? body.length), maxLength);
}

function leadingSystemCount(messages: readonly ChatMessage[]): number {
  let n = 0;
  while (n < messages.length && messages[n]!.role === 'system') n++;
  return n;
}

/** Where each turn begins: the first message, then every user message after it. */
function turnStarts(body: readonly ChatMessage[]): number[] {
  return body.flatMap((m, i) => (i === 0 || m.role === 'user' ? [i] : []));
}

/** Step 4 of the module comment: the latest turn, its oldest messages cut from the left until the row fits. */
function cutLatestTurn(
  render: (kept: ChatMessage[]) => ResponseSpan, tokenizer: ChatTokenizer, system: readonly ChatMessage[], turn: readonly ChatMessage[], maxLength: number,
): WindowedResponse {
  const kept = turn.map((m) => ({ ...m }));
  let span = render([...system, ...kept]);
  for (const message of kept) {
    if (typeof message.content !== 'string') continue;
    const ids = tokenizer.encode(message.content);
    let from = 0;
    while (span.inputIds.length > maxLength && from < ids.length) {
      // Re-encoding the shorter text may not save exactly the tokens dropped: drop at least
      // one more each round, so the loop ends.
      from = Math.min(ids.length, from + Math.max(1, span.inputIds.length - maxLength));
      message.content = from < ids.length ? tokenizer.decode(ids.slice(from), false) : '';
      span = render([...system, ...kept]);
    }
    if (span.inputIds.length <= maxLength) return { fits: true, span, messages: [...system, ...kept], cut: true };
  }
  return { fits: false, why: 'system turn' };
}
