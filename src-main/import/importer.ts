/**
 * Chat-export import (docs/design.md §Imports): opens a file, a directory of split files or a zip, detects the
 * format from the first bytes and the first record, and streams normalised conversations one
 * at a time, so that a 1 GB export imports in bounded memory.
 *
 *   const opened = await openExport('conversations.json');      // detects; throws UserError
 *   for await (const conversation of opened.conversations()) …   // throws UserError if unreadable
 *   opened.warnings                                               // skipped conversations and more
 *
 * Detection never parses the whole file: it reads the first 64 KiB (binary? JSON at all?) and
 * then the first record only. The record's keys decide: `mapping` → chatgpt, `chat_messages` →
 * claude, `conversations` → sharegpt, `messages` → messages (JSON) or openai (JSONL; messages
 * again when the record carries Hugging Face media such as `images` or `{type:"image"}` parts),
 * `chat.history` → openwebui.
 * openai and messages share one converter, so the two labels only name the source.
 */
import { SOURCE_FORMATS, UserError, type ImportedConversation, type SourceFormat } from '../../src-shared/types.js';
import { convertChatGpt } from './chatgpt.js';
import { convertClaude } from './claude.js';
import { describeConversation, idOf, isObject, MalformedConversation, MediaTokenReplacer, str, type ConversationConverter, type JsonObject } from './common.js';
import { convertMessages } from './hf-messages.js';
import { peekSource, readRecords, SUPPORTED_LINE, type Container, type Peek } from './json-records.js';
import { convertOpenWebUi } from './openwebui.js';
import { convertShareGpt } from './sharegpt.js';
import { resolveInput, type ByteSource, type ResolvedInput } from './sources.js';

export { SUPPORTED_LINE } from './json-records.js';
export type FormatChoice = SourceFormat | 'auto';

export interface OpenedExport {
  /** The file, zip or directory given. */
  path: string;
  /** Detected or forced. */
  format: SourceFormat;
  /** Of the file bytes; for a directory of split files, of the files concatenated in order. */
  sha256: string;
  /**
   * Streams conversations one at a time. A malformed conversation is skipped with a warning
   * pushed to `warnings` (naming the conversation and why). A file that cannot be read at all
   * (truncated JSON, binary, wrong format) makes the iterator throw a UserError naming the file
   * and the place (byte offset or line). Each call starts a fresh pass.
   */
  conversations(): AsyncIterable<ImportedConversation>;
  /**
   * File-level warnings, then per-conversation ones (copies of each conversation's own
   * `warnings`) and skipped conversations, filled while iterating.
   */
  warnings: string[];
}

/** One converter per format: a `SOURCE_FORMATS` entry without one is a type error here. */
export const CONVERTERS: Record<SourceFormat, ConversationConverter> = {
  chatgpt: convertChatGpt,
  claude: convertClaude,
  sharegpt: convertShareGpt,
  openai: convertMessages,
  messages: convertMessages,
  openwebui: convertOpenWebUi,
};

/**
 * The format of a file from its container and first record. Throws a one-line UserError that
 * lists the supported formats when nothing fits.
 */
export function detectFormat(label: string, container: Container, first: unknown): SourceFormat {
  if (!isObject(first)) {
    const what = container === 'jsonl' ? 'its first line is' : container === 'array' ? 'its first element is' : 'it is';
    throw new UserError(`${label}: not a supported chat export (${what} ${describeJson(first)}, not a conversation object). ${SUPPORTED_LINE}`);
  }
  if ('mapping' in first || 'current_node' in first) return 'chatgpt';
  if ('chat_messages' in first) return 'claude';
  if (Array.isArray(first.conversations)) return 'sharegpt';
  if (isObject(first.chat) && (isObject(first.chat.history) || Array.isArray(first.chat.messages))) return 'openwebui';
  if (Array.isArray(first.messages)) {
    if (container !== 'jsonl') return 'messages';
    return looksLikeHuggingFace(first) ? 'messages' : 'openai';
  }
  const keys = Object.keys(first).slice(0, 8).join(', ') || 'none';
  const where = container === 'object' ? 'the top-level object has' : 'the first record has';
  throw new UserError(`${label}: not a supported chat export (${where} keys: ${keys}). ${SUPPORTED_LINE}`);
}

function describeJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/** Hugging Face datasets carry media lists or `{type:"image"}` parts; OpenAI logs use image_url. */
function looksLikeHuggingFace(record: JsonObject): boolean {
  if (MediaTokenReplacer.hasMedia(record)) return true;
  const messages = record.messages as unknown[];
  return messages.some(
    (m) => isObject(m) && Array.isArray(m.content) && m.content.some((p) => isObject(p) && ['image', 'video', 'audio'].includes(p.type as string)),
  );
}

export async function openExport(inputPath: string, format: FormatChoice = 'auto'): Promise<OpenedExport> {
  if (format !== 'auto' && !SOURCE_FORMATS.includes(format)) {
    throw new UserError(`unknown format '${String(format)}'; use auto, ${SOURCE_FORMATS.join(', ')}`);
  }
  const input = await resolveInput(inputPath);
  const firstSource = input.sources[0]!;
  const firstPeek = await peekWithPass(input, firstSource);
  const fileWarnings = [...input.warnings];
  let chosen: SourceFormat;
  if (format !== 'auto') chosen = checkForcedFormat(firstSource.label, firstPeek, format);
  else if (firstPeek.container === 'array' && firstPeek.first === undefined && input.sources.length === 1) {
    // An empty export is a valid export of nobody's chats; nothing will be read from it.
    chosen = 'chatgpt';
  } else chosen = detectFormat(firstSource.label, firstPeek.container, firstPeek.first);
  const sha256 = await input.sha256();
  const convert = CONVERTERS[chosen];

  const opened: OpenedExport = {
    path: inputPath,
    format: chosen,
    sha256,
    warnings: [],
    async *conversations() {
      opened.warnings = [...fileWarnings];
      const pass = await input.startPass();
      try {
        for (const [index, source] of input.sources.entries()) {
          const peek = index === 0 ? firstPeek : await peekSource(source, () => pass.open(source));
          if (peek.container === 'array' && peek.first === undefined) {
            opened.warnings.push(`${source.label}: holds no conversations`);
            continue;
          }
          for await (const record of readRecords(source, await pass.open(source), peek.container)) {
            const conversation = convertRecord(convert, source, record.value, record.position, opened.warnings);
            if (conversation) yield conversation;
          }
        }
      } finally {
        pass.close();
      }
    },
  };
  return opened;
}

/** Formats read by one converter: forcing one on a file detected as the other changes nothing. */
const SAME_CONVERTER: SourceFormat[][] = [['openai', 'messages']];

/**
 * A forced format is used as given unless the file is clearly another known format: then every
 * conversation would be skipped, so the import stops with a one-line error naming the format the
 * file looks like. A file detection cannot place keeps the forced format.
 */
function checkForcedFormat(label: string, peek: Peek, forced: SourceFormat): SourceFormat {
  let detected: SourceFormat;
  try {
    detected = detectFormat(label, peek.container, peek.first);
  } catch {
    return forced;
  }
  const compatible = detected === forced || SAME_CONVERTER.some((group) => group.includes(detected) && group.includes(forced));
  if (compatible) return forced;
  throw new UserError(`${label}: this looks like a ${detected} export, not ${forced}; import it as ${detected} or auto`);
}

async function peekWithPass(input: ResolvedInput, source: ByteSource): Promise<Peek> {
  const pass = await input.startPass();
  try {
    return await peekSource(source, () => pass.open(source));
  } finally {
    pass.close();
  }
}

/** One record → a conversation, or undefined with a warning that names it and says why. */
function convertRecord(
  convert: ConversationConverter,
  source: ByteSource,
  value: unknown,
  position: string,
  warnings: string[],
): ImportedConversation | undefined {
  const record = isObject(value) ? value : {};
  const name = () =>
    describeConversation(idOf(record.conversation_id) ?? idOf(record.uuid) ?? idOf(record.id), str(record.title) ?? str(record.name), position);
  try {
    const conversation = convert(value, { position });
    warnings.push(...conversation.warnings.map((w) => `${source.label}: ${w}`));
    // An empty session would only clutter the store and the UI.
    if (conversation.turns.length === 0) {
      warnings.push(`${source.label}: ${name()} skipped: it has no messages to import`);
      return undefined;
    }
    return conversation;
  } catch (err) {
    // Anything other than MalformedConversation is a bug in a converter; it still must not
    // stop the import of the other conversations.
    const why = err instanceof MalformedConversation ? err.message : `could not be converted (${(err as Error).message})`;
    warnings.push(`${source.label}: ${name()} skipped: ${why}`);
    return undefined;
  }
}
