/**
 * GGUF reading (ggml's docs/gguf.md): the header of versions 2 and 3, the metadata key/values
 * of every type (arrays included), the tensor infos, the alignment and where the data begins;
 * and split models (`name-00001-of-00003.gguf`), whose parts each carry their own header.
 *
 * The file is read through a small window by offset, never whole: tensor bytes are read on
 * demand (../safetensors.ts does the same for safetensors). Every length the file states is
 * checked against the bytes left before anything is allocated for it, so a truncated file, or
 * a string or array longer than the file could hold, is one UserError line naming the file and
 * what was being read, not a crash or a gigabyte allocation.
 */
import fs from 'node:fs';
import path from 'node:path';
import { LRUCache } from 'lru-cache';
import { UserError } from '../../../src-shared/types.js';
import { GGML_TYPES, ggmlTypeName } from './ggml-types.js';

export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** ggml's order: dims[0] is the innermost (a row's length). */
  dims: number[];
  type: number;
  file: string;
  /** Absolute byte range in `file`. */
  begin: number;
  end: number;
}

export interface GgufFile {
  file: string;
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
  alignment: number;
  dataOffset: number;
  /** Each metadata value's GGUF type, and an array's element type (what a writer needs to copy it as it was). */
  metadataTypes: Map<string, { type: number; elemType?: number }>;
}

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
const MAGIC = GGUF_MAGIC;
/** GGUF metadata value types (gguf.md's gguf_metadata_value_type) → their bytes; 8 is a string, 9 an array. */
export const GGUF_VALUE_BYTES: Readonly<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const VALUE_BYTES = GGUF_VALUE_BYTES;
export const GGUF_STRING = 8;
export const GGUF_ARRAY = 9;
const STRING = GGUF_STRING;
const ARRAY = GGUF_ARRAY;
/** The fewest bytes an element of each type takes: what an array's count is checked against. */
const minBytes = (type: number): number => VALUE_BYTES[type] ?? (type === STRING ? 8 : 12);
const WINDOW = 1 << 20;

/** A read position over a file descriptor, through a window of at most a few MiB. */
class Cursor {
  pos = 0;
  private buf = Buffer.alloc(WINDOW);
  private bufStart = 0;
  private bufLen = 0;
  /** The element type of the last top-level array read. */
  lastElemType = -1;

  constructor(private readonly fd: number, readonly size: number, readonly file: string) {}

  fail(what: string, need: number | bigint): never {
    throw new UserError(`${this.file}: truncated or corrupt GGUF: ${what} at byte ${this.pos} needs ${need} bytes, but the file has ${this.size - this.pos} left`);
  }

  /** Makes bytes [pos, pos + n) readable from the window. */
  private need(n: number, what: string): number {
    if (n > this.size - this.pos) this.fail(what, n);
    if (this.pos < this.bufStart || this.pos + n > this.bufStart + this.bufLen) {
      if (n > this.buf.length) this.buf = Buffer.alloc(n);
      this.bufStart = this.pos;
      this.bufLen = fs.readSync(this.fd, this.buf, 0, Math.min(this.buf.length, this.size - this.pos), this.pos);
      if (this.bufLen < n) this.fail(what, n);
    }
    const at = this.pos - this.bufStart;
    this.pos += n;
    return at;
  }

  u32(what: string): number { return this.buf.readUInt32LE(this.need(4, what)); }

  /** A uint64 that must be a safe integer (every count and offset here). */
  u64(what: string): number {
    const v = this.buf.readBigUInt64LE(this.need(8, what));
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`${what} (${v})`, v);
    return Number(v);
  }

  string(what: string): string {
    const len = this.u64(`${what}'s length`);
    const at = this.need(len, what);
    return this.buf.toString('utf8', at, at + len);
  }

  /** Moves past a value without building it (a skipped array's elements). */
  private skip(type: number, what: string, depth: number): void {
    if (type === ARRAY) {
      this.value(type, what, depth, true);
      return;
    }
    const len = type === STRING ? this.u64(`${what}'s length`) : VALUE_BYTES[type]!;
    if (len > this.size - this.pos) this.fail(what, len);
    this.pos += len;
  }

  value(type: number, what: string, depth = 0, skipArrays = false): GgufValue {
    if (type === STRING) return this.string(what);
    if (type === ARRAY) {
      if (depth > 2) throw new UserError(`${this.file}: corrupt GGUF: ${what} nests arrays too deep`);
      const elemType = this.u32(`${what}'s element type`);
      if (depth === 0) this.lastElemType = elemType;
      const count = this.u64(`${what}'s length`);
      if (elemType !== STRING && elemType !== ARRAY && !(elemType in VALUE_BYTES)) throw new UserError(`${this.file}: corrupt GGUF: ${what} has elements of unknown type ${elemType}`);
      if (count * minBytes(elemType) > this.size - this.pos) this.fail(`${what} (an array of ${count})`, count * minBytes(elemType));
      if (skipArrays && (elemType === STRING || elemType === ARRAY || count > SKIMMED_ARRAY_LENGTH)) {
        if (elemType in VALUE_BYTES) this.pos += count * VALUE_BYTES[elemType]!;
        else for (let i = 0; i < count; i++) this.skip(elemType, what, depth + 1);
        return [];
      }
      const out: GgufValue[] = new Array(count);
      for (let i = 0; i < count; i++) out[i] = this.value(elemType, what, depth + 1);
      return out;
    }
    const n = VALUE_BYTES[type];
    if (n === undefined) throw new UserError(`${this.file}: corrupt GGUF: ${what} has unknown value type ${type}`);
    const at = this.need(n, what);
    const b = this.buf;
    switch (type) {
      case 0: return b.readUInt8(at);
      case 1: return b.readInt8(at);
      case 2: return b.readUInt16LE(at);
      case 3: return b.readInt16LE(at);
      case 4: return b.readUInt32LE(at);
      case 5: return b.readInt32LE(at);
      case 6: return b.readFloatLE(at);
      case 7: return b.readUInt8(at) !== 0;
      case 10: return safe(b.readBigUInt64LE(at));
      case 11: return safe(b.readBigInt64LE(at));
      default: return b.readDoubleLE(at);
    }
  }
}

