// Dequantisation of each ggml type against hand-made blocks: every block is packed here from
// chosen values by the layout ggml-quants.c documents, and each expected element is worked out
// from the layout's formula per element (not by running the same loops as the code under test).
import { describe, expect, it } from 'vitest';
import { dequantize } from '../../src-main/model/gguf/dequantize.js';
import { UserError } from '../../src-shared/types.js';

const f = Math.fround;
const F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30;
// fp16 bits of exact values
const HALF = { 0.5: 0x3800, '-1': 0xbc00, 0.25: 0x3400, 0.125: 0x3000, 2: 0x4000 } as const;

function le16(v: number): number[] {
  return [v & 0xff, v >> 8];
}

function expectExact(got: Float32Array, expected: number[]): void {
  expect(got.length).toBe(expected.length);
  expect([...got]).toEqual(expected.map(f));
}

describe('plain types', () => {
  it('F32, F16 and BF16', () => {
    expectExact(dequantize(new Uint8Array(new Float32Array([1.5, -2, 1e-30]).buffer), F32, 3, 't'), [1.5, -2, 1e-30]);
    // fp16: 1.0, −2.0, the smallest subnormal 2^−24, 65504, +inf
    expectExact(dequantize(new Uint8Array([...le16(0x3c00), ...le16(0xc000), ...le16(0x0001), ...le16(0x7bff), ...le16(0x7c00)]), F16, 5, 't'), [1, -2, 2 ** -24, 65504, Infinity]);
    // bf16: the top half of the fp32 bits: 1.0 is 0x3f80, −0.5 is 0xbf00
    expectExact(dequantize(new Uint8Array([...le16(0x3f80), ...le16(0xbf00)]), BF16, 2, 't'), [1, -0.5]);
  });
});

describe('blocks of 32', () => {
  it('Q8_0: fp16 d, 32 int8 q; x = q·d', () => {
    const q = Array.from({ length: 32 }, (_, j) => j * 8 - 128); // −128 … 120
    const block = [...le16(HALF[0.5]), ...q.map((v) => v & 0xff)];
    expectExact(dequantize(new Uint8Array([...block, ...block]), Q8_0, 64, 't'), [...q, ...q].map((v) => v * 0.5));
  });

  // Nibble j of the low half is element j, of the high half element j + 16.
  const lo = (j: number) => j & 15;
  const hi = (j: number) => 15 - j;
  const nibbles = Array.from({ length: 16 }, (_, j) => lo(j) | (hi(j) << 4));
  const elementNibble = (i: number) => (i < 16 ? lo(i) : hi(i - 16));

  it('Q4_0: fp16 d, 16 bytes of nibbles; x = (q − 8)·d', () => {
    const got = dequantize(new Uint8Array([...le16(HALF[0.5]), ...nibbles]), Q4_0, 32, 't');
    expectExact(got, Array.from({ length: 32 }, (_, i) => (elementNibble(i) - 8) * 0.5));
  });

  it('Q4_1: fp16 d, fp16 m, nibbles; x = q·d + m', () => {
    const got = dequantize(new Uint8Array([...le16(HALF[0.5]), ...le16(HALF['-1']), ...nibbles]), Q4_1, 32, 't');
    expectExact(got, Array.from({ length: 32 }, (_, i) => elementNibble(i) * 0.5 - 1));
  });

  // Bit i of the uint32 qh is element i's fifth bit.
  const qh = 0xa5c3f00f;
  const fifth = (i: number) => (qh >>> i) & 1;
  const qhBytes = [qh & 0xff, (qh >>> 8) & 0xff, (qh >>> 16) & 0xff, qh >>> 24];

  it('Q5_0: fp16 d, uint32 of fifth bits, nibbles; x = (q − 16)·d', () => {
    const got = dequantize(new Uint8Array([...le16(HALF[0.25]), ...qhBytes, ...nibbles]), Q5_0, 32, 't');
    expectExact(got, Array.from({ length: 32 }, (_, i) => ((elementNibble(i) | (fifth(i) << 4)) - 16) * 0.25));
  });

  it('Q5_1: fp16 d, fp16 m, fifth bits, nibbles; x = q·d + m', () => {
    const got = dequantize(new Uint8Array([...le16(HALF[0.25]), ...le16(HALF['-1']), ...qhBytes, ...nibbles]), Q5_1, 32, 't');
    expectExact(got, Array.from({ length: 32 }, (_, i) => (elementNibble(i) | (fifth(i) << 4)) * 0.25 - 1));
  });
});

