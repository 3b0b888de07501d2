// A minimal GGUF v3 writer for the tests: hand-made files (metadata of every type, tensors of
// any ggml type from raw bytes), and the truncated or lying files the reader must refuse.
import fs from 'node:fs';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { UserError } from '../../src-shared/types.js';

export type MetaValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'u64' | 'i64' | 'f64'; value: number | bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; elem: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'u64' | 'i64' | 'f64' | 'bool' | 'string'; value: (number | bigint | boolean | string)[] };

const TYPE_IDS = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;

export interface TensorToWrite {
  name: string;
  /** ggml order: dims[0] is the row length. */
  dims: number[];
  type: number;
  bytes: Uint8Array;
}

class Out {
  chunks: Buffer[] = [];
  u32(v: number) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.chunks.push(b); }
  u64(v: number | bigint) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.chunks.push(b); }
  str(s: string) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.chunks.push(b); }
  scalar(type: string, v: number | bigint | boolean | string) {
    const b = Buffer.alloc(8);
    switch (type) {
      case 'u8': b.writeUInt8(Number(v)); this.chunks.push(b.subarray(0, 1)); return;
      case 'i8': b.writeInt8(Number(v)); this.chunks.push(b.subarray(0, 1)); return;
      case 'bool': b.writeUInt8(v ? 1 : 0); this.chunks.push(b.subarray(0, 1)); return;
      case 'u16': b.writeUInt16LE(Number(v)); this.chunks.push(b.subarray(0, 2)); return;
      case 'i16': b.writeInt16LE(Number(v)); this.chunks.push(b.subarray(0, 2)); return;
      case 'u32': b.writeUInt32LE(Number(v)); this.chunks.push(b.subarray(0, 4)); return;
      case 'i32': b.writeInt32LE(Number(v)); this.chunks.push(b.subarray(0, 4)); return;
      case 'f32': b.writeFloatLE(Number(v)); this.chunks.push(b.subarray(0, 4)); return;
      case 'u64': b.writeBigUInt64LE(BigInt(v as number)); this.chunks.push(b); return;
      case 'i64': b.writeBigInt64LE(BigInt(v as number)); this.chunks.push(b); return;
      case 'f64': b.writeDoubleLE(Number(v)); this.chunks.push(b); return;
      case 'string': this.str(String(v)); return;
    }
    throw new Error(`unknown type ${type}`);
  }
  get length() { return this.chunks.reduce((a, c) => a + c.length, 0); }
}

/** The bytes of a GGUF v3 file (alignment 32, or general.alignment when given as a u32). */
export function ggufBytes(metadata: Record<string, MetaValue>, tensors: TensorToWrite[] = [], version = 3): Buffer {
  const o = new Out();
  o.chunks.push(Buffer.from('GGUF', 'latin1'));
  o.u32(version);
  o.u64(tensors.length);
  o.u64(Object.keys(metadata).length);
  for (const [key, m] of Object.entries(metadata)) {
    o.str(key);
    o.u32(TYPE_IDS[m.type]);
    if (m.type === 'array') {
      o.u32(TYPE_IDS[m.elem]);
      o.u64(m.value.length);
      for (const v of m.value) o.scalar(m.elem, v);
    } else o.scalar(m.type, m.value);
  }
  const alignMeta = metadata['general.alignment'];
  const align = alignMeta && alignMeta.type === 'u32' ? Number(alignMeta.value) : 32;
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    offsets.push(offset);
    offset += Math.ceil(t.bytes.length / align) * align;
  }
  tensors.forEach((t, i) => {
    o.str(t.name);
    o.u32(t.dims.length);
    for (const d of t.dims) o.u64(d);
    o.u32(t.type);
    o.u64(offsets[i]!);
  });
  const pad = (n: number) => { const r = (align - (o.length % align)) % align; if (r || n) o.chunks.push(Buffer.alloc(r)); };
  pad(0);
  tensors.forEach((t) => {
    o.chunks.push(Buffer.from(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength));
    pad(0);
  });
  return Buffer.concat(o.chunks);
}

export function writeGguf(file: string, metadata: Record<string, MetaValue>, tensors: TensorToWrite[] = []): void {
  fs.writeFileSync(file, ggufBytes(metadata, tensors));
}

export const u32 = (value: number): MetaValue => ({ type: 'u32', value });
export const f32 = (value: number): MetaValue => ({ type: 'f32', value });
export const str = (value: string): MetaValue => ({ type: 'string', value });
export const bool = (value: boolean): MetaValue => ({ type: 'bool', value });

/** fp32 values as a ggml F32 tensor's bytes. */
export function f32Bytes(values: ArrayLike<number>): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}

/** Writes a GGUF and returns the one-line UserError opening it as a model gives (the reader's refusals). */
export function modelRefusal(file: string, metadata: Record<string, MetaValue>, tensors: TensorToWrite[] = []): string {
  writeGguf(file, metadata, tensors);
  try {
    Checkpoint.open(file);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    return err.message;
  }
  throw new Error(`expected ${file} to be refused with a UserError`);
}
