/**
 * Safetensors reading and writing.
 *
 * The format is an 8-byte little-endian header length, a JSON header
 * `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__? }`, then the raw
 * little-endian bytes. It is small enough that a hand-written reader is clearer than a
 * dependency (npm's safetensors packages either pull native code or read whole files).
 *
 * The reader never loads a whole file: tensors are read by byte range on demand, so a
 * multi-GB checkpoint streams into the graph one tensor at a time.
 *
 * Conversion policy: weights are computed in fp32. bf16 and fp16 are widened to fp32 here
 * ({@link toFloat32}), once, at load time; ONNX Runtime's CPU MatMul has no bf16 kernel
 * anyway, and a Cast in the graph would materialise the same fp32 copy at session start.
 */
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import { writeAllSync } from '../store/atomic-file.js';
import { fp16ToFloat32 } from './half.js';
import { openRegularFile } from './regular-file.js';

export type SafetensorsDType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

export interface TensorEntry {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  file: string;
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

const DTYPE_BYTES: Record<SafetensorsDType, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

/** Reads the header of one safetensors file: its tensors with absolute byte ranges. */
export function readSafetensorsHeader(file: string): { tensors: TensorEntry[]; metadata: Record<string, string> } {
  const { fd, size } = openRegularFile(file); // a folder or a named pipe in its place: one line
  try {
    const lenBuf = Buffer.alloc(8);
    if (size < 8 || fs.readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new UserError(`${file}: not a safetensors file (too short)`);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen <= 0 || 8 + headerLen > size || headerLen > 100 * 1024 * 1024) {
      throw new UserError(`${file}: not a safetensors file (header length ${headerLen} does not fit a file of ${size} bytes)`);
    }
    const headerBuf = Buffer.alloc(headerLen);
    fs.readSync(fd, headerBuf, 0, headerLen, 8);
    let header: unknown;
    try {
      header = JSON.parse(headerBuf.toString('utf8'));
    } catch {
      throw new UserError(`${file}: not a safetensors file (header is not JSON)`);
    }
    if (!isRecord(header)) throw new UserError(`${file}: not a safetensors file (the header is ${JSON.stringify(header)?.slice(0, 40)}, not an object)`);
    const dataStart = 8 + headerLen;
    const tensors: TensorEntry[] = [];
    for (const [name, raw] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const e: Record<string, unknown> = isRecord(raw) ? raw : {};
      if (typeof e.dtype !== 'string' || !Object.hasOwn(DTYPE_BYTES, e.dtype)) throw new UserError(`${file}: tensor '${name}' has unsupported dtype ${JSON.stringify(e.dtype)}`);
      const dtype = e.dtype as SafetensorsDType;
      const shape = e.shape ?? [];
      const offsets = e.data_offsets;
      const count = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
      if (!Array.isArray(shape) || !shape.every(count) || !Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(count)) {
        throw new UserError(`${file}: tensor '${name}' needs a shape of whole numbers ≥ 0 and data_offsets [begin, end] (found shape ${JSON.stringify(shape)}, data_offsets ${JSON.stringify(offsets)})`);
      }
      const [b, en] = offsets as [number, number];
      const expected = (shape as number[]).reduce((a, d) => a * d, 1) * DTYPE_BYTES[dtype];
      if (en < b || en - b !== expected || dataStart + en > size) {
        throw new UserError(`${file}: tensor '${name}' byte range [${b}, ${en}) does not match its shape [${shape}] ${dtype} or the file size`);
      }
      tensors.push({ name, dtype, shape: shape as number[], file, begin: dataStart + b, end: dataStart + en });
    }
    return { tensors, metadata: isRecord(header.__metadata__) ? (header.__metadata__ as Record<string, string>) : {} };
  } finally {
    fs.closeSync(fd);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The raw bytes of one tensor. */
export function readTensorBytes(entry: TensorEntry): Uint8Array {
  const len = entry.end - entry.begin;
  // Own ArrayBuffer, 8-byte aligned, so typed-array views of any width are valid.
  const bytes = new Uint8Array(new ArrayBuffer(Math.ceil(len / 8) * 8), 0, len);
  const fd = fs.openSync(entry.file, 'r');
  try {
    let done = 0;
    while (done < len) {
      const n = fs.readSync(fd, bytes, done, Math.min(len - done, 1 << 30), entry.begin + done);
      if (n <= 0) throw new UserError(`${entry.file}: tensor '${entry.name}' is truncated`);
      done += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  return bytes;
}

/** Widens a floating tensor's bytes to fp32. */
export function toFloat32(bytes: Uint8Array, dtype: SafetensorsDType, where: string): Float32Array {
  switch (dtype) {
    case 'F32':
      return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    case 'F64':
      return Float32Array.from(new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8));
    case 'BF16': {
      // bf16 is the top half of an fp32: shift the bits into place.
      const src = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      const out = new Uint32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = src[i]! << 16;
      return new Float32Array(out.buffer);
    }
    case 'F16':
      return fp16ToFloat32(new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2));
    default:
      throw new UserError(`${where}: expected a floating-point tensor, found ${dtype}`);
  }
}

/** fp32 → bf16 bits with round-to-nearest-even (what torch does). */
export function float32ToBf16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i]!;
    if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) { out[i] = (b >>> 16) | 0x40; continue; } // NaN stays NaN
    out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}

export interface TensorToWrite {
  dtype: SafetensorsDType;
  shape: number[];
  data: Float32Array | Uint16Array | BigInt64Array | Int32Array | Uint8Array | Int8Array | Float64Array;
}

/**
 * Writes a safetensors file. Tensors are laid out in the order given, header padded to a
 * multiple of 8 bytes with spaces (as the reference implementation does). A new file is created
 * with `mode` (before the umask).
 */
export function writeSafetensors(file: string, tensors: Record<string, TensorToWrite>, metadata?: Record<string, string>, mode = 0o666): void {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  const chunks: Uint8Array[] = [];
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const expected = t.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[t.dtype];
    if (bytes.byteLength !== expected) throw new Error(`writeSafetensors: '${name}' has ${bytes.byteLength} bytes, shape [${t.shape}] ${t.dtype} needs ${expected}`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.byteLength] };
    chunks.push(bytes);
    offset += bytes.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const fd = fs.openSync(file, 'w', mode);
  try {
    writeAllSync(fd, len);
    writeAllSync(fd, Buffer.from(json, 'utf8'));
    for (const c of chunks) writeAllSync(fd, c);
  } finally {
    fs.closeSync(fd);
  }
}
