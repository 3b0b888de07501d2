/**
 * OpenAI chat format and Hugging Face "messages": `{messages:[{role, content, tool_calls?,
 * tool_call_id?}]}`, one record per JSONL line or as a JSON array / single object. Both
 * formats share this converter; they differ only in the label the source is stored under.
 *
 * `content` is a string, null (an assistant turn that only calls tools), or a list of parts:
 * text parts (`text`, `input_text`, `output_text`) are joined; image / audio / video / file parts
 * become "[image]"-style placeholders with metadata (a `data:` URL keeps only its MIME type, never
 * the bytes). Roles: `developer` counts as system, legacy `function` as tool. Assistant
 * `reasoning_content` / `reasoning` / `thinking` is kept as reasoning. LLaMA-Factory `<image>`
 * tokens with a sibling `images` list become placeholders too.
 */
import type { Attachment, ImportedTurn, Role, ToolCall } from '../../src-shared/types.js';
import {
  argumentsText,
  compact,
  conversationConverter,
  hasContent,
  idOf,
  isObject,
  MediaTokenReplacer,
  ownValue,
  readMessageRole,
  recordDate,
  requireArray,
  str,
  toUnixSeconds,
  WarningTally,
  type JsonObject,
  type RoleField,
} from './common.js';

const ROLE: RoleField<Role> = {
  key: 'role',
  unknown: 'with an unknown role',
  roles: {
    system: 'system',
    developer: 'system',
    user: 'user',
    human: 'user',
    assistant: 'assistant',
    tool: 'tool',
    function: 'tool',
    ipython: 'tool',
  },
};

const TEXT_PARTS = new Set(['text', 'input_text', 'output_text']);
const MEDIA_PARTS: Record<string, string> = {
  image: 'image',
  image_url: 'image',
  input_image: 'image',
  audio: 'audio',
  input_audio: 'audio',
  video: 'video',
  video_url: 'video',
  file: 'file',
  input_file: 'file',
};

export const convertMessages = conversationConverter((raw) => {
  const messages = requireArray(raw, 'messages', 'it has no "messages" list');
  const tally = new WarningTally();
  const media = new MediaTokenReplacer(raw);
  const turns: ImportedTurn[] = [];
  const callNames = new Map<string, string>();
  for (const item of messages) {
    const known = readMessageRole(item, ROLE, tally);
    if (!known) continue;
    const { message, role } = known;
    const body = contentBody(message.content, tally);
    const tokens = media.replace(body.text);
    const turn: ImportedTurn = {
      role,
      text: tokens.text.trim(),
      attachments: [...body.attachments, ...tokens.attachments],
      timestamp: toUnixSeconds(message.timestamp ?? message.created_at),
    };
    if (role === 'assistant') {
      turn.toolCalls = toolCalls(message);
      for (const call of turn.toolCalls) if (call.id) callNames.set(call.id, call.name);
      const reasoning = str(message.reasoning_content) ?? str(message.reasoning) ?? str(message.thinking);
      if (reasoning?.trim()) turn.reasoning = reasoning.trim();
    }
    if (role === 'tool') {
      turn.toolCallId = idOf(message.tool_call_id);
      turn.toolName = str(message.name) ?? (turn.toolCallId ? callNames.get(turn.toolCallId) : undefined);
    }
    if (!hasContent(turn)) {
      tally.add('that {are} empty skipped');
      continue;
    }
    turns.push(compact(turn));
  }

  const metadata: Record<string, unknown> = {};
  if (raw.tools !== undefined) metadata.tools = raw.tools;
  return {
    externalId: idOf(raw.id) ?? idOf(raw.conversation_id),
    title: str(raw.title),
    createdAt: recordDate(raw),
    turns,
    metadata,
    tally,
  };
});

function contentBody(content: unknown, tally: WarningTally): { text: string; attachments: Attachment[] } {
  if (typeof content === 'string') return { text: content, attachments: [] };
  if (content === null || content === undefined) return { text: '', attachments: [] };
  const parts = Array.isArray(content) ? content : [content];
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  for (const part of parts) {
    if (typeof part === 'string') {
      texts.push(part);
      continue;
    }
    if (!isObject(part)) continue;
    const type = str(part.type) ?? (str(part.text) !== undefined ? 'text' : '(none)');
    if (TEXT_PARTS.has(type)) {
      if (str(part.text)) texts.push(str(part.text)!);
      continue;
    }
    const kind = ownValue(MEDIA_PARTS, type);
    if (kind) {
      texts.push(`[${kind}]`);
      attachments.push(mediaAttachment(kind, part));
      continue;
    }
    tally.add(`with an unknown content part "${type}"${str(part.text) ? ' (its text kept)' : ' skipped'}`);
    if (str(part.text)) texts.push(str(part.text)!);
  }
  return { text: texts.join('\n'), attachments };
}

/** Where the media is, without its bytes: a URL or path is kept, a data: URL only as its type. */
function mediaAttachment(kind: string, part: JsonObject): Attachment {
  const holder = part[part.type as string];
  const ref =
    str(holder) ?? (isObject(holder) ? (str(holder.url) ?? str(holder.path) ?? str(holder.filename)) : undefined) ?? str(part.url) ?? str(part.path) ?? str(part.image);
  if (ref?.startsWith('data:')) {
    return { kind, mimeType: /^data:([^;,]+)/.exec(ref)?.[1] };
  }
  const name = isObject(holder) ? str(holder.filename) : undefined;
  return compact<Attachment>({ kind, name: name ?? (ref && !/^https?:/.test(ref) ? ref : undefined), meta: ref && /^https?:/.test(ref) ? { url: ref } : undefined });
}

function toolCalls(message: JsonObject): ToolCall[] {
  const calls: ToolCall[] = [];
  const list = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  for (const call of list) {
    const fn = isObject(call.function) ? call.function : call;
    const args = fn.arguments ?? fn.parameters ?? {};
    calls.push(compact({ id: idOf(call.id), name: str(fn.name) ?? 'unknown', arguments: argumentsText(args) }));
  }
  // The legacy single `function_call` field of older OpenAI chat logs.
  if (isObject(message.function_call)) {
    const fn = message.function_call;
    const args = fn.arguments ?? {};
    calls.push({ name: str(fn.name) ?? 'unknown', arguments: argumentsText(args) });
  }
  return calls;
}
