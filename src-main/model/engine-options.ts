/**
 * What a model engine (./inference-engine.ts) is opened with: the device and how the graphs
 * are built and kept, and where its decode cache lives ({@link decodeCachePlacement}).
 */
import type { CachePrecision } from '../../src-shared/inference-memory.js';
import type { Precision, defaultPrecision } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';
import type { AttentionChunking } from './attention.js';
import type { PREFILL_PIECE } from './batch-decode.js';
import type { LoraShape } from './lora-inputs.js';
import { holdsTensorsOnDevice, type Device, type InferenceFusions, type inferenceFusions } from './ort-session.js';
import type { Quantize } from './quantize.js';

export interface EngineOptions {
  device?: Device;
  threads?: number;
  cacheDir?: string;
  /** Force the external-data path (used for models over 2 GiB anyway); for tests. */
  externalData?: boolean;
  /** Weight-only quantised projections for score and generate (docs/design.md §Quantisation). Default 'none'. */
  quantize?: Quantize;
  /** Read the weights from the process's one shared file (./weight-file.ts); default true. */
  shareWeights?: boolean;
  /** Let ONNX Runtime repack matmul weights (a private copy, faster decoding); default true. */
  prepack?: boolean;
  /** Build score and generate with this adapter shape's A/B tensors as inputs; weights from `setLora`. */
  lora?: LoraShape;
  /**
   * Where built graphs are kept for the next process (./graph-cache.ts, docs/design.md §Graph
   * cache); false: not kept. Default: HINDSIGHT_GRAPH_CACHE, else the OS cache folder.
   */
  graphCache?: string | false;
  /** When score chunks attention by query rows (docs/design.md §Scoring); default SCORE_ATTENTION_CHUNKING. */
  attentionChunking?: AttentionChunking;
  /** The most prompt tokens per row one prefill step feeds the generate graph; default {@link PREFILL_PIECE}. */
  prefillPiece?: number;
  /** ONNX Runtime's fused ops in the inference graphs, each where set; default: the device's ({@link inferenceFusions}). For tests and benches. */
  fusions?: Partial<InferenceFusions>;
  /** The base's projections in fp16 or fp32 (../graph's decoder, docs/design.md §Precision); default: {@link defaultPrecision} of the device. */
  precision?: Precision;
  /**
   * Keep the decode cache (and LoRA inputs) in GPU memory (./device-kv-cache.ts); default: where the
   * device can ({@link holdsTensorsOnDevice}). false: host memory, the benches' and tests' comparison.
   */
  decodeCacheOnDevice?: boolean;
  /**
   * Decode in chunks of tokens through the decode chunk graph, which samples in the graph
   * (./chunk-decode.ts): the cache crosses to the device once a chunk, not once a token.
   * Default: on CUDA, whose cache is in host memory ({@link holdsTensorsOnDevice}); the CPU's
   * cache is already where the graph reads it, WebGPU's on the GPU.
   */
  decodeInGraph?: boolean;
  /**
   * The host decode cache's values (./kv-cache.ts): fp16 halves its memory where the memory
   * check found fp32 would cut chats short (./inference-fit.ts ChatContext). Default fp32; fp16
   * with the CPU's cache only (not on the GPU, nor with `decodeInGraph`).
   */
  cachePrecision?: CachePrecision;
  /**
   * The tokenizer's end-of-sequence ids, from a caller that holds the tokenizer itself
   * (LocalModel, in its own thread). Given, the engine loads no tokenizer until it needs one
   * (stop strings, the drift measure, `decodeText`): a real vocabulary's costs over 100 MB.
   */
  eosTokenIds?: readonly number[];
}

/** Where an engine's decode cache lives and in what, from its options on `device`. */
export interface DecodeCachePlacement {
  /** In GPU memory (./device-kv-cache.ts), else the host's (./kv-cache.ts). */
  onDevice: boolean;
  /** Decoded in chunks through the decode chunk graph (./chunk-decode.ts). */
  inGraph: boolean;
  precision: CachePrecision;
}

/** {@link EngineOptions}' decode cache choices on `device`, their defaults filled in; a combination that cannot be is refused in one line. */
export function decodeCachePlacement(options: EngineOptions, device: Device): DecodeCachePlacement {
  if (options.decodeCacheOnDevice && !holdsTensorsOnDevice(device)) {
    throw new UserError(`the decode cache cannot stay on ${device}: onnxruntime-node keeps GPU-resident tensors for WebGPU only`);
  }
  const onDevice = options.decodeCacheOnDevice ?? (holdsTensorsOnDevice(device) && !options.decodeInGraph);
  const inGraph = options.decodeInGraph ?? device === 'cuda';
  const precision = options.cachePrecision ?? 'fp32';
  if (inGraph && onDevice) throw new UserError('decodeInGraph: the decode cache is on the GPU already (decodeCacheOnDevice); choose one');
  if (precision === 'fp16' && (inGraph || onDevice)) throw new UserError(`cachePrecision fp16: only the CPU's decode cache is held in fp16, not ${device}'s`);
  return { onDevice, inGraph, precision };
}
