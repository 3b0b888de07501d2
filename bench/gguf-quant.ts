/**
 * The element encodings a GGUF file of ours can hold (bench/gguf-writer.ts): f32 as it is,
 * IEEE half floats, and llama.cpp's two simplest block quantisations, written the way
 * ggml's reference row quantisers write them so llama.cpp reads the same numbers back.
 *
 *   q8_0  blocks of 32 values: an f16 scale d = max|x| / 127, then 32 int8 codes
 *         round(x / d) (half away from zero).                                  34 bytes
 *   q4_0  blocks of 32 values: an f16 scale d = m / −8, where m is the value of largest
 *         magnitude (its sign kept), then 16 bytes: code j in the low nibble of byte j and
 *         code j + 16 in its high nibble, each min(15, floor(x / d + 8.5)).  18 bytes
 *
 * A value comes back as d · code (q8_0) or d · (code − 8) (q4_0). The arithmetic runs in
 * float32 (Math.fround) where ggml's does, so the codes match its at rounding boundaries.
 */

import { floatToHalf, halfToFloat } from '../src-main/model/half.js';

export type GgmlType = 'f32' | 'f16' | 'q8_0' | 'q4_0';

/** ggml_type ids as GGUF stores them. */
export const GGML_TYPE_ID: Record<GgmlType, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 8 };

export const QK = 32;

/** Bytes per block of QK values (f32 and f16: per QK values too, so sizes are uniform). */
const BLOCK_BYTES: Record<GgmlType, number> = { f32: 4 * QK, f16: 2 * QK, q8_0: 2 + QK, q4_0: 2 + QK / 2 };

/** Bytes a row-major tensor of `count` values takes in `type` (count a multiple of 32 for the block types). */
export function encodedBytes(type: GgmlType, count: number): number {
  if ((type === 'q8_0' || type === 'q4_0') && count % QK !== 0) throw new Error(`${type}: ${count} values is not a whole number of ${QK}-value blocks`);
  return (count / QK) * BLOCK_BYTES[type];
}

/** C's roundf: halves away from zero (Math.round sends −2.5 to −2). */
const roundAway = (v: number) => (v < 0 ? -Math.round(-v) : Math.round(v));

/** Encodes `values` (a multiple of 32 for block types) as `type`, into a new buffer. */
export function encode(type: GgmlType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(encodedBytes(type, values.length));
  const view = new DataView(out.buffer);
  if (type === 'f32') {
    out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  } else if (type === 'f16') {
    for (let i = 0; i < values.length; i++) view.setUint16(2 * i, floatToHalf(values[i]!), true);
  } else if (type === 'q8_0') {
    for (let b = 0; b < values.length / QK; b++) encodeQ8Block(values, b * QK, view, b * BLOCK_BYTES.q8_0);
  } else {
    for (let b = 0; b < values.length / QK; b++) encodeQ4Block(values, b * QK, view, b * BLOCK_BYTES.q4_0);
  }
  return out;
}

function encodeQ8Block(x: Float32Array, from: number, out: DataView, at: number): void {
  let amax = 0;
  for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(x[from + j]!));
  const d = Math.fround(amax / 127);
  const id = d ? Math.fround(1 / d) : 0;
  out.setUint16(at, floatToHalf(d), true);
  for (let j = 0; j < QK; j++) out.setInt8(at + 2 + j, roundAway(Math.fround(x[from + j]! * id)));
}

function encodeQ4Block(x: Float32Array, from: number, out: DataView, at: number): void {
  let amax = 0, max = 0;
  for (let j = 0; j < QK; j++) {
    const v = x[from + j]!;
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  const d = Math.fround(max / -8);
  const id = d ? Math.fround(1 / d) : 0;
  out.setUint16(at, floatToHalf(d), true);
  const code = (v: number) => Math.min(15, Math.trunc(Math.fround(Math.fround(v * id) + 8.5)));
  for (let j = 0; j < QK / 2; j++) out.setUint8(at + 2 + j, code(x[from + j]!) | (code(x[from + QK / 2 + j]!) << 4));
}

/** The values `bytes` (encoded as `type`) stand for: what llama.cpp computes with. */
export function decode(type: GgmlType, bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type === 'f32') return new Float32Array(Uint8Array.from(bytes).buffer); // a copy: `bytes` may be an unaligned view
  if (type === 'f16') return Float32Array.from({ length: bytes.length / 2 }, (_, i) => halfToFloat(view.getUint16(2 * i, true)));
  const blockBytes = BLOCK_BYTES[type];
  const out = new Float32Array((bytes.length / blockBytes) * QK);
  for (let b = 0; b < bytes.length / blockBytes; b++) {
    const at = b * blockBytes;
    const d = halfToFloat(view.getUint16(at, true));
    for (let j = 0; j < QK; j++) {
      out[b * QK + j] = type === 'q8_0'
        ? d * view.getInt8(at + 2 + j)
        : d * (((view.getUint8(at + 2 + (j % (QK / 2))) >> (j < QK / 2 ? 0 : 4)) & 0xf) - 8);
    }
  }
  return out;
}
