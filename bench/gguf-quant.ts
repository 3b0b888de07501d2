/**
 * The element encodings a GGUF file of the benches holds (bench/gguf-writer.ts): f32 as it is,
 * IEEE half floats, and llama.cpp's two simplest block quantisations, q8_0 and q4_0. The
 * encoders are the app's own (src-main/model/gguf/encode.ts, which describes each layout as
 * ggml's reference row quantisers write it), and the values come back through the app's
 * dequantiser, so the benches hand llama.cpp exactly what Hindsight writes and reads.
 */

import { encodeF16, encodeF32, encodeQ4_0, encodeQ8_0 } from '../src-main/model/gguf/encode.js';
import { dequantize } from '../src-main/model/gguf/dequantize.js';
import { GGML_TYPES } from '../src-main/model/gguf/ggml-types.js';

export type GgmlType = 'f32' | 'f16' | 'q8_0' | 'q4_0';

/** ggml_type ids as GGUF stores them. */
export const GGML_TYPE_ID: Record<GgmlType, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 8 };

const ENCODERS: Record<GgmlType, (values: Float32Array) => Uint8Array> = { f32: encodeF32, f16: encodeF16, q8_0: encodeQ8_0, q4_0: encodeQ4_0 };

/** Bytes a row-major tensor of `count` values takes in `type` (count a multiple of 32 for the block types). */
export function encodedBytes(type: GgmlType, count: number): number {
  const { blockSize, blockBytes } = GGML_TYPES[GGML_TYPE_ID[type]]!;
  if (count % blockSize !== 0) throw new Error(`${type}: ${count} values is not a whole number of ${blockSize}-value blocks`);
  return (count / blockSize) * blockBytes;
}

/** Encodes `values` (a multiple of 32 for block types) as `type`; f32 is a view of `values`, the others new buffers. */
export function encode(type: GgmlType, values: Float32Array): Uint8Array {
  return ENCODERS[type](values);
}

/** The values `bytes` (encoded as `type`) stand for: what llama.cpp computes with. */
export function decode(type: GgmlType, bytes: Uint8Array): Float32Array {
  const id = GGML_TYPE_ID[type], { blockSize, blockBytes } = GGML_TYPES[id]!;
  return dequantize(bytes, id, (bytes.length / blockBytes) * blockSize, type);
}
