/**
 * GGUF weights whose blocks are exactly MatMulNBits' (../quantize.ts): under `--quantize`, a
 * projection or head stored as Q8_0 or Q4_0 runs on its own blocks instead of being expanded
 * to fp32 and quantised again (a second rounding, and a transient fp32 copy).
 *
 *   Q8_0 (fp16 d, int8 q × 32)   → 8 bits, blocks of 32: code q + 128, zero point 128, scale d
 *   Q4_0 (fp16 d, nibbles × 32)  → 4 bits, blocks of 32: code the nibble, zero point 8, scale d
 *
 * (code − zero) · scale is then q · d exactly, the value ggml's dequantisation gives. ggml puts
 * element j in the low nibble of byte j and element j + 16 in its high nibble; MatMulNBits packs
 * consecutive elements low nibble first, so Q4_0's nibbles are repacked (losslessly). Llama's
 * attn_q/attn_k rows are put back in Hugging Face's order as ./model.ts does for fp32.
 * Other types (Q4_1's and the k-quants' offsets are no integer zero point) are re-quantised.
 */
import type { QuantizedWeight, QuantScheme } from '../quantize.js';
import { halfToFloat } from '../half.js';
import { readGgufTensorBytes } from './reader.js';
import type { GgufModel, GgufTensor } from './model.js';

const Q4_0 = 2, Q8_0 = 8;

export interface NativeBlocks {
  scheme: QuantScheme;
  read(): QuantizedWeight;
}

/** The tensor's own blocks for MatMulNBits, or undefined when its type has no exact mapping. */
export function ggufNativeBlocks(model: GgufModel, name: string, n: number, k: number, accuracyLevel: 0 | 4): NativeBlocks | undefined {
  const t = model.tensors.get(name);
  if (!t || (t.info.type !== Q8_0 && t.info.type !== Q4_0) || t.shape.length !== 2 || t.shape[0] !== n || t.shape[1] !== k) return undefined;
  const bits = t.info.type === Q8_0 ? 8 : 4;
  return { scheme: { bits, blockSize: 32, accuracyLevel }, read: () => toMatMulNBits(readGgufTensorBytes(t.info), t, n, k) };
}

/** Q8_0 / Q4_0 bytes of an [n, k] tensor as MatMulNBits' codes, scales and zero points. */
export function toMatMulNBits(src: Uint8Array, t: Pick<GgufTensor, 'info' | 'permuteHeads'>, n: number, k: number): QuantizedWeight {
  const eight = t.info.type === Q8_0;
  const kBlocks = k / 32, blockBytes = eight ? 34 : 18, blob = eight ? 32 : 16;
  const zpRowBytes = eight ? kBlocks : Math.ceil(kBlocks / 2);
  const codes = new Uint8Array(n * kBlocks * blob);
  const scales = new Float32Array(n * kBlocks);
  const zeros = new Uint8Array(n * zpRowBytes).fill(eight ? 128 : 0x88);
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const hd = t.permuteHeads ? n / t.permuteHeads : 0, half = hd / 2;
  for (let row = 0; row < n; row++) {
    // Hugging Face row h·hd + t·hd/2 + i is ggml's row h·hd + 2i + t.
    const within = hd ? row % hd : 0;
    const from = hd ? row - within + 2 * (within % half) + Math.floor(within / half) : row;
    for (let blk = 0; blk < kBlocks; blk++) {
      const at = (from * kBlocks + blk) * blockBytes;
      const out = (row * kBlocks + blk) * blob;
      scales[row * kBlocks + blk] = halfToFloat(view.getUint16(at, true));
      if (eight) {
        for (let j = 0; j < 32; j++) codes[out + j] = src[at + 2 + j]! ^ 0x80; // int8 q → q + 128
      } else {
        const nibble = (j: number) => (j < 16 ? src[at + 2 + j]! & 0xf : src[at + 2 + j - 16]! >> 4);
        for (let i = 0; i < 16; i++) codes[out + i] = nibble(2 * i) | (nibble(2 * i + 1) << 4);
      }
    }
  }
  return {
    codes: { dtype: 'uint8', dims: [n, kBlocks, blob], data: codes },
    scales: { dtype: 'float32', dims: [n, kBlocks], data: scales },
    zeroPoints: { dtype: 'uint8', dims: [n * zpRowBytes], data: zeros },
  };
}
