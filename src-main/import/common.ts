/**
 * Helpers every importer shares: loose field access on untrusted JSON, timestamps, citation
 * marker stripping, image placeholders and the per-conversation warning book-keeping.
 *
 * Exports are untrusted input: every accessor here tolerates any shape and never throws, so a
 * strange field degrades to "absent" instead of crashing the import.
 */
import type { Attachment, BranchAlternative, Citation, ImportedConversation, ImportedTurn } from '../../src-shared/types.js';

/** A conversation that cannot be imported; the importer skips it and records `reason`. */
export class MalformedConversation extends Error {
  override name = 'MalformedConversation';
}

export type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * `table[key]` for a key read from an export. Only the table's own entries count: a plain
 * object lookup would find Object.prototype's "constructor" or "__proto__" and hand back a
 * function where a role or a kind belongs.
 */
export function ownValue<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/** The value as an id: strings as they are, finite numbers as their decimal text. */
export function idOf(value: unknown): string | undefined {
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/**
 * Unix seconds from a number (seconds, or milliseconds when it is too large to be seconds)
 * or an ISO-8601 string. Anything else is undefined.
 */
export function toUnixSeconds(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value) && value > 0) {
    // 1e11 s is the year 5138: a larger number can only be milliseconds.
    return value > 1e11 ? value / 1000 : value;
  }
  if (typeof value === 'string' && value.trim() !== '') {
    const asNumber = Number(value);
    if (Number.isFinite(asNumber)) return toUnixSeconds(asNumber);
    const ms = Date.parse(value);
    return Number.isFinite(ms) ? ms / 1000 : undefined;
  }
  return undefined;
}

/**
 * A record's own date, for the formats that have no fixed field for one (ShareGPT, Hugging Face
 * messages): the first of created_at, create_time, createdAt, timestamp, date that reads as a time.
 */
export function recordDate(record: JsonObject): number | undefined {
  for (const key of ['created_at', 'create_time', 'createdAt', 'timestamp', 'date']) {
    const seconds = toUnixSeconds(record[key]);
    if (seconds !== undefined) return seconds;
  }
  return undefined;
}

// ChatGPT wraps inline citations in private-use characters: U+E200 opens, U+E201 closes and
// U+E202 separates the fields, e.g. "\ue200cite\ue202turn0search1\ue201". Other characters of
// the block (U+E203/U+E204 around highlighted text …) are bare markers.
const PRIVATE_USE_SEQUENCE = /[ \t]*\ue200[^\ue200\ue201]*\ue201/g;
const PRIVATE_USE_CHAR = /[\ue200-\ue2ff]/g;
// Older browsing replies cite as 【12†source】 or 【3:0†file.pdf】.
const LENTICULAR_MARKER = /[ \t]*【[^【】\n]*†[^【】\n]*】/g;

/**
 * Removes citation markers from text used for training and returns them as `citations`.
 * Horizontal whitespace right before a marker goes with it, so "Paris \ue200…\ue201." becomes
 * "Paris." rather than "Paris .". `lookup` resolves a marker to its source where the export
 * says (ChatGPT's content_references / citations metadata).
 */
export function stripCitations(
  text: string,
  lookup?: (marker: string) => { url?: string; title?: string } | undefined,
): { text: string; citations: Citation[] } {
  const citations: Citation[] = [];
  if (!/[\ue200-\ue2ff【]/.test(text)) return { text, citations };
  const keep = (match: string) => {
    const marker = match.replace(/^[ \t]+/, '');
    const source = lookup?.(marker);
    const citation: Citation = { marker };
    if (source?.url) citation.url = source.url;
    if (source?.title) citation.title = source.title;
    citations.push(citation);
    return '';
  };
  const cleaned = text
    .replace(PRIVATE_USE_SEQUENCE, keep)
    .replace(LENTICULAR_MARKER, keep)
    .replace(PRIVATE_USE_CHAR, '');
  return { text: cleaned, citations };
}

const MEDIA_TOKENS = { '<image>': 'image', '<video>': 'video', '<audio>': 'audio' } as const;
type MediaToken = keyof typeof MEDIA_TOKENS;

