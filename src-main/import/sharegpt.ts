/**
 * ShareGPT: `{conversations:[{from, value}], system?, tools?}`, as an array of such records or
 * a single one. `from` is human / gpt / system / function_call / observation (also the common
 * aliases user / assistant / tool).
 *
 * Choices: the optional `system` field becomes a leading system turn; `tools` (the tool schema)
 * is kept in the metadata, not in the text; a `function_call` value is JSON `{name, arguments}`
 * (or a list of them) and becomes an assistant turn with tool calls; `observation` is a tool
 * turn answering the latest call. LLaMA-Factory `<image>` tokens with an `images` list become
 * "[image]" placeholders.
 */
import type { ImportedTurn, Role, ToolCall } from '../../src-shared/types.js';
import {
  argumentsText,
  compact,
  conversationConverter,
  hasContent,
  idOf,
  isObject,
  MediaTokenReplacer,
  readMessageRole,
  recordDate,
  requireArray,
  str,
  WarningTally,
  type RoleField,
} from './common.js';

const SPEAKER: RoleField<Role | 'function_call'> = {
  key: 'from',
  ignoreCase: true,
  unknown: 'from an unknown speaker',
  roles: {
    human: 'user',
    user: 'user',
    gpt: 'assistant',
    assistant: 'assistant',
    chatgpt: 'assistant',
    bing: 'assistant',
    bard: 'assistant',
    model: 'assistant',
    system: 'system',
    function_call: 'function_call',
    observation: 'tool',
    tool: 'tool',
    function: 'tool',
  },
};

export const convertShareGpt = conversationConverter((raw) => {
  const messages = requireArray(raw, 'conversations', 'it has no "conversations" list');
  const tally = new WarningTally();
  const media = new MediaTokenReplacer(raw);
  const turns: ImportedTurn[] = [];
  const system = str(raw.system)?.trim();
  if (system) turns.push({ role: 'system', text: system });
  let lastCall: ToolCall | undefined;

  for (const item of messages) {
    const known = readMessageRole(item, SPEAKER, tally);
    if (!known) continue;
    const speaker = known.role;
    const value = str(known.message.value);
    if (value === undefined) {
      tally.add('without a string "value" skipped');
      continue;
    }
    if (speaker === 'function_call') {
      const calls = parseFunctionCalls(value, tally);
      lastCall = calls[calls.length - 1];
      turns.push({ role: 'assistant', text: '', toolCalls: calls });
      continue;
    }
    const { text, attachments } = media.replace(value.trim());
    const turn = compact<ImportedTurn>({ role: speaker, text, attachments, toolName: speaker === 'tool' ? lastCall?.name : undefined });
    if (!hasContent(turn)) {
      tally.add('that {are} empty skipped');
      continue;
    }
    turns.push(turn);
  }

  const metadata: Record<string, unknown> = {};
  if (raw.tools !== undefined) metadata.tools = raw.tools;
  return { externalId: idOf(raw.id) ?? idOf(raw.conversation_id), title: str(raw.title), createdAt: recordDate(raw), turns, metadata, tally };
});

function parseFunctionCalls(value: string, tally: WarningTally): ToolCall[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    tally.add('with a function_call that is not JSON kept as raw arguments');
    return [{ name: 'unknown', arguments: value }];
  }
  const calls = (Array.isArray(parsed) ? parsed : [parsed]).filter(isObject);
  if (calls.length === 0) {
    tally.add('with a function_call that is not {name, arguments} kept as raw arguments');
    return [{ name: 'unknown', arguments: value }];
  }
  return calls.map((call) => {
    const args = call.arguments ?? call.parameters ?? {};
    return { name: str(call.name) ?? 'unknown', arguments: argumentsText(args) };
  });
}
