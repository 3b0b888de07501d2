/**
 * Weight-only quantisation of the decoder's linear layers for inference (docs/design.md
 * §Quantisation). Each projection weight W [out = N, in = K] (Hugging Face layout) is cut
 * into blocks of `blockSize` along K; each block gets one fp32 scale and one zero point, and
 * its values become unsigned `bits`-bit codes q with W ≈ (q − zero) · scale. The result is
 * laid out for ONNX Runtime's contrib op com.microsoft.MatMulNBits, which computes
 * Y = A · dequant(B)ᵀ without ever materialising the fp32 weight:
 *
 *   B            uint8 [N, kBlocks, blockSize · bits / 8]   codes packed low bits first
 *   scales       float [N, kBlocks]
 *   zero_points  uint8 [N · ceil(kBlocks · bits / 8)]       packed the same way, row by row
 *
 * Asymmetric (min/max) blocks: a zero point costs bits/blockSize extra bits per weight and
 * keeps a block whose values lean one way from wasting half its codes, which matters at 4 bits.
 * Training never sees these weights: it stays fp32.
 */
import type { Tensor } from '../graph/ir.js';
import { QUANTIZE_CHOICES, type Quantize } from '../../src-shared/training.js';

// The choices are training's vocabulary too (train --quantize, the Training page): defined once, in src-shared.
export { QUANTIZE_CHOICES, type Quantize };

export interface QuantScheme {
  bits: 4 | 8;
  /** Weights per block along K (a power of two ≥ 16, as the op requires). */
  blockSize: number;
  /**
   * MatMulNBits' accuracy_level: 4 lets the CPU kernel quantise the activations to int8
   * per block and use integer dot products (faster, a little less exact); 0 keeps them fp32.
   */
  accuracyLevel: 0 | 4;
}

/**
 * Weights per block under --quantize. 128, the group size GPTQ and AWQ checkpoints usually
 * carry: at real shapes decode reads fewer bytes per weight than with blocks of 32 (4.3 bits
 * per int4 weight instead of 5.1) and ONNX Runtime's kernel runs faster on them, for a little
 * more drift (docs/design.md §Quantisation has both measured). Changing it changes the cached
 * weights: raise GRAPH_CACHE_FORMAT (./graph-fingerprint.ts) with it.
 */
export const QUANT_BLOCK_SIZE = 128;

/** The scheme each --quantize choice uses (measured in bench/generate.ts). */
export function quantScheme(q: Quantize): QuantScheme | undefined {
  if (q === 'int8') return { bits: 8, blockSize: QUANT_BLOCK_SIZE, accuracyLevel: 4 };
  if (q === 'int4') return { bits: 4, blockSize: QUANT_BLOCK_SIZE, accuracyLevel: 4 };
  return undefined;
}

/**
 * The LM head's scheme under int8 and int4 alike. At real vocabularies the head is the largest
 * matrix (151,936 × 1,536 for Qwen2.5-1.5B): left fp32 it is read in full for every token and
 * cost more than all the int4 layers together; at int8 it costs a quarter of that. It stays at
 * 8 bits under int4 because its error lands directly on every logit (docs/design.md §Quantisation).
 */
export const HEAD_SCHEME: QuantScheme = { bits: 8, blockSize: QUANT_BLOCK_SIZE, accuracyLevel: 4 };

export function parseQuantize(value: string | undefined, where = '--quantize'): Quantize {
  const v = (value ?? 'none') as Quantize;
  if (!QUANTIZE_CHOICES.includes(v)) throw new Error(`${where} must be one of ${QUANTIZE_CHOICES.join(', ')}, got '${value}'`);
  return v;
}

export interface QuantizedWeight {
  /** The op's B input. */
  codes: Tensor;
  scales: Tensor;
  zeroPoints: Tensor;
}

/** The dims of the op's B, scales and zero_points inputs for an [n, k] weight. */
export function quantizedDims(n: number, k: number, scheme: QuantScheme): { codes: number[]; scales: number[]; zeroPoints: number[] } {
  const kBlocks = Math.ceil(k / scheme.blockSize);
  return {
    codes: [n, kBlocks, (scheme.blockSize * scheme.bits) / 8],
    scales: [n, kBlocks],
    zeroPoints: [n * Math.ceil((kBlocks * scheme.bits) / 8)],
  };
}

