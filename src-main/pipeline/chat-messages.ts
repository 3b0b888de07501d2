// Turns as chat messages in the OpenAI / Hugging Face shape that chat templates, TRL and
// the trainer expect: {role, content} plus `tool_calls` on assistant messages and
// `tool_call_id`/`name` on tool messages. Reasoning is never part of `content`.
import type { Role, ToolCall } from '../../src-shared/types.js';

export type { ChatMessage, ChatToolCall } from '../../src-shared/types.js';
import type { ChatMessage, ChatToolCall } from '../../src-shared/types.js';

/** The turn fields a message is built from. */
export interface MessageSource {
  role: Role;
  text: string;
  toolCalls?: ToolCall[];
  toolCallId?: string | null;
  toolName?: string | null;
}

export function toChatToolCalls(calls: readonly ToolCall[]): ChatToolCall[] {
  return calls.map((c) => ({
    ...(c.id !== undefined ? { id: c.id } : {}),
    type: 'function' as const,
    function: { name: c.name, arguments: c.arguments },
  }));
}

export function toMessage(turn: MessageSource): ChatMessage {
  const msg: ChatMessage = { role: turn.role, content: turn.text };
  if (turn.role === 'assistant' && turn.toolCalls?.length) msg.tool_calls = toChatToolCalls(turn.toolCalls);
  if (turn.role === 'tool') {
    if (turn.toolCallId) msg.tool_call_id = turn.toolCallId;
    if (turn.toolName) msg.name = turn.toolName;
  }
  return msg;
}

/**
 * Renders messages as ChatML text (`<|im_start|>role\n…<|im_end|>`), ending with the
 * opening of the assistant turn. Used where a format wants prompt text and no model
 * tokenizer is at hand (the openclaw export); training uses the model's own template.
 */
export function renderChatMl(messages: readonly ChatMessage[]): string {
  let out = '';
  for (const m of messages) {
    let content = m.content;
    if (m.tool_calls?.length) {
      const calls = m.tool_calls.map((c) => JSON.stringify({ name: c.function.name, arguments: c.function.arguments }));
      content += (content ? '\n' : '') + calls.map((c) => `<tool_call>\n${c}\n</tool_call>`).join('\n');
    }
    out += `<|im_start|>${m.role}\n${content}<|im_end|>\n`;
  }
  return out + '<|im_start|>assistant\n';
}
