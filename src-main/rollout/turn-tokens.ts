/**
 * The token ids of tool turns in an episode (docs/design.md §Rollouts). The generated tokens of
 * a reply are kept exactly as sampled, never re-tokenised; what follows them comes from the
 * chat template:
 *
 * 1. the end of the assistant turn the model did not write itself: what the template writes
 *    after a reply's content (found by rendering a marker reply), less the stop token the
 *    model ended on when the template's text starts with it (ChatML's `<|im_end|>` is
 *    generated, its `\n` is not);
 * 2. the tool turns and the next generation prompt: the conversation rendered with the tool
 *    messages and the generation prompt, minus the same conversation rendered without them
 *    (the first must start with the second, or the template rewrites history and there is
 *    no place to append; that is a one-line UserError).
 *
 * The two pieces are encoded together, without special tokens added.
 */
import { UserError } from '../../src-shared/types.js';
import type { ChatMessage, TemplateOptions } from '../model/tokenizer.js';
import type { PolicyTokenizer } from './policy.js';

const MARKER = 'HindsightRolloutReplyMarker';

/** What the template writes after an assistant reply's content, for a reply after `history`. */
export function assistantTurnEnd(tok: PolicyTokenizer, history: ChatMessage[], options: TemplateOptions): string {
  const rendered = tok.applyChatTemplate([...history, { role: 'assistant', content: MARKER }], { ...options, addGenerationPrompt: false });
  const at = rendered.lastIndexOf(MARKER);
  if (at < 0) throw new UserError("the chat template does not write an assistant reply's content: cannot find where a reply ends");
  return rendered.slice(at + MARKER.length);
}

export interface ToolTurnRequest {
  /** The conversation before the reply: prompt messages and earlier turns. */
  history: ChatMessage[];
  /** The reply's text as the history will show it. */
  reply: string;
  /** The stop token the reply ended on, if it did. */
  stopToken?: number;
  /** The tool messages that answer the reply's calls. */
  toolMessages: ChatMessage[];
  /** Tools and extra variables, as the prompt was rendered with. */
  template: Omit<TemplateOptions, 'addGenerationPrompt'>;
}

/** Token ids to append after a reply's generated tokens: the rest of its turn, the tool turns, the next generation prompt. */
export function toolTurnIds(tok: PolicyTokenizer, request: ToolTurnRequest): number[] {
  const withReply = [...request.history, { role: 'assistant', content: request.reply }];
  const without = tok.applyChatTemplate(withReply, { ...request.template, addGenerationPrompt: false });
  const withTools = tok.applyChatTemplate([...withReply, ...request.toolMessages], { ...request.template, addGenerationPrompt: true });
  if (!withTools.startsWith(without)) {
    let i = 0;
    while (i < without.length && without[i] === withTools[i]) i++;
    throw new UserError(`the chat template rewrites the conversation when a tool turn is added (they differ at character ${i}: ${JSON.stringify(without.slice(i, i + 30))} became ${JSON.stringify(withTools.slice(i, i + 30))}), so the tool turn has no place after the generated reply`);
  }
  const end = assistantTurnEnd(tok, request.history, request.template);
  const generatedEnd = request.stopToken === undefined ? '' : tok.decode([request.stopToken], false);
  const rest = generatedEnd && end.startsWith(generatedEnd) ? end.slice(generatedEnd.length) : end;
  return tok.encode(rest + withTools.slice(without.length));
}
