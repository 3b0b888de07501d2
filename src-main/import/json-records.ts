/**
 * Streams the records (one conversation each) out of a JSON or JSONL byte stream, in bounded
 * memory: stream-json's Parser + StreamArray materialise one array element at a time, and JSONL
 * is read line by line. Nothing here knows about chat formats.
 *
 * `peekSource` looks at the first bytes (binary? JSON at all?) and at the first record only,
 * which is what format detection needs; it never reads the rest of a large file.
 *
 * Unreadable input becomes a UserError naming the file and the place: a byte offset for JSON
 * (exact at the end of a truncated file, otherwise the end of the chunk being parsed), a line
 * number for JSONL.
 */
import { isUtf8 } from 'node:buffer';
import readline from 'node:readline';
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import Assembler from 'stream-json/Assembler.js';
import Parser from 'stream-json/Parser.js';
import StreamArray from 'stream-json/streamers/StreamArray.js';
import StreamValues from 'stream-json/streamers/StreamValues.js';
import { SOURCE_FORMAT_INFO, SOURCE_FORMATS, UserError } from '../../src-shared/types.js';
import type { ByteSource } from './sources.js';

/** How a file holds its records: a JSON array, one JSON object, or JSON Lines. */
export type Container = 'array' | 'object' | 'jsonl';

export interface Peek {
  container: Container;
  /** The first record (array element, object, first line); undefined for an empty array. */
  first: unknown;
}

export interface RawRecord {
  value: unknown;
  /** "conversation #3", "line 17" or "the conversation": for warnings. */
  position: string;
}

const HEAD_BYTES = 64 * 1024;

/** Reads the first bytes; rejects empty, binary and non-JSON files before any parsing. */
async function readHead(source: ByteSource, stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
      if (length >= HEAD_BYTES) break;
    }
  } catch (err) {
    throw readError(source, err);
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks).subarray(0, HEAD_BYTES);
}

/** Offset of the first byte that cannot be in a UTF-8 text file (NUL or invalid UTF-8), or -1. */
export function firstBinaryByte(head: Buffer, complete: boolean): number {
  const nul = head.indexOf(0);
  if (nul < 0 && isUtf8(head)) return -1;
  const bad = firstInvalidUtf8(head, complete);
  if (bad < 0) return nul;
  return nul < 0 ? bad : Math.min(nul, bad);
}

/**
 * Where UTF-8 decoding first fails. Only the slow path after isUtf8 said no (or a NUL was
 * found); `complete` false lets a character cut off by the end of the head pass.
 */
function firstInvalidUtf8(bytes: Buffer, complete: boolean): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    const length = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (length === 0) return i;
    if (i + length > bytes.length) return complete ? i : -1;
    for (let k = 1; k < length; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return i;
    i += length;
  }
  return -1;
}

export interface HeadCheck {
  firstChar: '[' | '{';
}

export function checkHead(source: ByteSource, head: Buffer): HeadCheck {
  const bad = firstBinaryByte(head, head.length < HEAD_BYTES);
  if (bad >= 0) {
    throw new UserError(`${source.label}: binary data at byte ${bad}; a chat export is a JSON or JSONL text file`);
  }
  const text = head.toString('utf8').replace(/^\uFEFF/, '');
  const start = text.search(/\S/);
  if (start < 0) throw new UserError(`${source.label}: the file is empty`);
  const firstChar = text[start]!;
  if (firstChar !== '[' && firstChar !== '{') {
    const shown = JSON.stringify(text.slice(start, start + 20));
    throw new UserError(
      `${source.label}: not JSON or JSONL (it starts with ${shown} at byte ${Buffer.byteLength(text.slice(0, start))}). ${SUPPORTED_LINE}`,
    );
  }
  return { firstChar };
}

/** The one line that lists what we import, for every "unknown file" error: one entry per `SOURCE_FORMATS`. The app and the CLI both show it, so it names both ways to force a format. */
export const SUPPORTED_LINE =
  `Supported formats: ${SOURCE_FORMATS.map((f) => `${f} (${SOURCE_FORMAT_INFO[f].reads})`).join(', ')}; choose one under Format (the app) or with --format (the CLI) to force it.`;

/**
 * Counts the bytes handed to the parser, so that errors can say where they happened, and drops
 * a UTF-8 byte-order mark (Windows tools write one; the JSON parser rejects it).
 */
class ByteCounter extends Transform {
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const first = this.bytes === 0;
    this.bytes += chunk.length;
    done(null, first && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf ? chunk.subarray(3) : chunk);
  }
}

/** A stream-json Parser that remembers whether it failed while finishing (the input ran out). */
function makeParser(jsonStreaming: boolean): { parser: Parser; atEnd: () => boolean } {
  const parser = new Parser({ jsonStreaming, packValues: true, streamValues: false });
  let ending = false;
  const flush = parser._flush.bind(parser);
  parser._flush = (callback: TransformCallback) => {
    ending = true;
    flush(callback);
  };
  return { parser, atEnd: () => ending };
}

