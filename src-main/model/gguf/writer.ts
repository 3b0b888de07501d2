/**
 * GGUF v3 writing (ggml's docs/gguf.md), the inverse of ./reader.ts and sharing its tables: the
 * magic, version 3, the tensor and key counts (u64), the metadata (a u64-length UTF-8 key, a
 * u32 value type, the value; an array is its element type, a u64 count and the elements), one
 * info record per tensor (name, dimension count, dims innermost first, ggml type, offset into
 * the data section), zero padding to the alignment, then each tensor's bytes at an aligned offset.
 *
 * Tensors are given as producers and written one at a time, so a merged model is never held in
 * memory whole. The file is written under a temporary name (mode 0600 by default: what is
 * written from a user's chats is private), fsynced and renamed into place, so a reader never
 * sees half a file.
 */
import fs from 'node:fs';
import path from 'node:path';
import { GGML_TYPES, ggmlTypeName } from './ggml-types.js';
import { GGUF_ARRAY, GGUF_MAGIC, GGUF_STRING, GGUF_VALUE_BYTES, type GgufFile, type GgufValue } from './reader.js';

/** GGUF metadata value types by name. */
export const GGUF_TYPE = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: GGUF_STRING, array: GGUF_ARRAY, u64: 10, i64: 11, f64: 12 } as const;

export interface GgufEntry {
  key: string;
  type: number;
  /** An array's element type. */
  elemType?: number;
  value: GgufValue;
}

export interface GgufTensorOut {
  name: string;
  /** ggml order: dims[0] is a row's length. */
  dims: number[];
  /** ggml type (./ggml-types.ts). */
  type: number;
  /** The tensor's bytes, asked for when it is written. */
  data: () => Uint8Array;
}

export const str = (key: string, value: string): GgufEntry => ({ key, type: GGUF_TYPE.string, value });
export const u32 = (key: string, value: number): GgufEntry => ({ key, type: GGUF_TYPE.u32, value });
export const f32 = (key: string, value: number): GgufEntry => ({ key, type: GGUF_TYPE.f32, value });

/** A GGUF file's metadata as entries of the types it was written with (to copy it). */
export function entriesOf(gguf: GgufFile, skip: (key: string) => boolean = () => false): GgufEntry[] {
  const out: GgufEntry[] = [];
  for (const [key, value] of gguf.metadata) {
    if (skip(key)) continue;
    const t = gguf.metadataTypes.get(key)!;
    out.push({ key, type: t.type, ...(t.elemType !== undefined ? { elemType: t.elemType } : {}), value });
  }
  return out;
}

/** Bytes of a tensor of this type and these dims. */
export function tensorBytes(type: number, dims: readonly number[]): number {
  const t = GGML_TYPES[type];
  if (!t) throw new Error(`GGUF writer: unknown ggml type ${type}`);
  const elements = dims.reduce((a, d) => a * d, 1);
  if (dims[0]! % t.blockSize) throw new Error(`GGUF writer: rows of ${dims[0]} are not a multiple of ${t.name}'s block of ${t.blockSize}`);
  return (elements / t.blockSize) * t.blockBytes;
}

class Header {
  private parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void { this.parts.push(b); this.length += b.length; }
  u32(v: number): void { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
  u64(v: number | bigint): void { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  scalar(type: number, v: GgufValue, key: string): void {
    if (type === GGUF_STRING) {
      if (typeof v !== 'string') throw new Error(`GGUF writer: '${key}' must be a string`);
      this.str(v);
      return;
    }
    const n = GGUF_VALUE_BYTES[type];
    if (n === undefined || Array.isArray(v) || typeof v === 'string') throw new Error(`GGUF writer: '${key}' has value type ${type}, which cannot hold ${JSON.stringify(v)}`);
    const b = Buffer.alloc(n);
    switch (type) {
      case 0: b.writeUInt8(Number(v)); break;
      case 1: b.writeInt8(Number(v)); break;
      case 2: b.writeUInt16LE(Number(v)); break;
      case 3: b.writeInt16LE(Number(v)); break;
      case 4: b.writeUInt32LE(Number(v)); break;
      case 5: b.writeInt32LE(Number(v)); break;
      case 6: b.writeFloatLE(Number(v)); break;
      case 7: b.writeUInt8(v ? 1 : 0); break;
      case 10: b.writeBigUInt64LE(BigInt(v as number)); break;
      case 11: b.writeBigInt64LE(BigInt(v as number)); break;
      default: b.writeDoubleLE(Number(v));
    }
    this.push(b);
  }
  bytes(): Buffer { return Buffer.concat(this.parts); }
}

/** The header: everything before the data section, padded to the alignment, and each tensor's offset. */
function header(entries: readonly GgufEntry[], tensors: readonly GgufTensorOut[], align: number): { bytes: Buffer; sizes: number[] } {
  const h = new Header();
  h.u32(GGUF_MAGIC);
  h.u32(3);
  h.u64(tensors.length);
  h.u64(entries.length);
  const keys = new Set<string>();
  for (const e of entries) {
    if (keys.has(e.key)) throw new Error(`GGUF writer: metadata key '${e.key}' given twice`);
    keys.add(e.key);
    h.str(e.key);
    h.u32(e.type);
    if (e.type === GGUF_ARRAY) {
      if (!Array.isArray(e.value) || e.elemType === undefined) throw new Error(`GGUF writer: '${e.key}' must be an array with an element type`);
      h.u32(e.elemType);
      h.u64(e.value.length);
      for (const v of e.value) h.scalar(e.elemType, v, e.key);
    } else h.scalar(e.type, e.value, e.key);
  }
  const sizes: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    const size = tensorBytes(t.type, t.dims);
    sizes.push(size);
    h.str(t.name);
    h.u32(t.dims.length);
    for (const d of t.dims) h.u64(d);
    h.u32(t.type);
    h.u64(offset);
    offset += Math.ceil(size / align) * align;
  }
  h.push(Buffer.alloc((align - (h.length % align)) % align));
  return { bytes: h.bytes(), sizes };
}

let counter = 0;

/** Writes a GGUF v3 file atomically (see the file comment). Returns its size in bytes. */
export function writeGgufFile(file: string, entries: readonly GgufEntry[], tensors: readonly GgufTensorOut[], options: { mode?: number } = {}): number {
  const alignEntry = entries.find((e) => e.key === 'general.alignment');
  const align = alignEntry ? Number(alignEntry.value) : 32;
  const { bytes, sizes } = header(entries, tensors, align);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const temp = `${file}.tmp-${process.pid}-${++counter}`;
  const fd = fs.openSync(temp, 'w', options.mode ?? 0o600);
  let written = 0;
  const put = (b: Uint8Array) => {
    let done = 0;
    while (done < b.length) done += fs.writeSync(fd, b, done, b.length - done);
    written += b.length;
  };
  try {
    put(bytes);
    tensors.forEach((t, i) => {
      const data = t.data();
      if (data.length !== sizes[i]) throw new Error(`GGUF writer: tensor '${t.name}' (${ggmlTypeName(t.type)} [${t.dims}]) has ${data.length} bytes, expected ${sizes[i]}`);
      put(data);
      const pad = (align - (data.length % align)) % align;
      if (pad && i < tensors.length - 1) put(new Uint8Array(pad));
    });
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(temp, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  fs.renameSync(temp, file);
  return written;
}
