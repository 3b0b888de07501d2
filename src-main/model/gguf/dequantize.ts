/**
 * ggml tensor bytes → fp32, as ggml-quants.c's `dequantize_row_*` define each type (and
 * gguf-py's `gguf.quants` reproduces): the arithmetic is fp32, step by step in the same order
 * (`Math.fround` after each operation), so the values are the reference's to the bit.
 *
 * Supported: F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32) and Q4_K, Q5_K,
 * Q6_K (super-blocks of 256, ./dequantize-k.ts). Any other type (the IQ types, Q2_K, Q3_K,
 * TQ*, MXFP4…) is refused with a line naming it and the tensor.
 */
import { UserError } from '../../../src-shared/types.js';
import { halfToFloat } from '../half.js';
import { GGML_TYPES, ggmlTypeName, view } from './ggml-types.js';
import { dequantizeQ4K, dequantizeQ5K, dequantizeQ6K } from './dequantize-k.js';

const f = Math.fround;

type Dequantizer = (src: Uint8Array, out: Float32Array, blocks: number) => void;

/** Q8_0: fp16 d, 32 int8 q; x = q·d. */
function q8_0(src: Uint8Array, out: Float32Array, blocks: number): void {
  const v = view(src);
  for (let b = 0; b < blocks; b++) {
    const at = b * 34, y = b * 32;
    const d = halfToFloat(v.getUint16(at, true));
    for (let j = 0; j < 32; j++) out[y + j] = v.getInt8(at + 2 + j) * d;
  }
}

/** Q4_0: fp16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high 16..31); x = (q − 8)·d. */
function q4_0(src: Uint8Array, out: Float32Array, blocks: number): void {
  const v = view(src);
  for (let b = 0; b < blocks; b++) {
    const at = b * 18, y = b * 32;
    const d = halfToFloat(v.getUint16(at, true));
    for (let j = 0; j < 16; j++) {
      const q = src[at + 2 + j]!;
      out[y + j] = ((q & 0xf) - 8) * d;
      out[y + j + 16] = ((q >> 4) - 8) * d;
    }
  }
}

/** Q4_1: fp16 d, fp16 m, 16 bytes of nibbles; x = q·d + m. */
function q4_1(src: Uint8Array, out: Float32Array, blocks: number): void {
  const v = view(src);
  for (let b = 0; b < blocks; b++) {
    const at = b * 20, y = b * 32;
    const d = halfToFloat(v.getUint16(at, true)), m = halfToFloat(v.getUint16(at + 2, true));
    for (let j = 0; j < 16; j++) {
      const q = src[at + 4 + j]!;
      out[y + j] = f((q & 0xf) * d) + m;
      out[y + j + 16] = f((q >> 4) * d) + m;
    }
  }
}

/**
 * Q5_0 and Q5_1: fp16 d (and m), a uint32 of fifth bits (bit j for element j, bit j + 16 for
 * element j + 16), 16 bytes of nibbles; x = (q − 16)·d, or q·d + m.
 */
function q5(withMin: boolean): Dequantizer {
  const size = withMin ? 24 : 22;
  return (src, out, blocks) => {
    const v = view(src);
    for (let b = 0; b < blocks; b++) {
      const at = b * size, y = b * 32;
      const d = halfToFloat(v.getUint16(at, true));
      const m = withMin ? halfToFloat(v.getUint16(at + 2, true)) : 0;
      const qhAt = at + (withMin ? 4 : 2);
      const qh = v.getUint32(qhAt, true);
      for (let j = 0; j < 16; j++) {
        const q = src[qhAt + 4 + j]!;
        const x0 = (q & 0xf) | (((qh >>> j) << 4) & 0x10);
        const x1 = (q >> 4) | ((qh >>> (j + 12)) & 0x10);
        if (withMin) {
          out[y + j] = f(x0 * d) + m;
          out[y + j + 16] = f(x1 * d) + m;
        } else {
          out[y + j] = (x0 - 16) * d;
          out[y + j + 16] = (x1 - 16) * d;
        }
      }
    }
  };
}

function f16(src: Uint8Array, out: Float32Array): void {
  const v = view(src);
  for (let i = 0; i < out.length; i++) out[i] = halfToFloat(v.getUint16(2 * i, true));
}

function bf16(src: Uint8Array, out: Float32Array): void {
  const v = view(src);
  const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < out.length; i++) bits[i] = v.getUint16(2 * i, true) << 16;
}

function f32(src: Uint8Array, out: Float32Array): void {
  const v = view(src);
  for (let i = 0; i < out.length; i++) out[i] = v.getFloat32(4 * i, true);
}

function f64(src: Uint8Array, out: Float32Array): void {
  const v = view(src);
  for (let i = 0; i < out.length; i++) out[i] = v.getFloat64(8 * i, true);
}

const DEQUANTIZERS: Record<string, Dequantizer> = {
  F32: f32, F16: f16, BF16: bf16, F64: f64, Q8_0: q8_0, Q4_0: q4_0, Q4_1: q4_1, Q5_0: q5(false), Q5_1: q5(true),
  Q4_K: dequantizeQ4K, Q5_K: dequantizeQ5K, Q6_K: dequantizeQ6K,
};

/** The type names {@link dequantize} reads. */
export const DEQUANTIZABLE_TYPES: readonly string[] = Object.keys(DEQUANTIZERS);

/** Whether tensors of this ggml type can be read as numbers. */
export function canDequantize(type: number): boolean {
  return GGML_TYPES[type]?.name !== undefined && GGML_TYPES[type]!.name in DEQUANTIZERS;
}

/**
 * The `elements` values that `src` (a tensor's bytes of ggml type `type`) holds, as fp32.
 * `where` names the tensor in the error for a type that cannot be read.
 */
export function dequantize(src: Uint8Array, type: number, elements: number, where: string): Float32Array {
  const t = GGML_TYPES[type];
  const fn = t && DEQUANTIZERS[t.name];
  if (!t || !fn) {
    throw new UserError(`${where}: tensor type ${ggmlTypeName(type)} is not supported (supported: ${DEQUANTIZABLE_TYPES.join(', ')}); re-quantise the model to one of these, e.g. Q8_0 or Q4_K_M`);
  }
  const blocks = elements / t.blockSize;
  if (!Number.isInteger(blocks) || src.byteLength < blocks * t.blockBytes) {
    throw new UserError(`${where}: ${src.byteLength} bytes cannot hold ${elements} ${t.name} values`);
  }
  const out = new Float32Array(elements);
  fn(src, out, blocks);
  return out;
}