function jsonError(source: ByteSource, err: unknown, counter: ByteCounter, atEnd: boolean): UserError {
  if (err instanceof UserError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (!/^Parser /.test(message)) return readError(source, err);
  const detail = message.replace(/^Parser (cannot parse input: |has )/, '');
  if (atEnd) {
    return new UserError(
      `${source.label}: the JSON stops in the middle at byte ${counter.bytes} (${detail}); the file looks truncated`,
    );
  }
  return new UserError(`${source.label}: invalid JSON near byte ${counter.bytes} (${detail})`);
}

function readError(source: ByteSource, err: unknown): UserError {
  if (err instanceof UserError) return err;
  return new UserError(`${source.label}: cannot read it (${err instanceof Error ? err.message : String(err)})`);
}

/**
 * Peeks at a source. `open` is called twice (head bytes, then tokens up to the end of the
 * first record); both streams are destroyed as soon as the answer is known.
 */
export async function peekSource(source: ByteSource, open: () => Promise<Readable>): Promise<Peek> {
  const head = await readHead(source, await open());
  const { firstChar } = checkHead(source, head);
  const stream = await open();
  const counter = new ByteCounter();
  const { parser, atEnd } = makeParser(true);
  pipeline(stream, counter, parser, () => {});
  const assembler = new Assembler();
  let first: unknown;
  let seenFirst = false;
  let skippedOuterBracket = false;
  try {
    for await (const token of parser as AsyncIterable<{ name: string; value?: string }>) {
      // A second top-level value after a complete object: JSON Lines.
      if (seenFirst) return { container: 'jsonl', first };
      if (firstChar === '[' && !skippedOuterBracket) {
        // Skip the outer '[' so that the assembler builds the first element alone.
        skippedOuterBracket = true;
        continue;
      }
      if (firstChar === '[' && assembler.done && token.name === 'endArray') return { container: 'array', first: undefined };
      assembler.consume(token);
      if (assembler.done) {
        first = assembler.current;
        if (firstChar === '[') return { container: 'array', first };
        seenFirst = true;
      }
    }
  } catch (err) {
    // Something follows a complete first value but does not parse: JSON Lines with a bad line
    // (the line reader will name it), or junk after one object (it fails on line 1 then).
    if (seenFirst) return { container: 'jsonl', first };
    const line = firstLineValue(head);
    if (firstChar === '{' && line) return { container: 'jsonl', first: line.value };
    throw jsonError(source, err, counter, atEnd());
  } finally {
    stream.destroy();
    parser.destroy();
  }
  if (!seenFirst) throw new UserError(`${source.label}: the JSON stops in the middle at byte ${counter.bytes}; the file looks truncated`);
  // One value and nothing after it; a .jsonl file with a single line is still JSON Lines.
  return { container: /\.(jsonl|ndjson)$/i.test(source.name) ? 'jsonl' : 'object', first };
}

/** The first line of the head parsed on its own, when there is a complete first line that parses. */
function firstLineValue(head: Buffer): { value: unknown } | undefined {
  const end = head.indexOf(0x0a);
  if (end < 0) return undefined;
  try {
    return { value: JSON.parse(head.subarray(0, end).toString('utf8').replace(/^\uFEFF/, '')) };
  } catch {
    return undefined;
  }
}

/** Streams the records of a source whose container is known. */
export async function* readRecords(source: ByteSource, stream: Readable, container: Container): AsyncGenerator<RawRecord> {
  if (container === 'jsonl') {
    yield* readJsonLines(source, stream);
    return;
  }
  const counter = new ByteCounter();
  const { parser, atEnd } = makeParser(false);
  // One assembled conversation waits in the streamer at most (the default would queue 16).
  const options = { readableHighWaterMark: 1 };
  const streamer = container === 'array' ? new StreamArray(options) : new StreamValues(options);
  pipeline(stream, counter, parser, streamer, () => {});
  try {
    for await (const item of streamer as AsyncIterable<{ key: number; value: unknown }>) {
      yield { value: item.value, position: container === 'array' ? `conversation #${item.key + 1}` : 'the conversation' };
    }
  } catch (err) {
    throw jsonError(source, err, counter, atEnd());
  } finally {
    stream.destroy();
    streamer.destroy();
  }
}

async function* readJsonLines(source: ByteSource, stream: Readable): AsyncGenerator<RawRecord> {
  const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
  let lineNo = 0;
  // A line that fails to parse is reported once we know whether it was the last one.
  let failed: { line: number; message: string } | undefined;
  try {
    for await (const line of lines) {
      lineNo++;
      if (failed) throw new UserError(`${source.label}: line ${failed.line} is not valid JSON (${failed.message})`);
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(lineNo === 1 ? line.replace(/^\uFEFF/, '') : line);
      } catch (err) {
        failed = { line: lineNo, message: (err as Error).message };
        continue;
      }
      yield { value, position: `line ${lineNo}` };
    }
  } catch (err) {
    throw readError(source, err);
  } finally {
    lines.close();
    stream.destroy();
  }
  if (failed) {
    throw new UserError(
      `${source.label}: line ${failed.line}, the last, is not valid JSON (${failed.message}); the file looks truncated`,
    );
  }
}
