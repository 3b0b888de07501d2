/**
 * Weight-only quantised matmuls in the graph (docs/design.md §Quantisation): x · Wᵀ through
 * com.microsoft.MatMulNBits, with W ([n, k], Hugging Face layout, so no transpose) quantised
 * blockwise (./quantize.ts) when the graph is serialised. A weight is quantised once, on its
 * first read, and the codes are dropped once every initializer made from them has been read.
 *
 * The score graph's quantised LM head runs over row chunks of the head, each its own
 * initializers (so ONNX Runtime prepacks each, as it does the whole head for generation), with
 * the same online log-sum-exp as the fp32 head (./chunked-head.ts): no [N, V] value is made.
 *
 * A GGUF checkpoint's Q8_0 and Q4_0 weights are used in their own blocks (./gguf/native-blocks.ts),
 * whatever the scheme asked for: they are never expanded to fp32 or quantised a second time.
 */
import { int, tensorValues, type GraphBuilder, type Tensor } from '../graph/ir.js';
import { foldVocabularyChunks } from './chunked-head.js';
import { softcap } from './softcap.js';
import type { WeightSource } from './weight-source.js';
import { quantizedDims, quantizeBlockwise, type QuantizedWeight, type QuantScheme } from './quantize.js';
import type { Checkpoint } from './hf-checkpoint.js';
import { ggufNativeBlocks, type NativeBlocks } from './gguf/native-blocks.js';

type Part = 'codes' | 'scales' | 'zeroPoints';
type Reader = (part: Part, rows: [number, number]) => () => Uint8Array | Float32Array;

/** A weight source that holds some weights in MatMulNBits' blocks already (a GGUF's Q8_0 and Q4_0). */
interface NativeSource {
  nativeBlocks?(name: string, n: number, k: number, accuracyLevel: 0 | 4): NativeBlocks | undefined;
}

/** What checkpointWeights adds for a GGUF checkpoint: its tensors' own blocks, where they map exactly. */
export function nativeBlocksOf(ckpt: Checkpoint): NativeSource {
  const g = ckpt.gguf;
  return g ? { nativeBlocks: (name, n, k, level) => ggufNativeBlocks(g, name, n, k, level) } : {};
}

/**
 * The reader of one weight's quantisation, to be read `reads` times in all (three per
 * initializer set): quantised on the first read (or taken as the source holds it), dropped
 * after the last; and the scheme it is in.
 */
function lazyQuantization(weights: WeightSource, name: string, n: number, k: number, asked: QuantScheme, reads: number): { read: Reader; scheme: QuantScheme } {
  const native = (weights as NativeSource).nativeBlocks?.(name, n, k, asked.accuracyLevel);
  const source = native ? undefined : weights.lazyFloat32(name, [n, k]);
  let cached: QuantizedWeight | undefined;
  let done = 0;
  const read: Reader = (part: Part, rows: [number, number]) => () => {
    cached ??= native ? native.read() : quantizeBlockwise(tensorValues(source!) as Float32Array, n, k, asked);
    const values = tensorValues(cached[part]) as Uint8Array | Float32Array;
    const perRow = values.length / n; // every part is laid out row by row
    const data = values.subarray(rows[0] * perRow, rows[1] * perRow);
    if (++done % reads === 0) cached = undefined;
    return data;
  };
  return { read, scheme: native?.scheme ?? asked };
}

/** MatMulNBits over rows [from, to) of the weight; `label` names its initializers. */
function matMulNBits(b: GraphBuilder, x: string, read: Reader, label: string, rows: [number, number], k: number, scheme: QuantScheme): string {
  const n = rows[1] - rows[0];
  const dims = quantizedDims(n, k, scheme);
  const tensor = (dtype: 'uint8' | 'float32', shape: number[], part: Part): Tensor => ({ dtype, dims: shape, data: read(part, rows) });
  const codes = b.initializer(`${label}.q${scheme.bits}`, tensor('uint8', dims.codes, 'codes'));
  const scales = b.initializer(`${label}.scales`, tensor('float32', dims.scales, 'scales'));
  const zeros = b.initializer(`${label}.zero_points`, tensor('uint8', dims.zeroPoints, 'zeroPoints'));
  const xShape = b.shapeOf(x);
  return b.contribOp('MatMulNBits', [x, codes, scales, zeros], {
    K: int(k), N: int(n), bits: int(scheme.bits), block_size: int(scheme.blockSize), accuracy_level: int(scheme.accuracyLevel),
  }, { dtype: 'float32', shape: xShape ? [...xShape.slice(0, -1), n] : undefined });
}

/** x · Wᵀ for the whole weight `name` [n, k]. */
export function quantizedMatmul(b: GraphBuilder, x: string, weights: WeightSource, name: string, n: number, k: number, asked: QuantScheme): string {
  const { read, scheme } = lazyQuantization(weights, name, n, k, asked, 3);
  return matMulNBits(b, x, read, name, [0, n], k, scheme);
}

/**
 * float32 [N]: log p(target) for hidden rows h [N, H] under the quantised head `name` [V, H],
 * over vocabulary chunks of `chunk` rows. The target's logit is read from the chunk that holds
 * it (each chunk gathers at its clipped index and keeps the value only where the index was in range).
 * `cap`: Gemma 2's final soft-capping of every logit (./softcap.ts).
 */
export function quantizedTargetLogprobs(
  b: GraphBuilder, h: string, targets: string, weights: WeightSource, name: string, vocabSize: number, asked: QuantScheme, chunk: number, cap?: number,
): string {
  const k = weights.config.hiddenSize;
  const { read, scheme } = lazyQuantization(weights, name, vocabSize, k, asked, 3 * Math.ceil(vocabSize / chunk));
  const zero = b.scalar(0);
  let targetLogit: string | undefined;
  const { lse } = foldVocabularyChunks(b, vocabSize, chunk, h, (start, end, after) => {
    // h + an exact 0 computed from the previous chunk: this chunk's matmul waits for it.
    const input = start === 0 ? h : b.add(h, b.add(zero, b.cast(after, 'float32')));
    const logits = softcap(b, matMulNBits(b, input, read, `${name}.rows${start}`, [start, end], k, scheme), cap); // Gemma 2's final cap
    const local = b.sub(targets, b.int64s([start]));
    const clipped = b.op('Clip', [local, b.scalar(0, 'int64'), b.scalar(end - start - 1, 'int64')], {}, 1, [{ dtype: 'int64', shape: b.shapeOf(targets) }])[0]!;
    const picked = b.squeeze(b.gatherElements(logits, b.unsqueeze(clipped, [-1]), -1), [-1]);
    const inChunk = b.cast(b.op('Equal', [clipped, local], {}, 1, [{ dtype: 'bool', shape: b.shapeOf(targets) }])[0]!, 'float32');
    const part = b.mul(picked, inChunk);
    targetLogit = targetLogit ? b.add(targetLogit, part) : part;
    return { logits };
  });
  return b.sub(targetLogit!, lse);
}