/** Eight 6-bit scales and mins into ggml's 12 bytes (the layout get_scale_min_k4 reads). */
function packScales(sc: number[], m: number[]): number[] {
  const out = new Array(12).fill(0);
  for (let j = 0; j < 4; j++) {
    out[j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
    out[j + 4] = m[j]! | ((m[j + 4]! >> 4) << 6);
    out[j + 8] = (sc[j + 4]! & 15) | ((m[j + 4]! & 15) << 4);
  }
  return out;
}

describe('k-quants (256 values)', () => {
  const sc = [1, 63, 17, 32, 5, 48, 33, 62];
  const mins = [0, 7, 63, 40, 18, 1, 50, 31];
  const qs = Array.from({ length: 128 }, (_, k) => (k * 37 + 11) & 0xff);
  const qh = Array.from({ length: 32 }, (_, l) => (l * 73 + 5) & 0xff);
  // Element i: 64-group g, sub-block s = 2g (first 32) or 2g + 1 (next 32), byte qs[32g + l].
  const where = (i: number) => {
    const g = i >> 6, s = 2 * g + ((i & 63) >> 5), l = i & 31;
    const byte = qs[32 * g + l]!;
    return { s, l, q: (i & 63) < 32 ? byte & 15 : byte >> 4 };
  };
  const d = 0.5, dmin = 0.125;

  it('Q4_K: x = d·sc·q − dmin·m', () => {
    const block = [...le16(HALF[0.5]), ...le16(HALF[0.125]), ...packScales(sc, mins), ...qs];
    const expected = Array.from({ length: 256 }, (_, i) => {
      const { s, q } = where(i);
      return f(f(d * sc[s]!) * q) - f(dmin * mins[s]!);
    });
    expectExact(dequantize(new Uint8Array(block), Q4_K, 256, 't'), expected);
  });

  it('Q5_K: the fifth bit of element i is bit s of qh[l]', () => {
    const block = [...le16(HALF[0.5]), ...le16(HALF[0.125]), ...packScales(sc, mins), ...qh, ...qs];
    const expected = Array.from({ length: 256 }, (_, i) => {
      const { s, l, q } = where(i);
      return f(f(d * sc[s]!) * (q + ((qh[l]! >> s) & 1) * 16)) - f(dmin * mins[s]!);
    });
    expectExact(dequantize(new Uint8Array(block), Q5_K, 256, 't'), expected);
  });

  it('Q6_K: ql, qh, int8 scales, fp16 d last; x = d·sc·(q − 32)', () => {
    const ql = Array.from({ length: 128 }, (_, k) => (k * 29 + 3) & 0xff);
    const qh6 = Array.from({ length: 64 }, (_, k) => (k * 101 + 7) & 0xff);
    const scales = Array.from({ length: 16 }, (_, k) => k * 9 - 70); // int8, negative ones too
    const block = [...ql, ...qh6, ...scales.map((v) => v & 0xff), ...le16(HALF[2])];
    // Element i: half n, quarter c (of 32) in it, l; low nibble of ql[64n + l + 32(c & 1)] for
    // c < 2, else the high one; bits 2c, 2c + 1 of qh[32n + l]; scale 8n + l/16 + 2c.
    const expected = Array.from({ length: 256 }, (_, i) => {
      const n = i >> 7, c = (i & 127) >> 5, l = i & 31;
      const byte = ql[64 * n + l + 32 * (c & 1)]!;
      const q = (c < 2 ? byte & 15 : byte >> 4) | (((qh6[32 * n + l]! >> (2 * c)) & 3) << 4);
      return f(2 * scales[8 * n + (l >> 4) + 2 * c]!) * (q - 32);
    });
    expectExact(dequantize(new Uint8Array(block), Q6_K, 256, 't'), expected);
  });
});

describe('refusals', () => {
  it('names an unsupported type and the tensor', () => {
    for (const [type, name] of [[16, 'IQ2_XXS'], [23, 'IQ4_XS'], [10, 'Q2_K'], [77, 'type 77']] as const) {
      expect(() => dequantize(new Uint8Array(66), type, 256, 'm.gguf: tensor \'blk.0.attn_q.weight\'')).toThrow(
        new UserError(`m.gguf: tensor 'blk.0.attn_q.weight': tensor type ${name} is not supported (supported: F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); re-quantise the model to one of these, e.g. Q8_0 or Q4_K_M`),
      );
    }
  });

  it('refuses bytes too few for the elements', () => {
    expect(() => dequantize(new Uint8Array(33), Q8_0, 32, 't')).toThrow(/33 bytes cannot hold 32 Q8_0 values/);
  });
});
