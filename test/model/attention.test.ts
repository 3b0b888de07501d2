// Attention in an inference graph (FusedMatMul against the keys as they lie; each query chunk
// reading only the keys it may see) against the standard-op attention that autodiff
// differentiates: the same logits at every real position, with padding on either side and with
// query chunks of uneven sizes, and none of the inference-only ops in a differentiable graph.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { buildDecoder, checkpointWeights, type WeightSource } from '../../src-main/model/decoder.js';
import { positionIdsFromMask } from '../../src-main/model/cache-slots.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-attention-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

let weights: WeightSource;
beforeAll(() => {
  // GQA (4 query heads over 2 KV heads), so queries are grouped and keys broadcast.
  const tiny = writeTinyModel(path.join(root, 'qwen3'), { family: 'qwen3', numHeads: 4, numKvHeads: 2, seed: 7 });
  weights = checkpointWeights(Checkpoint.open(tiny.dir));
});

function logitsGraph(inference: boolean, attentionChunks?: number, fusedScores?: boolean) {
  const b = new GraphBuilder(inference ? 'inference' : 'differentiable');
  const values = buildDecoder(b, weights, { output: 'logits', inference, attentionChunks, fusedScores });
  b.output(b.identityAs(values.output, 'logits'));
  return b.graph;
}

async function logits(graph: ReturnType<typeof logitsGraph>, ids: number[][], mask: number[][]): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(serializeModel(graph));
  try {
    const B = ids.length, T = ids[0]!.length;
    const int64 = (rows: number[][]) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [B, T]);
    const out = await session.run({ input_ids: int64(ids), attention_mask: int64(mask), position_ids: int64(positionIdsFromMask(mask)) });
    return out.logits!.data as Float32Array;
  } finally {
    await session.release();
  }
}

/** Two rows of `length` positions, the second with `padding` pad tokens on the given side. */
function batch(length: number, padding: number, side: 'left' | 'right') {
  const rand = seededRandom(length * 10 + padding);
  const vocab = weights.config.vocabSize;
  const ids = [0, 1].map(() => Array.from({ length }, () => Math.floor(rand() * vocab)));
  const real = (r: number) => Array.from({ length }, (_, t) => Number(r === 0 || (side === 'right' ? t < length - padding : t >= padding)));
  return { ids, mask: [real(0), real(1)] };
}

/**
 * The largest difference between two [B, T, V] logits at real positions. A padding position's
 * logits are never read, and they differ: its query sees no real key, so its softmax is uniform
 * over whichever keys its chunk reads.
 */
function maxAbsDiffAtRealPositions(a: Float32Array, b: Float32Array, mask: number[][]): number {
  expect(a.length).toBe(b.length);
  const vocab = a.length / mask.flat().length;
  return a.reduce((m, v, i) => (mask.flat()[Math.floor(i / vocab)] ? Math.max(m, Math.abs(v - b[i]!)) : m), 0);
}

describe('attention in an inference graph', () => {
  it.each([
    { length: 11, padding: 3, side: 'right' as const, chunks: 3 },
    { length: 11, padding: 4, side: 'left' as const, chunks: 3 },
    { length: 9, padding: 0, side: 'right' as const, chunks: 4 },
    // Fewer rows than chunks: the padded rows keep every chunk non-empty.
    { length: 2, padding: 1, side: 'left' as const, chunks: 4 },
  ])('$length positions, $padding padded on the $side, $chunks chunks: the differentiable graph\'s logits', async ({ length, padding, side, chunks }) => {
    const { ids, mask } = batch(length, padding, side);
    const reference = await logits(logitsGraph(false), ids, mask);
    // fusedScores off: the inference graph WebGPU gets (MatMul against transposed keys).
    for (const graph of [logitsGraph(true), logitsGraph(true, chunks), logitsGraph(false, chunks), logitsGraph(true, undefined, false), logitsGraph(true, chunks, false)]) {
      expect(maxAbsDiffAtRealPositions(await logits(graph, ids, mask), reference, mask)).toBeLessThan(1e-5);
    }
  });

  it('uses FusedMatMul and run-time key slices only where the graph is not differentiated', () => {
    // Autodiff differentiates a Slice only with constant bounds, and knows no contrib op.
    const runTimeSlices = (graph: ReturnType<typeof logitsGraph>) =>
      graph.nodes.filter((n) => n.op === 'Slice' && !graph.initializers.has(n.inputs[2]!)).length;
    const inference = logitsGraph(true, 3), differentiable = logitsGraph(false, 3);
    expect(inference.nodes.some((n) => n.op === 'FusedMatMul')).toBe(true);
    expect(runTimeSlices(inference)).toBeGreaterThan(0);
    expect(differentiable.nodes.some((n) => n.op === 'FusedMatMul')).toBe(false);
    expect(runTimeSlices(differentiable)).toBe(0);
    // Without fused scores (an execution provider that lacks FusedMatMul) no contrib op is left,
    // and the chunks still read only their keys.
    const unfused = logitsGraph(true, 3, false);
    expect(unfused.nodes.some((n) => n.domain === 'com.microsoft')).toBe(false);
    expect(runTimeSlices(unfused)).toBeGreaterThan(0);
  });
});