/** A 64-bit integer as a number where it is exact, else as a bigint. */
function safe(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/**
 * The longest array of numbers or booleans a skimmed header keeps: per-layer values (Ollama's
 * sliding-window flags, head counts) are a few hundred at most; a vocabulary's scores and token
 * types are tens of thousands.
 */
const SKIMMED_ARRAY_LENGTH = 4096;

/**
 * Reads one GGUF file's header, metadata and tensor infos (no tensor data). With `skipArrays`
 * every array of strings, of arrays or longer than {@link SKIMMED_ARRAY_LENGTH} is checked and
 * stepped over, kept as `[]`: what a model listing needs (hyper-parameters, per-layer values,
 * tensor types) without decoding a 150k-token vocabulary.
 */
export function readGgufHeader(file: string, options: { skipArrays?: boolean } = {}): GgufFile {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (err) {
    throw new UserError(`cannot open ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    const c = new Cursor(fd, fs.fstatSync(fd).size, file);
    if (c.size < 4 || c.u32('the magic') !== MAGIC) throw new UserError(`${file}: not a GGUF file (it does not start with "GGUF")`);
    const version = c.u32('the version');
    if (version !== 2 && version !== 3) throw new UserError(`${file}: GGUF version ${version} is not supported (only 2 and 3)`);
    const tensorCount = c.u64('the tensor count');
    const kvCount = c.u64('the metadata count');
    // A key/value takes at least 8 + 4 + 1 bytes and a tensor info 8 + 4 + 4 + 8.
    if (kvCount * 13 + tensorCount * 24 > c.size - c.pos) c.fail(`${kvCount} metadata entries and ${tensorCount} tensor infos`, kvCount * 13 + tensorCount * 24);
    const metadata = new Map<string, GgufValue>();
    const metadataTypes = new Map<string, { type: number; elemType?: number }>();
    for (let i = 0; i < kvCount; i++) {
      const key = c.string(`metadata key ${i}`);
      const type = c.u32(`the type of '${key}'`);
      metadata.set(key, c.value(type, `metadata '${key}'`, 0, options.skipArrays));
      metadataTypes.set(key, type === ARRAY ? { type, elemType: c.lastElemType } : { type });
    }
    const align = metadata.get('general.alignment') ?? 32;
    if (typeof align !== 'number' || align <= 0 || (align & (align - 1)) !== 0) throw new UserError(`${file}: general.alignment ${String(align)} is not a power of two`);
    const infos: { name: string; dims: number[]; type: number; offset: number }[] = [];
    const names = new Set<string>();
    for (let i = 0; i < tensorCount; i++) {
      const name = c.string(`tensor ${i}'s name`);
      if (names.has(name)) throw new UserError(`${file}: corrupt GGUF: tensor '${name}' appears twice`);
      names.add(name);
      const nDims = c.u32(`tensor '${name}''s dimension count`);
      if (nDims < 1 || nDims > 4) throw new UserError(`${file}: corrupt GGUF: tensor '${name}' has ${nDims} dimensions (ggml allows 1 to 4)`);
      const dims: number[] = [];
      for (let d = 0; d < nDims; d++) dims.push(c.u64(`tensor '${name}''s dimensions`));
      infos.push({ name, dims, type: c.u32(`tensor '${name}''s type`), offset: c.u64(`tensor '${name}''s offset`) });
    }
    const dataOffset = Math.ceil(c.pos / align) * align;
    const tensors = infos.map((t) => placeTensor(file, t, dataOffset, align, c.size));
    return { file, version, metadata, tensors, alignment: align, dataOffset, metadataTypes };
  } finally {
    fs.closeSync(fd);
  }
}

function placeTensor(file: string, t: { name: string; dims: number[]; type: number; offset: number }, dataOffset: number, align: number, size: number): GgufTensorInfo {
  const type = GGML_TYPES[t.type];
  if (!type) throw new UserError(`${file}: tensor '${t.name}' has unknown ggml type ${t.type}`);
  if (t.dims[0]! % type.blockSize) throw new UserError(`${file}: tensor '${t.name}' has rows of ${t.dims[0]}, not a multiple of ${type.name}'s block of ${type.blockSize}`);
  const elements = t.dims.reduce((a, d) => a * d, 1);
  if (!Number.isSafeInteger(elements)) throw new UserError(`${file}: corrupt GGUF: tensor '${t.name}' has dimensions [${t.dims}]`);
  const bytes = (elements / type.blockSize) * type.blockBytes;
  const begin = dataOffset + t.offset;
  if (t.offset % align) throw new UserError(`${file}: corrupt GGUF: tensor '${t.name}' starts at data offset ${t.offset}, not a multiple of the alignment ${align}`);
  if (begin + bytes > size) {
    throw new UserError(`${file}: truncated or corrupt GGUF: tensor '${t.name}' (${ggmlTypeName(t.type)} [${t.dims}]) needs bytes ${begin}..${begin + bytes}, but the file has ${size}`);
  }
  return { name: t.name, dims: t.dims, type: t.type, file, begin, end: begin + bytes };
}

const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

/** The last models opened, by path, size and modification time: a command opens one several times (config, weights, tokenizer). */
const opened = new LRUCache<string, GgufFile & { files: string[] }>({ max: 2 });

/**
 * A GGUF model: one file, or every part of a split one (given any part). The metadata is the
 * first part's; the tensors are all parts' together. Read once per file version (kept for the
 * last two), as a 150k-token vocabulary's header takes most of a second.
 */
export function openGguf(file: string): GgufFile & { files: string[] } {
  let key: string | undefined;
  try {
    const st = fs.statSync(file);
    key = `${path.resolve(file)}:${st.size}:${st.mtimeMs}`;
  } catch {
    // readGgufHeader says what is wrong with the path
  }
  const hit = key !== undefined ? opened.get(key) : undefined;
  if (hit) return hit;
  const model = openUncached(file);
  if (key !== undefined) opened.set(key, model);
  return model;
}

function openUncached(file: string): GgufFile & { files: string[] } {
  const m = SPLIT.exec(path.basename(file));
  if (!m) {
    const one = readGgufHeader(file);
    const count = one.metadata.get('split.count');
    if (typeof count === 'number' && count > 1) throw new UserError(`${file}: is part of a ${count}-part split model but is not named like one (name-00001-of-0000${count}.gguf)`);
    return { ...one, files: [file] };
  }
  const count = Number(m[3]);
  if (count < 1) throw new UserError(`${file}: a split of ${m[3]} parts`);
  const files = Array.from({ length: count }, (_, i) => path.join(path.dirname(file), `${m[1]}-${String(i + 1).padStart(5, '0')}-of-${m[3]}.gguf`));
  for (const f of files) if (!fs.existsSync(f)) throw new UserError(`${file}: part ${path.basename(f)} of the split model is missing`);
  const parts = files.map((f) => readGgufHeader(f));
  const first = parts[0]!;
  const names = new Set<string>();
  for (const p of parts) for (const t of p.tensors) {
    if (names.has(t.name)) throw new UserError(`${p.file}: tensor '${t.name}' appears in two parts of the split model`);
    names.add(t.name);
  }
  const expected = first.metadata.get('split.tensors.count');
  if (typeof expected === 'number' && expected !== names.size) throw new UserError(`${first.file}: the split model declares ${expected} tensors, its ${count} parts hold ${names.size}`);
  return { ...first, tensors: parts.flatMap((p) => p.tensors), files };
}

/** A tensor's raw bytes, in an own 8-byte-aligned buffer. */
export function readGgufTensorBytes(t: GgufTensorInfo): Uint8Array {
  const len = t.end - t.begin;
  const bytes = new Uint8Array(new ArrayBuffer(Math.ceil(len / 8) * 8), 0, len);
  const fd = fs.openSync(t.file, 'r');
  try {
    let done = 0;
    while (done < len) {
      const n = fs.readSync(fd, bytes, done, Math.min(len - done, 1 << 30), t.begin + done);
      if (n <= 0) throw new UserError(`${t.file}: tensor '${t.name}' is truncated`);
      done += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return bytes;
}
