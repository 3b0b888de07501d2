/**
 * IEEE binary16 (fp16), the one encoder and the one decoder everything uses: a checkpoint's F16
 * tensors widened (./safetensors.ts), the fp16 projections (./half-matmul.ts), GGUF's F16 and
 * the scales of its block types read (./gguf/) and written (./gguf/encode.ts, bench/gguf-quant.ts),
 * the tiny test models (tools/tiny-models.ts).
 *
 * Encoding rounds to nearest, ties to even (torch's `.half()`, numpy's, ggml's fp32→fp16):
 * overflow goes to ±inf, a value under half the smallest subnormal to ±0, subnormals are kept,
 * NaN stays NaN. Decoding is exact (every fp16 value is an fp32 value), through a table of all
 * 65536 patterns built once.
 */

/** The fp16 bits of the fp32 value whose bits are `x`, rounded to nearest even. */
function halfBits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf, NaN
  const e = exp - 127 + 15; // the exponent re-biased for fp16
  if (e >= 0x1f) return sign | 0x7c00; // too large: inf
  if (e <= 0) {
    // A subnormal (or zero): the implicit 1 joins the mantissa, shifted right by 1 − e more.
    if (e < -10) return sign; // under half the smallest subnormal
    const m = mant | 0x800000;
    const shift = 14 - e;
    const halfway = 1 << (shift - 1);
    const rest = m & ((1 << shift) - 1);
    let h = m >>> shift;
    if (rest > halfway || (rest === halfway && h & 1)) h++;
    return sign | h;
  }
  // A normal: keep 10 mantissa bits, rounding the 13 dropped ones to nearest even (a carry into
  // the exponent is right, up to inf).
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
  return sign | h;
}

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/** A number as fp16 bits (it is first rounded to fp32, as a Float32Array would store it). */
export function floatToHalf(value: number): number {
  scratch[0] = value;
  return halfBits(scratchBits[0]!);
}

/** The fp32 bits of 2^-14, fp16's smallest normal value, and of 65,520, the smallest value that rounds to inf. */
const SMALLEST_NORMAL = 0x38800000, ROUNDS_TO_INF = 0x477ff000;

/**
 * fp32 values as fp16 bits. Model weights are nearly all fp16 normals, so these take a short
 * path: re-bias the exponent (subtract 112 << 23) and round the 13 dropped bits to nearest even
 * by adding 0xfff plus the kept lowest bit before the shift (a carry into the exponent is
 * right). The rest go through {@link halfBits}. The two agree on all 2^32 fp32 patterns (checked
 * once, exhaustively). The 0.6B shape's 440 M projection weights, converted at each fp16 load:
 * 2.7 s against 5.2 s one by one through halfBits (build machine, medians of 5, 2026-11-27).
 */
export function float32ToFp16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i]!;
    const abs = x & 0x7fffffff;
    out[i] = ((abs - SMALLEST_NORMAL) >>> 0) < ROUNDS_TO_INF - SMALLEST_NORMAL
      ? ((x >>> 16) & 0x8000) | ((abs - 0x38000000 + 0xfff + ((abs >>> 13) & 1)) >>> 13)
      : halfBits(x);
  }
  return out;
}

let table: Float32Array | undefined;
/** The fp32 value of each of the 65536 fp16 patterns (256 KiB, built on first use). */
function halfTable(): Float32Array {
  if (table) return table;
  table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    table[h] = exp === 0 ? sign * 2 ** -14 * (frac / 1024) : exp === 31 ? (frac ? NaN : sign * Infinity) : sign * 2 ** (exp - 15) * (1 + frac / 1024);
  }
  return table;
}

/** fp16 bits as their value. */
export function halfToFloat(h: number): number {
  return halfTable()[h & 0xffff]!;
}

/** fp16 bits as fp32 values. */
export function fp16ToFloat32(bits: Uint16Array): Float32Array {
  const t = halfTable();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = t[bits[i]!]!;
  return out;
}
