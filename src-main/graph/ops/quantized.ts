/**
 * ONNX Runtime's com.microsoft.MatMulNBits (Y = A · dequant(B)ᵀ, the weight-only quantised
 * linear of ../../model/quantize.ts) as an op record, so that a training step can run its frozen
 * base quantised (QLoRA, docs/design.md §QLoRA). The record as explained in ../op-record.ts.
 *
 * Gradient: B, its scales and zero points are frozen codes (never differentiated); the input's
 * is dA = dY · W with W = dequant(B) [N, K]. ONNX Runtime has no op for dY · W from the codes,
 * so the rule dequantises the layer's W in the graph (unpack, − zero point, × scale), uses it in
 * one MatMul and lets it go: one layer's fp32 weight alive at a time, never the model's. Every
 * step of the dequantisation takes a run-time 0 computed from dY, so ONNX Runtime neither folds
 * it into an fp32 initializer at load (which would be the fp32 model again) nor schedules it
 * before the backward pass reaches the layer. The figures that chose this over a second,
 * transposed quantised copy are in docs/design.md §QLoRA.
 */
import type { GraphBuilder } from '../ir.js';
import type { Attr, Shape } from '../ir-data.js';
import type { OpRecord } from '../op-record.js';
import { zeroAfter } from './shape.js';

const attrInt = (attrs: Record<string, Attr>, key: string): number => {
  const a = attrs[key];
  if (a?.kind !== 'int') throw new Error(`MatMulNBits: attribute ${key} is missing`);
  return a.value;
};

/**
 * uint8 codes `packed` [..., bytes] as one value per code [..., bytes · 8 / bits] (low bits
 * first, as ../../model/quantize.ts packs them); `keep` is a run-time all-ones mask (see the header).
 */
function unpack(b: GraphBuilder, packed: string, bits: number, keep: string): string {
  const shape = b.shapeOf(packed)!;
  const kept = b.op('BitwiseAnd', [packed, keep], {}, 1, [{ dtype: 'uint8', shape }])[0]!;
  if (bits === 8) return kept;
  const u8 = (v: number) => b.constant({ dtype: 'uint8', dims: [], data: Uint8Array.of(v) }, 'u8');
  const low = b.op('BitwiseAnd', [kept, u8(0xf)], {}, 1, [{ dtype: 'uint8', shape }])[0]!;
  const high = b.op('BitShift', [kept, u8(4)], { direction: { kind: 'string', value: 'RIGHT' } }, 1, [{ dtype: 'uint8', shape }])[0]!;
  const pairs = b.concat([b.unsqueeze(low, [-1]), b.unsqueeze(high, [-1])], -1);
  const last = shape.at(-1) as number;
  return b.reshape(pairs, [...shape.slice(0, -1).map(() => 0), last * 2]);
}

/**
 * W = dequant(B) float32 [N, K] from MatMulNBits' inputs: (code − zero point) · scale, block by
 * block, a padded last block cut off. `anchor`: any run-time value the dequantisation must wait for.
 */
export function dequantizeNBits(b: GraphBuilder, inputs: { codes: string; scales: string; zeroPoints?: string }, attrs: Record<string, Attr>, anchor: string): string {
  const K = attrInt(attrs, 'K'), N = attrInt(attrs, 'N'), bits = attrInt(attrs, 'bits'), blockSize = attrInt(attrs, 'block_size');
  const kBlocks = Math.ceil(K / blockSize);
  const zero = b.squeeze(zeroAfter(b, [anchor]), [0]); // 0, known only at run time
  const keep = b.cast(b.add(zero, b.scalar(0xff, 'int64')), 'uint8');
  const codes = b.cast(unpack(b, inputs.codes, bits, keep), 'float32'); // [N, kBlocks, blockSize]
  const zeros = inputs.zeroPoints
    ? b.reshape(b.slice(b.reshape(b.cast(unpack(b, b.reshape(inputs.zeroPoints, [N, -1]), bits, keep), 'float32'), [N, -1]), [0], [kBlocks], [1]), [N, kBlocks, 1])
    : b.scalar(bits === 8 ? 128 : 8); // the op's default zero point
  const scales = b.reshape(b.add(inputs.scales, b.cast(zero, 'float32')), [N, kBlocks, 1]);
  const w = b.reshape(b.mul(b.sub(codes, zeros), scales), [N, kBlocks * blockSize]);
  return kBlocks * blockSize === K ? w : b.slice(w, [0], [K], [1]);
}

export const MatMulNBits = {
  name: 'MatMulNBits',
  inferShape: ([a], attrs) => [{ dtype: a!.dtype, shape: a!.shape && [...a!.shape.slice(0, -1), attrInt(attrs, 'N')] }],

  // Y = A·Wᵀ: dA = dY·W, W dequantised for this one product (see the header); the codes are frozen.
  gradient: ({ b, node, x: [a, codes, scales, zeroPoints], dy, needs }) => {
    if (!needs(0)) return [];
    const g = dy[0]!;
    const N = attrInt(node.attrs, 'N'), K = attrInt(node.attrs, 'K');
    const w = dequantizeNBits(b, { codes: codes!, scales: scales!, zeroPoints: zeroPoints || undefined }, node.attrs, g);
    const rows = b.reshape(g, [-1, N]);
    const product = b.matmul(rows, w); // [rows, K]
    const shapeA: Shape | undefined = b.shapeOf(a!);
    return [b.reshapeTo(product, b.shape(a!), shapeA)];
  },
} satisfies OpRecord;

