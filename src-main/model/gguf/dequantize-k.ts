/**
 * The k-quants (super-blocks of 256 values), as ggml-quants.c's `dequantize_row_q4_K`, `_q5_K`
 * and `_q6_K` define them; fp32 arithmetic in the reference's order (see ./dequantize.ts).
 *
 *   Q4_K (144 bytes): fp16 d, fp16 dmin, 12 bytes of eight 6-bit scales and eight 6-bit mins,
 *        128 bytes of nibbles. Each 64 values: the low nibbles of 32 bytes are the first 32
 *        (scale/min 2i), the high nibbles the next 32 (scale/min 2i + 1); x = d·sc·q − dmin·m.
 *   Q5_K (176 bytes): as Q4_K with 32 bytes of fifth bits before the nibbles: bit 2i of byte l
 *        lifts value l of the low half of the i-th 64, bit 2i + 1 the high half.
 *   Q6_K (210 bytes): 128 bytes of low nibbles, 64 of 2-bit high parts, 16 int8 scales, fp16
 *        d (last). x = d·sc·(q − 32), sixteen values to a scale.
 */
import { halfToFloat } from '../half.js';
import { view } from './ggml-types.js';

const f = Math.fround;

/** ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j from the 12 packed bytes at `at`. */
function scaleMin(src: Uint8Array, at: number, j: number): [number, number] {
  if (j < 4) return [src[at + j]! & 63, src[at + j + 4]! & 63];
  return [(src[at + j + 4]! & 0xf) | ((src[at + j - 4]! >> 6) << 4), (src[at + j + 4]! >> 4) | ((src[at + j]! >> 6) << 4)];
}

function q45K(src: Uint8Array, out: Float32Array, blocks: number, five: boolean): void {
  const v = view(src);
  const size = five ? 176 : 144;
  for (let b = 0; b < blocks; b++) {
    const at = b * size;
    let y = b * 256;
    const d = halfToFloat(v.getUint16(at, true)), dmin = halfToFloat(v.getUint16(at + 2, true));
    const scales = at + 4;
    const qh = at + 16;
    let ql = five ? at + 48 : at + 16;
    for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
      const [sc1, m1b] = scaleMin(src, scales, is);
      const [sc2, m2b] = scaleMin(src, scales, is + 1);
      const d1 = f(d * sc1), m1 = f(dmin * m1b), d2 = f(d * sc2), m2 = f(dmin * m2b);
      const u1 = 1 << is, u2 = 2 << is;
      for (let l = 0; l < 32; l++) out[y++] = f(d1 * ((src[ql + l]! & 0xf) + (five && src[qh + l]! & u1 ? 16 : 0))) - m1;
      for (let l = 0; l < 32; l++) out[y++] = f(d2 * ((src[ql + l]! >> 4) + (five && src[qh + l]! & u2 ? 16 : 0))) - m2;
      ql += 32;
    }
  }
}

export function dequantizeQ4K(src: Uint8Array, out: Float32Array, blocks: number): void {
  q45K(src, out, blocks, false);
}

export function dequantizeQ5K(src: Uint8Array, out: Float32Array, blocks: number): void {
  q45K(src, out, blocks, true);
}

export function dequantizeQ6K(src: Uint8Array, out: Float32Array, blocks: number): void {
  const v = view(src);
  for (let b = 0; b < blocks; b++) {
    const at = b * 210;
    const d = halfToFloat(v.getUint16(at + 208, true));
    for (let n = 0; n < 2; n++) {
      const ql = at + n * 64, qh = at + 128 + n * 32, sc = at + 192 + n * 8, y = b * 256 + n * 128;
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = src[qh + l]!;
        const q1 = ((src[ql + l]! & 0xf) | ((h & 3) << 4)) - 32;
        const q2 = ((src[ql + l + 32]! & 0xf) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((src[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((src[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
        out[y + l] = f(d * v.getInt8(sc + is)) * q1;
        out[y + l + 32] = f(d * v.getInt8(sc + is + 2)) * q2;
        out[y + l + 64] = f(d * v.getInt8(sc + is + 4)) * q3;
        out[y + l + 96] = f(d * v.getInt8(sc + is + 6)) * q4;
      }
    }
  }
}
