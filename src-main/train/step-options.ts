/**
 * What a training step is built with (./step-engine.ts), its defaults, and how they become the
 * sessions' configuration and the graphs' memory options (./step-graph.ts MemoryOptions).
 */
import type { WeightSource } from '../model/decoder.js';
import { DEFAULT_VOCAB_CHUNK } from '../model/chunked-head.js';
import { ATTENTION_CHUNKING, chunksAttention, type AttentionChunking } from '../model/attention.js';
import { defaultPrecision, type Precision, type Quantize } from '../../src-shared/training.js';
import type { Device, SessionConfig } from '../model/ort-session.js';
import type { LoraConfig, LossConfig, OptimizerConfig } from './training-step.js';
import type { MemoryOptions } from './step-graph.js';
import type { ValueHeadConfig } from './step-loss.js';

export type OptimizerPlacement = 'host' | 'graph';

export interface TrainStepOptions {
  lora: LoraConfig;
  loss: LossConfig;
  optimizer: OptimizerConfig;
  device: Device;
  /** Intra-op threads; default: ONNX Runtime's choice. */
  threads?: number;
  /** Where the optimizer update runs; default the device's, {@link OPTIMIZER_PLACEMENT}. */
  placement?: OptimizerPlacement;
  /** Folder for graphs too big to hand over in memory; default the OS temp folder. */
  cacheDir?: string;
  /** Vocabulary rows per chunk of the LM head; default {@link DEFAULT_VOCAB_CHUNK}; 0: unchunked. */
  vocabChunk?: number;
  /** Recompute layer activations in the backward pass (docs/design.md §Memory); default off. */
  recompute?: boolean;
  /** The frozen base's projections in fp16 or fp32 (docs/design.md §Precision); default {@link defaultPrecision} of the device. */
  precision?: Precision;
  /** The frozen base stored quantised (docs/design.md §QLoRA); default 'none'. */
  quantize?: Quantize;
  /**
   * The longest row the step will see (--max-length): past {@link ATTENTION_CHUNKING}'s
   * `above` (or its `scoreBytes` at the model's heads) the graph computes attention in ⌈maxLength / rows⌉ chunks of query rows
   * (docs/design.md §Memory); any row length computes right. Default: attention in one piece.
   */
  maxLength?: number;
  /** When and how attention is chunked; default {@link ATTENTION_CHUNKING}. */
  attentionChunking?: AttentionChunking;
  /** Read the weights from the process's one shared file (../model/weight-file.ts); default true. */
  shareWeights?: boolean;
  /** Let ONNX Runtime repack matmul weights at load (a private copy per session); default {@link DEFAULT_PREPACK}. */
  prepack?: boolean;
  /** ONNX Runtime's memory-pattern planning for the step's sessions; default {@link DEFAULT_MEMORY_PATTERN}. */
  memoryPattern?: boolean;
  /** Train a value head with this loss (the `gae` estimator, docs/design.md §Advantage estimators); default none. */
  value?: ValueHeadConfig;
  /**
   * Rows per pass of every graph (gradient accumulation, ./micro-batch.ts; docs/design.md
   * §Micro-batches): a batch of more rows goes through in micro-batches of this many, their
   * gradients summed before the one update, with the same loss, metrics and gradients as one
   * pass. Default: the whole batch in one pass.
   */
  microBatch?: number;
}

/**
 * The step's sessions read the matmul weights from the shared mapping as they are: with
 * hundreds of rows per matmul the repacking buys nothing measurable, and it would cost each
 * session a private copy (bench/train-memory.ts, docs/design.md §Memory).
 */
export const DEFAULT_PREPACK = false;

/**
 * Where the optimizer update runs, by device (./step-engine.ts's header has the measurements).
 * - The CPU: on the host. The graph measured only 3–7% faster there, and its joined vectors
 *   would cost an 8B QLoRA run about a gigabyte more; the host update writes in place.
 * - A GPU: in the graph, on the GPU. The host update is a single-threaded JavaScript loop over
 *   every LoRA weight. At the Qwen3-0.6B shape with r16 on all seven targets (10.1 M weights),
 *   it took 160–260 ms a step on the build machine, with the gradient norm 21–32 ms more. A
 *   CUDA step at 2,048 tokens took 0.46–0.56 s in all (README *GPU*). On the GPU the update is
 *   a dozen elementwise kernels over one vector of every weight, and the weights and moments
 *   cross the bus (some 240 MB; the gradients are not fetched).
 *   **Not yet measured on a GPU**: bench:gpu's training table has a row with it on the host.
 */
export const OPTIMIZER_PLACEMENT: Record<Device, OptimizerPlacement> = { cpu: 'host', cuda: 'graph', webgpu: 'graph' };

/**
 * ONNX Runtime's memory-pattern planning off for the step's sessions: with it on, the step
 * kept one block sized for its planned peak, which at long rows is far above what is alive at
 * any moment (Qwen3-0.6B shape, 1 × 1,024 with recomputation, when it was measured: 11.9 GB
 * on, 7.9 GB off, at the same speed; docs/design.md §Memory). The CPU arena stays on: without
 * it the C allocator's fragmentation cost more (6.5 → 7.9 GB at 512 tokens).
 */
export const DEFAULT_MEMORY_PATTERN = false;

export function sessionConfig(o: TrainStepOptions, weights: WeightSource): SessionConfig {
  return {
    device: o.device, threads: o.threads, cacheDir: o.cacheDir,
    // A quantised step shares the quantised file with the run's rollouts (../model/inference-engine.ts names it the same way).
    sharedWeights: o.shareWeights === false ? undefined : quantized(o) ? (weights.identityFor?.(o.quantize!) ?? weights.identity) : weights.identity,
    prepack: o.prepack ?? DEFAULT_PREPACK,
    memoryPattern: o.memoryPattern ?? DEFAULT_MEMORY_PATTERN,
  };
}

const quantized = (o: TrainStepOptions) => o.quantize !== undefined && o.quantize !== 'none';

export function memoryOptions(o: TrainStepOptions, weights: WeightSource): MemoryOptions {
  const chunking = o.attentionChunking ?? ATTENTION_CHUNKING;
  const chunked = o.maxLength !== undefined && chunksAttention(o.maxLength, chunking, weights.config.numHeads);
  return {
    vocabChunk: o.vocabChunk ?? DEFAULT_VOCAB_CHUNK, recompute: o.recompute ?? false, precision: o.precision ?? defaultPrecision(o.device),
    ...(quantized(o) ? { quantize: o.quantize } : {}),
    ...(chunked ? { attentionChunks: Math.ceil(o.maxLength! / chunking.rows) } : {}),
  };
}
