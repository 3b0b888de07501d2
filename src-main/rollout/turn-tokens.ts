/**
 * The token ids of tool turns in an episode (docs/design.md §Rollouts). The generated tokens of
 * a reply are kept exactly as sampled, never re-tokenised; what follows them comes from the
 * chat template, rendered with a marker in place of the reply's content (templates rewrite a
 * reply's beginning by its place in the conversation, Qwen3 its think block, never its end):
 *
 * - without the tool messages, the text after the marker is the end of the assistant turn;
 * - with the tool messages and the generation prompt, the text after the marker must start
 *   with that same end (else the template rewrites the turn when a tool turn follows, and
 *   there is no place to append: a one-line UserError); the rest is the tool turns and the
 *   next generation prompt.
 *
 * Appended: the end of the turn less what the model already wrote of it (the stop token it
 * ended on, when the end starts with that token's text: ChatML's `<|im_end|>` is generated,
 * its `\n` is not), then the tool turns and the generation prompt, encoded together without
 * special tokens added.
 */
import { UserError } from '../../src-shared/types.js';
import type { ChatMessage, TemplateOptions } from '../model/tokenizer.js';
import type { PolicyTokenizer } from './policy.js';

const MARKER = 'HindsightRolloutReplyMarker';

export interface ToolTurnRequest {
  /** The conversation before the reply: prompt messages and earlier turns. */
  history: ChatMessage[];
  /** The stop token the reply ended on, if it did. */
  stopToken?: number;
  /** The tool messages that answer the reply's calls. */
  toolMessages: ChatMessage[];
  /** Tools and extra variables, as the prompt was rendered with. */
  template: Omit<TemplateOptions, 'addGenerationPrompt'>;
}

/** The rendered text after the marker reply (the marker must be there). */
function afterMarker(rendered: string): string {
  const at = rendered.lastIndexOf(MARKER);
  if (at < 0) throw new UserError("the chat template does not write an assistant reply's content: cannot find where a reply ends");
  return rendered.slice(at + MARKER.length);
}

/** Token ids to append after a reply's generated tokens: the rest of its turn, the tool turns, the next generation prompt. */
export function toolTurnIds(tok: PolicyTokenizer, request: ToolTurnRequest): number[] {
  const withReply = [...request.history, { role: 'assistant', content: MARKER }];
  const end = afterMarker(tok.applyChatTemplate(withReply, { ...request.template, addGenerationPrompt: false }));
  const following = afterMarker(tok.applyChatTemplate([...withReply, ...request.toolMessages], { ...request.template, addGenerationPrompt: true }));
  if (!following.startsWith(end)) {
    throw new UserError(`the chat template ends an assistant turn with ${JSON.stringify(end.slice(0, 40))} before the end of a conversation but with ${JSON.stringify(following.slice(0, 40))} before a tool turn, so the tool turn has no place after the generated reply`);
  }
  const generatedEnd = request.stopToken === undefined ? '' : tok.decode([request.stopToken], false);
  const rest = generatedEnd && end.startsWith(generatedEnd) ? end.slice(generatedEnd.length) : end;
  return tok.encode(rest + following.slice(end.length));
}