/**
 * LLaMA-Factory style media: `<image>` tokens in the text, paths in a sibling `images` array
 * (likewise videos/audios), consumed in order through the whole conversation. Each token
 * becomes a "[image]" placeholder with the path as attachment metadata.
 */
export class MediaTokenReplacer {
  private next: Record<string, number> = { image: 0, video: 0, audio: 0 };

  constructor(private readonly lists: Record<string, unknown>) {}

  static hasMedia(record: JsonObject): boolean {
    return ['images', 'videos', 'audios'].some((key) => Array.isArray(record[key]) && record[key].length > 0);
  }

  replace(text: string): { text: string; attachments: Attachment[] } {
    const attachments: Attachment[] = [];
    const out = text.replace(/<image>|<video>|<audio>/g, (token) => {
      const kind = MEDIA_TOKENS[token as MediaToken];
      const list = this.lists[`${kind}s`];
      const ref = Array.isArray(list) ? list[this.next[kind]!++] : undefined;
      const attachment: Attachment = { kind };
      if (typeof ref === 'string') attachment.name = ref;
      attachments.push(attachment);
      return `[${kind}]`;
    });
    return { text: out, attachments };
  }
}

/** Counts repeated per-conversation problems so that one line reports "3 messages …". */
export class WarningTally {
  private counts = new Map<string, number>();
  private order: string[] = [];

  /** `what` follows "N message(s)"; its `{are}` becomes "is" for one message. */
  add(what: string): void {
    if (!this.counts.has(what)) this.order.push(what);
    this.counts.set(what, (this.counts.get(what) ?? 0) + 1);
  }

  lines(): string[] {
    return this.order.map((what) => {
      const n = this.counts.get(what)!;
      return `${n} ${n === 1 ? 'message' : 'messages'} ${what.replaceAll('{are}', n === 1 ? 'is' : 'are')}`;
    });
  }
}

/**
 * "conversation 1234 “Title” (conversation #3)", or without an id "conversation #3 “Title”",
 * "the conversation", "conversation at line 17": for warnings a person can act on. `position`
 * is json-records' ("conversation #3", "the conversation", "line 17").
 */
export function describeConversation(id: string | undefined, title: string | undefined, position: string): string {
  const parts = [id ? `conversation ${id}` : /conversation/.test(position) ? position : `conversation at ${position}`];
  if (title) parts.push(`“${title.length > 60 ? title.slice(0, 57) + '…' : title}”`);
  if (id) parts.push(`(${position})`);
  return parts.join(' ');
}

/** The longest title taken from a message, in characters (a cut one ends in "…"). */
export const TITLE_FROM_MESSAGE_CHARS = 80;

/**
 * A title for a conversation that has none: its first visible user message with text, on one
 * line, cut at a word before {@link TITLE_FROM_MESSAGE_CHARS} characters. Placeholders such as
 * "[image]" alone do not make a title. Undefined when no user message has text.
 */
export function titleFromTurns(turns: readonly ImportedTurn[]): string | undefined {
  for (const turn of turns) {
    if (turn.role !== 'user' || turn.hidden) continue;
    const line = turn.text.replace(/\s+/g, ' ').trim();
    if (!line.replace(/\[(?:image|file|audio|video)\]/g, '').trim()) continue;
    if (line.length <= TITLE_FROM_MESSAGE_CHARS) return line;
    const cut = line.slice(0, TITLE_FROM_MESSAGE_CHARS - 1);
    const space = cut.lastIndexOf(' ');
    return (space >= TITLE_FROM_MESSAGE_CHARS / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:.\-–—]+$/, '') + '…';
  }
  return undefined;
}

/** Where a record sits in its file, for warnings and errors. */
export interface RecordContext {
  /** "conversation #3" for JSON arrays, "line 17" for JSONL. */
  position: string;
}

/** Turns one raw record of an export into a normalised conversation, or throws MalformedConversation. */
export type ConversationConverter = (raw: unknown, ctx: RecordContext) => ImportedConversation;