/**
 * Quantises `weight` ([n, k] row-major, the Hugging Face layout) blockwise along k.
 * A last partial block is padded with zeros (the op pads A's K the same way).
 */
export function quantizeBlockwise(weight: Float32Array, n: number, k: number, scheme: QuantScheme): QuantizedWeight {
  const { bits, blockSize } = scheme;
  if (weight.length !== n * k) throw new Error(`quantize: expected ${n}×${k} weights, got ${weight.length}`);
  const kBlocks = Math.ceil(k / blockSize);
  const blob = (blockSize * bits) / 8;
  const maxCode = (1 << bits) - 1;
  const zpRowBytes = Math.ceil((kBlocks * bits) / 8);
  const codes = new Uint8Array(n * kBlocks * blob);
  const scales = new Float32Array(n * kBlocks);
  const zeros = new Uint8Array(n * zpRowBytes);
  for (let row = 0; row < n; row++) {
    for (let blk = 0; blk < kBlocks; blk++) {
      const from = row * k + blk * blockSize;
      const len = Math.min(blockSize, k - blk * blockSize);
      // The range always holds 0, so padding and exact zeros stay exact.
      let lo = 0, hi = 0;
      for (let i = 0; i < len; i++) {
        const w = weight[from + i]!;
        if (w < lo) lo = w;
        if (w > hi) hi = w;
      }
      const scale = hi > lo ? (hi - lo) / maxCode : 1;
      const zero = Math.min(maxCode, Math.max(0, Math.round(-lo / scale)));
      scales[row * kBlocks + blk] = scale;
      packInto(zeros, row * zpRowBytes * 8 + blk * bits, zero, bits);
      const base = (row * kBlocks + blk) * blob * 8;
      for (let i = 0; i < blockSize; i++) {
        const w = i < len ? weight[from + i]! : 0;
        const q = Math.min(maxCode, Math.max(0, Math.round(w / scale) + zero));
        packInto(codes, base + i * bits, q, bits);
      }
    }
  }
  const dims = quantizedDims(n, k, scheme);
  return {
    codes: { dtype: 'uint8', dims: dims.codes, data: codes },
    scales: { dtype: 'float32', dims: dims.scales, data: scales },
    zeroPoints: { dtype: 'uint8', dims: dims.zeroPoints, data: zeros },
  };
}

/** Writes `value` (`bits` wide, 4 or 8) at bit offset `bitPos`, low bits first. */
function packInto(bytes: Uint8Array, bitPos: number, value: number, bits: number): void {
  const byte = bitPos >> 3;
  if (bits === 8) bytes[byte] = value;
  else bytes[byte]! |= (value & 0xf) << (bitPos & 7);
}

/** The fp32 weights the codes stand for ([n, k]): what the op computes with; for tests. */
export function dequantize(q: QuantizedWeight, n: number, k: number, scheme: QuantScheme): Float32Array {
  const { bits, blockSize } = scheme;
  const kBlocks = Math.ceil(k / blockSize);
  const blob = (blockSize * bits) / 8;
  const zpRowBytes = Math.ceil((kBlocks * bits) / 8);
  const codes = q.codes.data as Uint8Array, scales = q.scales.data as Float32Array, zeros = q.zeroPoints.data as Uint8Array;
  const out = new Float32Array(n * k);
  for (let row = 0; row < n; row++) {
    for (let col = 0; col < k; col++) {
      const blk = Math.floor(col / blockSize);
      const zero = unpack(zeros, row * zpRowBytes * 8 + blk * bits, bits);
      const code = unpack(codes, (row * kBlocks + blk) * blob * 8 + (col % blockSize) * bits, bits);
      out[row * k + col] = (code - zero) * scales[row * kBlocks + blk]!;
    }
  }
  return out;
}

function unpack(bytes: Uint8Array, bitPos: number, bits: number): number {
  const v = bytes[bitPos >> 3]!;
  return bits === 8 ? v : (v >> (bitPos & 7)) & 0xf;
}
