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
import type { ImportedConversation, ImportedTurn, Role, ToolCall } from '../core/types.js';
import {
  compact,
  describeConversation,
  dropUndefined,
  finishWarnings,
  idOf,
  isObject,
  MalformedConversation,
  MediaTokenReplacer,
  str,
  WarningTally,
  type ConversationConverter,
} from './common.js';

const SPEAKERS: Record<string, Role | 'function_call'> = {
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
};

export const convertShareGpt: ConversationConverter = (raw, ctx) => {
  if (!isObject(raw)) throw new MalformedConversation('it is not a JSON object');
  const externalId = idOf(raw.id) ?? idOf(raw.conversation_id);
  const title = str(raw.title);
  const label = describeConversation(externalId, title, ctx.position);
  if (raw.conversations === undefined) throw new MalformedConversation('it has no "conversations" list');
  if (!Array.isArray(raw.conversations)) throw new MalformedConversation('its "conversations" is not an array');

  const tally = new WarningTally();
  const media = new MediaTokenReplacer(raw);
  const turns: ImportedTurn[] = [];
  const system = str(raw.system)?.trim();
  if (system) turns.push({ role: 'system', text: system });
  let lastCall: ToolCall | undefined;

  for (const message of raw.conversations) {
    if (!isObject(message)) {
      tally.add('that are not objects skipped');
      continue;
    }
    const speaker = SPEAKERS[(str(message.from) ?? '').toLowerCase()];
    const value = str(message.value);
    if (!speaker) {
      tally.add(`from an unknown speaker "${String(message.from)}" skipped`);
      continue;
    }
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
    if (!text && attachments.length === 0) {
      tally.add('that are empty skipped');
      continue;
    }
    turns.push(compact<ImportedTurn>({ role: speaker, text, attachments, toolName: speaker === 'tool' ? lastCall?.name : undefined }));
  }

  const metadata: Record<string, unknown> = {};
  if (raw.tools !== undefined) metadata.tools = raw.tools;
  const conversation: ImportedConversation = {
    externalId,
    title,
    turns,
    alternatives: [],
    metadata,
    warnings: finishWarnings(label, tally, []),
  };
  return dropUndefined(conversation);
};

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
    return { name: str(call.name) ?? 'unknown', arguments: typeof args === 'string' ? args : JSON.stringify(args) };
  });
}
