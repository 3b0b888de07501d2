// The teacher ("enhanced") prompt of On-Policy Distillation (docs/design.md §Hint prompt): the same context
// with the hindsight hint appended to the last user message, so the model shown the hint
// can act as its own teacher. Shared by the sdft export and the trainer.
/** Any chat message shape: Hindsight's ChatMessage, the tokenizer's, TRL's. */
type MessageLike = { role: string; content: string };

export const HINT_PREFIX = "\n\n[user's hint / instruction]\n";

/**
 * Returns a copy of `context` with `hint` appended to the last user message. With no user
 * message the hint goes on the last message; with an empty context it becomes a new user
 * message. The input is not modified.
 */
export function enhancedContext<M extends MessageLike>(context: readonly M[], hint: string): M[] {
  const out = context.map((m) => ({ ...m }));
  if (out.length === 0) return [{ role: 'user', content: HINT_PREFIX.trimStart() + hint } as M];
  let target = -1;
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i].role === 'user') {
      target = i;
      break;
    }
  }
  if (target < 0) target = out.length - 1;
  out[target].content = out[target].content + HINT_PREFIX + hint;
  return out;
}
