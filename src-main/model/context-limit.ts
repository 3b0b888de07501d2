/**
 * The model's context window, as one rule for every path that generates (the CLI's
 * `generate`, the /v1 endpoint, the local judge): a prompt and its reply together never take
 * more positions than the checkpoint has (`max_position_embeddings` in config.json). Past
 * them RoPE still computes, but the model was never trained there and writes noise, at a
 * cost that grows with every token. See docs/design.md §The context window.
 *
 * - A prompt that leaves no room for even one new token is refused (ContextLengthError).
 * - The reply's budget is capped to what remains; generation then ends with finish reason
 *   'length', as when it reaches the budget it was asked for.
 * A caller that would rather keep going with less context (the judge) cuts its prompt first
 * with {@link keepPromptTail}.
 */
import { UserError } from '../../src-shared/types.js';

/** New tokens generated when the caller names no budget. */
export const DEFAULT_MAX_NEW_TOKENS = 256;

/** A prompt with no room left for a reply; carries the numbers for callers that word their own message. */
export class ContextLengthError extends UserError {
  constructor(
    readonly promptTokens: number,
    readonly maxPositions: number,
  ) {
    super(
      `the prompt is ${promptTokens} tokens, but the model has ${maxPositions} positions ` +
        `(its context length), which leaves no room for a reply; shorten the prompt`,
    );
  }
}

/** How many new tokens may follow a prompt of `promptTokens`: `requested`, capped to the room left. */
export function replyBudget(promptTokens: number, requested: number, maxPositions: number): number {
  const room = maxPositions - promptTokens;
  if (room < 1) throw new ContextLengthError(promptTokens, maxPositions);
  return Math.min(requested, room);
}

/**
 * The prompt cut from the left so that `reserve` new tokens fit after it; a leading BOS is
 * kept (models lean on the first position). Returns the ids unchanged when they fit.
 */
export function keepPromptTail(ids: readonly number[], maxPositions: number, reserve: number, bosId?: number): { ids: number[]; dropped: number } {
  const keep = Math.max(1, maxPositions - Math.max(1, reserve));
  if (ids.length <= keep) return { ids: [...ids], dropped: 0 };
  const head = bosId !== undefined && ids[0] === bosId && keep > 1 ? [bosId] : [];
  const tail = ids.slice(ids.length - (keep - head.length));
  return { ids: [...head, ...tail], dropped: ids.length - head.length - tail.length };
}
