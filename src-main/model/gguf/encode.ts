/**
 * fp32 → the ggml encodings a GGUF of ours holds (./writer.ts; the benches' bench/gguf-writer.ts):
 * F32 as it is, F16 (IEEE binary16, round to nearest even: ../half.ts), and Q8_0 and Q4_0 as
 * ggml's reference row quantisers write them, the arithmetic in fp32 (Math.fround) where theirs
 * is, so the codes match at rounding boundaries and llama.cpp reads back the numbers meant:
 *
 *   Q8_0 (quantize_row_q8_0_ref): per block of 32, d = max|x| / 127, codes round(x / d) half
 *        away from zero, d stored as fp16.                                        34 bytes
 *   Q4_0 (quantize_row_q4_0_ref): per block of 32, d = m / −8 with m the value of largest
 *        magnitude (its sign kept), codes min(15, trunc(x / d + 8.5)), code j in the low nibble
 *        of byte j and code j + 16 in its high nibble, d stored as fp16.          18 bytes
 */
import { float32ToFp16, floatToHalf, halfToFloat } from '../half.js';

export function encodeF32(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

export function encodeF16(values: Float32Array): Uint8Array {
  return new Uint8Array(float32ToFp16(values).buffer);
}

/** Q8_0: blocks of 32 values as an fp16 scale and 32 int8 codes (34 bytes). */
export function encodeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % 32) throw new Error(`Q8_0: ${values.length} values is not a whole number of 32-value blocks`);
  const blocks = values.length / 32;
  const out = new Uint8Array(blocks * 34);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(values[b * 32 + i]!));
    const d = Math.fround(amax / 127);
    const id = d ? Math.fround(1 / d) : 0;
    view.setUint16(b * 34, floatToHalf(d), true);
    for (let i = 0; i < 32; i++) {
      const v = Math.fround(values[b * 32 + i]! * id);
      view.setInt8(b * 34 + 2 + i, Math.sign(v) * Math.round(Math.abs(v)));
    }
  }
  return out;
}

/** Q4_0: blocks of 32 values as an fp16 scale and 16 bytes of 4-bit codes (18 bytes). */
export function encodeQ4_0(values: Float32Array): Uint8Array {
  if (values.length % 32) throw new Error(`Q4_0: ${values.length} values is not a whole number of 32-value blocks`);
  const blocks = values.length / 32;
  const out = new Uint8Array(blocks * 18);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    let amax = 0, max = 0;
    for (let i = 0; i < 32; i++) {
      const v = values[b * 32 + i]!;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    view.setUint16(b * 18, floatToHalf(d), true);
    const code = (v: number) => Math.min(15, Math.trunc(Math.fround(Math.fround(v * id) + 8.5)));
    for (let i = 0; i < 16; i++) out[b * 18 + 2 + i] = code(values[b * 32 + i]!) | (code(values[b * 32 + 16 + i]!) << 4);
  }
  return out;
}

/** What a value becomes in F16 (for tests and the drift note). */
export const roundTripHalf = (v: number): number => halfToFloat(floatToHalf(v));
