/**
 * Claude.ai data export (`conversations.json`): an array of
 * `{uuid, name, created_at, chat_messages:[{sender, text, content[], attachments[], files[]}]}`.
 *
 * Choices:
 * - `content[]` blocks are read in order. `thinking` becomes the turn's reasoning; `tool_use`
 *   adds a tool call to the current assistant turn; `tool_result` ends that turn and becomes a
 *   tool turn; text after a tool result starts a new assistant turn. That keeps the order of
 *   events, so a tool result is the next state of the call that asked for it.
 * - When the blocks give nothing (no content, or only empty ones), the message's `text` is used.
 * - Attachments' `extracted_content` is appended to the user's text under an
 *   "[Attachment: name]" line; attachments and files are also kept as metadata.
 * - Unknown block types: their `text` if any, and a counted warning.
 */
import type { Attachment, Citation, ImportedTurn, Role } from '../../src-shared/types.js';
import {
  argumentsText,
  compact,
  conversationConverter,
  hasContent,
  idOf,
  isObject,
  readMessageRole,
  requireArray,
  str,
  toUnixSeconds,
  WarningTally,
  type JsonObject,
  type RoleField,
} from './common.js';

const SENDER: RoleField<Role> = { key: 'sender', roles: { human: 'user', user: 'user', assistant: 'assistant' }, unknown: 'from an unknown sender' };

export const convertClaude = conversationConverter((raw) => {
  const messages = requireArray(raw, 'chat_messages', 'it has no "chat_messages"');
  const tally = new WarningTally();
  const turns: ImportedTurn[] = [];
  for (const item of messages) {
    const known = readMessageRole(item, SENDER, tally);
    if (!known) continue;
    const produced = messageTurns(known.message, known.role, tally);
    if (produced.length === 0) tally.add('that {are} empty skipped');
    turns.push(...produced);
  }

  const metadata: Record<string, unknown> = {};
  for (const key of ['updated_at', 'summary', 'model']) if (raw[key] !== undefined && raw[key] !== null && raw[key] !== '') metadata[key] = raw[key];
  return {
    externalId: idOf(raw.uuid) ?? idOf(raw.id),
    title: str(raw.name) ?? str(raw.title),
    createdAt: toUnixSeconds(raw.created_at),
    turns,
    metadata,
    tally,
  };
});

/** One chat message → its turns (more than one when tool results interleave). */
function messageTurns(message: JsonObject, role: Role, tally: WarningTally): ImportedTurn[] {
  const base = { timestamp: toUnixSeconds(message.created_at), externalId: idOf(message.uuid) };
  const out: ImportedTurn[] = [];
  let current: ImportedTurn | undefined;
  const texts: string[] = [];
  const reasoning: string[] = [];
  const open = (): ImportedTurn => (current ??= { role, text: '', ...base });
  const close = () => {
    if (!current) return;
    current.text = texts.join('\n\n').trim();
    if (reasoning.length) current.reasoning = reasoning.join('\n\n');
    if (hasContent(current)) out.push(compact(current));
    current = undefined;
    texts.length = 0;
    reasoning.length = 0;
  };

  const blocks = Array.isArray(message.content) ? message.content.filter(isObject) : [];
  for (const block of blocks) {
    const type = str(block.type) ?? '(none)';
    switch (type) {
      case 'text': {
        const text = str(block.text);
        if (text) {
          open();
          texts.push(text);
          const citations = blockCitations(block);
          if (citations.length) current!.citations = [...(current!.citations ?? []), ...citations];
        }
        break;
      }
      case 'thinking': {
        const thinking = str(block.thinking) ?? str(block.text);
        if (thinking) {
          open();
          reasoning.push(thinking);
        }
        break;
      }
      case 'tool_use': {
        const turn = open();
        const name = str(block.name) ?? 'unknown';
        const input = block.input === undefined ? {} : block.input;
        turn.toolCalls = [...(turn.toolCalls ?? []), compact({ id: idOf(block.id), name, arguments: argumentsText(input) })];
        break;
      }
      case 'tool_result': {
        close();
        out.push(
          compact<ImportedTurn>({
            role: 'tool',
            text: toolResultText(block.content),
            toolCallId: idOf(block.tool_use_id),
            toolName: str(block.name) ?? toolNameFor(idOf(block.tool_use_id), out),
            status: block.is_error === true ? 'error' : undefined,
            ...base,
          }),
        );
        break;
      }
      default: {
        const text = str(block.text);
        tally.add(`with an unknown content block "${type}"${text ? ' (its text kept)' : ' skipped'}`);
        if (text) {
          open();
          texts.push(text);
        }
      }
    }
  }
  close();

  // Nothing usable in the blocks: fall back to the flat `text` field.
  if (out.length === 0) {
    const text = str(message.text)?.trim();
    if (text) out.push(compact<ImportedTurn>({ role, text, ...base }));
  }
  if (role === 'user') addAttachments(message, out);
  return out;
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined || content === null ? '' : JSON.stringify(content);
  return content
    .map((part) => (typeof part === 'string' ? part : isObject(part) ? (str(part.text) ?? (part.type === 'image' ? '[image]' : '')) : ''))
    .filter(Boolean)
    .join('\n');
}

