// Where the decoder builder (./decoder.ts) gets its weights: a checkpoint, or anything shaped
// like one. Apart from decoder.ts so that the matmul builders it calls (./half-matmul.ts,
// ./quantized-matmul.ts) can name it without importing the decoder back.
import type { Tensor } from '../graph/ir.js';
import type { ModelConfig } from './model-config.js';

/** Where the builder gets its weights: a checkpoint, or anything shaped like one. */
export interface WeightSource {
  config: ModelConfig;
  /** Names the content of the weights (./weight-file.ts shares one copy per process by it); absent: not shared. */
  identity?: string;
  /** The identity of a form of the weights (a --quantize choice), as ./hf-checkpoint.ts names it: the training step's and the engine's quantised sessions share one file by it. */
  identityFor?(variant: string): string;
  has(name: string): boolean;
  /** Checks `name` has `shape` now (throwing a clear error), returns fp32 data lazily. */
  lazyFloat32(name: string, shape: number[], transpose2d?: boolean): Tensor;
  /** The same as fp16, where the source can make it without an fp32 copy (bench/train-memory.ts's 8B shape); absent: from lazyFloat32. */
  lazyFloat16?(name: string, shape: number[]): Tensor;
}
