// The content parts of one ChatGPT message: text parts, context and reasoning blocks, quotes,
// multimodal parts (as placeholders with their attachment records) and citation markers.
// chatgpt.ts walks the conversation tree; this file reads what one node's message says.
import type { Attachment, Citation } from '../../src-shared/types.js';
import { compact, idOf, isObject, ownValue, str, type JsonObject } from './common.js';

/** The text-bearing parts of a message, with placeholders for non-text parts. */
export interface MessageBody {
  text: string;
  attachments: Attachment[];
}

export function statusOf(message: JsonObject): string | undefined {
  const status = str(message.status);
  return status && status !== 'finished_successfully' ? status : undefined;
}

export function partsText(parts: unknown): string {
  if (!Array.isArray(parts)) return '';
  return parts.filter((p): p is string => typeof p === 'string').join('\n');
}

export function contextText(content: JsonObject): string {
  const fields = ['user_profile', 'user_instructions', 'model_set_context', 'repo_summary', 'text'];
  return fields
    .map((key) => str(content[key])?.trim())
    .filter(Boolean)
    .join('\n\n');
}

export function reasoningText(content: JsonObject): string {
  if (Array.isArray(content.thoughts)) {
    return content.thoughts
      .filter(isObject)
      .map((t) => [str(t.summary), str(t.content)].filter(Boolean).join('\n'))
      .filter(Boolean)
      .join('\n\n');
  }
  return (str(content.content) ?? str(content.text) ?? partsText(content.parts)).trim();
}

export function quoteText(content: JsonObject): string {
  const heading = [str(content.title), str(content.url)].filter(Boolean).join(' — ');
  return [heading, str(content.text)].filter(Boolean).join('\n');
}

/** Attachment records from metadata.attachments, minus those already shown by a placeholder. */
export function fileAttachments(metadata: JsonObject, shown: Set<string>): Attachment[] {
  if (!Array.isArray(metadata.attachments)) return [];
  return metadata.attachments.filter(isObject).flatMap((a) => {
    const id = idOf(a.id);
    if (id && shown.has(id)) return [];
    const mimeType = str(a.mime_type) ?? str(a.mimeType);
    return [
      compact<Attachment>({
        kind: mimeType?.startsWith('image/') ? 'image' : 'file',
        name: str(a.name),
        mimeType,
        meta: compact({ id, size: a.size, width: a.width, height: a.height } as Record<string, unknown>),
      }),
    ];
  });
}

export const PART_KINDS: Record<string, string> = {
  image_asset_pointer: 'image',
  audio_asset_pointer: 'audio',
  real_time_user_audio_video_asset_pointer: 'audio',
  video_container_asset_pointer: 'video',
};

/** String parts stay; object parts become "[image]"-style placeholders with their metadata. */
export function multimodalBody(parts: unknown, metadata: JsonObject): MessageBody {
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  const shown = new Set<string>();
  const byId = new Map<string, JsonObject>();
  if (Array.isArray(metadata.attachments)) {
    for (const a of metadata.attachments.filter(isObject)) if (idOf(a.id)) byId.set(idOf(a.id)!, a);
  }
  const list = Array.isArray(parts) ? parts : [];
  // A voice message carries its transcript: that is the text, and the audio needs no placeholder.
  const transcribed = list.some((p) => isObject(p) && p.content_type === 'audio_transcription' && str(p.text));
  for (const part of list) {
    if (typeof part === 'string') {
      if (part) texts.push(part);
      continue;
    }
    if (!isObject(part)) continue;
    const type = str(part.content_type) ?? 'unknown';
    if (type === 'audio_transcription') {
      if (str(part.text)) texts.push(str(part.text)!);
      continue;
    }
    const kind = ownValue(PART_KINDS, type) ?? 'file';
    const pointer = str(part.asset_pointer);
    // "file-service://file-abc" → "file-abc", the id metadata.attachments uses.
    const fileId = pointer?.replace(/^[a-z-]+:\/\//, '');
    const known = fileId ? byId.get(fileId) : undefined;
    if (fileId) shown.add(fileId);
    if (!(transcribed && kind === 'audio')) texts.push(`[${kind}]`);
    attachments.push(
      compact<Attachment>({
        kind,
        name: str(known?.name),
        mimeType: str(known?.mime_type),
        meta: compact({
          content_type: type,
          asset_pointer: pointer,
          size_bytes: part.size_bytes,
          width: part.width,
          height: part.height,
        } as Record<string, unknown>),
      }),
    );
  }
  return { text: texts.join('\n'), attachments: [...attachments, ...fileAttachments(metadata, shown)] };
}

/**
 * Resolves a citation marker to its source through the message metadata: newer exports list
 * `content_references` by matched text, older ones `citations` by character range.
 */
export function citationLookup(text: string, metadata: JsonObject): (marker: string) => Omit<Citation, 'marker'> | undefined {
  const sources = new Map<string, Omit<Citation, 'marker'>>();
  if (Array.isArray(metadata.content_references)) {
    for (const ref of metadata.content_references.filter(isObject)) {
      const matched = str(ref.matched_text);
      const item = Array.isArray(ref.items) ? ref.items.find(isObject) : undefined;
      const url = str(item?.url) ?? (Array.isArray(ref.safe_urls) ? str(ref.safe_urls[0]) : undefined);
      if (matched) sources.set(matched.trim(), compact({ url, title: str(item?.title) }));
    }
  }
  if (Array.isArray(metadata.citations)) {
    for (const c of metadata.citations.filter(isObject)) {
      const start = typeof c.start_ix === 'number' ? c.start_ix : undefined;
      const end = typeof c.end_ix === 'number' ? c.end_ix : undefined;
      const meta = isObject(c.metadata) ? c.metadata : {};
      if (start !== undefined && end !== undefined) {
        sources.set(text.slice(start, end).trim(), compact({ url: str(meta.url), title: str(meta.title) }));
      }
    }
  }
  return (marker) => sources.get(marker);
}