function toolNameFor(callId: string | undefined, turns: ImportedTurn[]): string | undefined {
  if (!callId) return undefined;
  for (const turn of turns) for (const call of turn.toolCalls ?? []) if (call.id === callId) return call.name;
  return undefined;
}

function blockCitations(block: JsonObject): Citation[] {
  if (!Array.isArray(block.citations)) return [];
  const text = str(block.text) ?? '';
  return block.citations.filter(isObject).map((c) => {
    const details = isObject(c.details) ? c.details : {};
    const start = typeof c.start_index === 'number' ? c.start_index : undefined;
    const end = typeof c.end_index === 'number' ? c.end_index : undefined;
    return compact<Citation>({
      marker: start !== undefined && end !== undefined ? text.slice(start, end) : '',
      url: str(details.url) ?? str(c.url),
      title: str(details.title) ?? str(c.title),
    });
  });
}

/** Appends extracted attachment text to the user's (last) turn and records attachments and files. */
function addAttachments(message: JsonObject, turns: ImportedTurn[]): void {
  const attachments: Attachment[] = [];
  const extracted: string[] = [];
  for (const a of Array.isArray(message.attachments) ? message.attachments.filter(isObject) : []) {
    const name = str(a.file_name);
    const content = str(a.extracted_content);
    if (content?.trim()) extracted.push(`[Attachment: ${name ?? 'file'}]\n${content.trim()}`);
    attachments.push(compact<Attachment>({ kind: 'file', name, mimeType: str(a.file_type) || undefined, meta: compact({ size: a.file_size } as Record<string, unknown>) }));
  }
  const files = [message.files, message.files_v2].flatMap((list) => (Array.isArray(list) ? list.filter(isObject) : []));
  const seen = new Set<string>();
  for (const f of files) {
    const name = str(f.file_name);
    const key = idOf(f.file_uuid) ?? name ?? '';
    if (seen.has(key)) continue; // files and files_v2 describe the same uploads
    seen.add(key);
    const kind = str(f.file_kind) === 'image' || /\.(png|jpe?g|gif|webp|heic)$/i.test(name ?? '') ? 'image' : 'file';
    attachments.push(compact<Attachment>({ kind, name, meta: compact({ file_uuid: idOf(f.file_uuid) } as Record<string, unknown>) }));
  }
  if (!attachments.length) return;
  let turn = [...turns].reverse().find((t) => t.role === 'user');
  if (!turn) {
    turn = { role: 'user', text: '', timestamp: toUnixSeconds(message.created_at), externalId: idOf(message.uuid) };
    turns.push(compact(turn));
  }
  if (extracted.length) turn.text = [turn.text, ...extracted].filter(Boolean).join('\n\n');
  turn.attachments = [...(turn.attachments ?? []), ...attachments];
}