/** What a format's reader takes out of one record; `conversationConverter` does the rest. */
export interface ConversationParts {
  externalId: string | undefined;
  title: string | undefined;
  createdAt?: number;
  turns: ImportedTurn[];
  /** None unless the format keeps regenerated replies. */
  alternatives?: BranchAlternative[];
  metadata: Record<string, unknown>;
  /** Per-message problems, reported as counts. */
  tally: WarningTally;
  /** Conversation-level problems, one line each, reported before the counts. */
  notes?: string[];
}

/**
 * A converter from a format's reader. Every format shares the framing: a record that is not an
 * object is malformed, and each warning starts with the conversation it belongs to, so that a
 * person can find it in the export.
 */
export function conversationConverter(read: (record: JsonObject) => ConversationParts): ConversationConverter {
  return (raw, ctx) => {
    if (!isObject(raw)) throw new MalformedConversation('it is not a JSON object');
    const parts = read(raw);
    const label = describeConversation(parts.externalId, parts.title, ctx.position);
    const conversation: ImportedConversation = {
      externalId: parts.externalId,
      // A record without a title (Hugging Face messages, ShareGPT, an untitled ChatGPT chat) is
      // named by its first user message; one without a date takes its first message's time.
      title: parts.title?.trim() || titleFromTurns(parts.turns),
      createdAt: parts.createdAt ?? parts.turns.find((t) => t.timestamp !== undefined)?.timestamp,
      turns: parts.turns,
      alternatives: parts.alternatives ?? [],
      metadata: parts.metadata,
      warnings: [...(parts.notes ?? []), ...parts.tally.lines()].map((line) => `${label}: ${line}`),
    };
    return dropUndefined(conversation);
  };
}

/** The record's message list under `key`; absent (`missing` says so) or not a list, it is malformed. */
export function requireArray(record: JsonObject, key: string, missing: string): unknown[] {
  const value = record[key];
  if (value === undefined) throw new MalformedConversation(missing);
  if (!Array.isArray(value)) throw new MalformedConversation(`its "${key}" is not an array`);
  return value;
}

/** How a format names who wrote a message. */
export interface RoleField<R> {
  /** The message field: "role", "sender", "from" … */
  key: string;
  /** Its known values and the roles they mean. */
  roles: Record<string, R>;
  /** ShareGPT writers vary the case ("GPT", "Human"); other formats are exact. */
  ignoreCase?: boolean;
  /** How the warning words other values, e.g. 'with an unknown role'. */
  unknown: string;
}

/**
 * The message with the role it names, or undefined after counting it as skipped: it is not an
 * object, or its role is one the format does not know.
 */
export function readMessageRole<R>(message: unknown, field: RoleField<R>, tally: WarningTally): { message: JsonObject; role: R } | undefined {
  if (!isObject(message)) {
    tally.add('that {are} not objects skipped');
    return undefined;
  }
  const name = str(message[field.key]) ?? '';
  const role = ownValue(field.roles, field.ignoreCase ? name.toLowerCase() : name);
  if (!role) {
    tally.add(`${field.unknown} "${String(message[field.key])}" skipped`);
    return undefined;
  }
  return { message, role };
}

/** A turn is kept when it says or does anything: text, reasoning, a tool call or an attachment. */
export function hasContent(turn: ImportedTurn): boolean {
  return Boolean(turn.text || turn.reasoning || turn.toolCalls?.length || turn.attachments?.length);
}

/** Tool-call arguments as stored: JSON text. A string is taken as that text already. */
export function argumentsText(args: unknown): string {
  return typeof args === 'string' ? args : JSON.stringify(args);
}

/**
 * Removes undefined fields and empty optional lists, so that turns compare and serialise
 * cleanly (`{role, text}` rather than `{role, text, attachments: [], citations: undefined}`).
 * Only for objects whose list fields are all optional (turns, attachments), never a conversation.
 */
export function compact<T extends object>(value: T): T {
  for (const key of Object.keys(value) as (keyof T)[]) {
    const v = value[key];
    if (v === undefined || (Array.isArray(v) && v.length === 0)) delete value[key];
  }
  return value;
}

/** Removes the undefined fields only. */
export function dropUndefined<T extends object>(value: T): T {
  for (const key of Object.keys(value) as (keyof T)[]) if (value[key] === undefined) delete value[key];
  return value;
}
