/**
 * Scoring token spans under the base model and under LoRA adapters, forward only: the
 * training step's forward graph (./step-graph.ts `buildForwardGraph`, LoRA tensors as graph
 * inputs) in its own ONNX Runtime session, without the training graph. One session serves the
 * base (every LoRA tensor zero) and every adapter of the same shape (r, alpha, targets), so
 * an adapter whose B is zero scores exactly as the base does, bit for bit, and the numbers
 * are the ones the trainer's own forward pass gives (docs/design.md §Evaluation).
 *
 * ONNX Runtime blocks the calling thread while it runs: callers that must stay responsive
 * run this in a worker (src-main/eval/run-in-worker.ts).
 */
import type { Checkpoint } from '../model/hf-checkpoint.js';
import { checkpointWeights } from '../model/decoder.js';
import { createSession, fusesMatMul, ort, type Device } from '../model/ort-session.js';
import type { TokenSpan } from './batches.js';
import { scoreInBatches } from './eval-rows.js';
import { loraSpecs } from './lora.js';
import { buildForwardGraph, loraKeys } from './step-graph.js';
import { DEFAULT_VOCAB_CHUNK } from '../model/chunked-head.js';
import { SCORE_ATTENTION_CHUNKING, attentionChunksFor, type AttentionChunking } from '../model/attention.js';
import { checkTokens, modelFeeds, pickAll, toGrid } from './step-feeds.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights, StepBatch } from './training-step.js';
import type { Quantize } from '../model/quantize.js';

export interface ScorerOptions {
  device: Device;
  threads?: number;
  /** Rows per forward pass. */
  batchSize: number;
  /**
   * The longest span it will score: past SCORE_ATTENTION_CHUNKING the graph runs attention in
   * query chunks, as `score` does for long rows (docs/design.md §Scoring); default: in one piece.
   */
  longestRow?: number;
  /** When attention is chunked; default SCORE_ATTENTION_CHUNKING. */
  attentionChunking?: AttentionChunking;
  /**
   * The base's weights as int8 / int4 blocks, as a QLoRA step's forward pass reads them
   * (./step-graph.ts trainingScheme): where fp32 does not fit (../model/inference-fit.ts). Default none.
   */
  quantize?: Quantize;
}

/** Whether two adapters can share one scoring session. */
export function sameShape(a: LoraConfig, b: LoraConfig): boolean {
  return a.r === b.r && a.alpha === b.alpha && a.targets.join() === b.targets.join();
}

export class LoraScorer {
  private zero?: LoraWeights;

  private constructor(
    readonly lora: LoraConfig,
    readonly specs: LoraTensorSpec[],
    private readonly session: ort.InferenceSession,
    readonly executionProvider: Device,
    private readonly options: ScorerOptions,
    private readonly vocabSize: number,
  ) {}

  static async create(checkpoint: Checkpoint, lora: LoraConfig, options: ScorerOptions): Promise<LoraScorer> {
    const attentionChunks = options.longestRow === undefined ? undefined : attentionChunksFor(options.longestRow, options.attentionChunking ?? SCORE_ATTENTION_CHUNKING);
    const quantize = options.quantize && options.quantize !== 'none' ? { quantize: options.quantize } : {};
    const { graph } = buildForwardGraph(checkpointWeights(checkpoint), lora, { vocabChunk: DEFAULT_VOCAB_CHUNK, attentionChunks, ...quantize }, { fusedScores: fusesMatMul(options.device) });
    const { session, executionProvider } = await createSession(graph, { device: options.device, threads: options.threads });
    return new LoraScorer(lora, loraSpecs(checkpoint.config, lora.targets), session, executionProvider, options, checkpoint.config.vocabSize);
  }

  /** Reply-token log-probs of each span under the base plus `weights` (null: the base model alone). */
  score(spans: readonly TokenSpan[], weights: LoraWeights | null): Promise<Float32Array[]> {
    const lora = weights ?? this.zeroWeights();
    return scoreInBatches(spans, this.options.batchSize, (batch) => this.run(batch, lora));
  }

  close(): Promise<void> {
    return this.session.release();
  }

  private zeroWeights(): LoraWeights {
    const r = this.lora.r;
    this.zero ??= new Map(this.specs.flatMap((s) => {
      const k = loraKeys(s);
      return [[k.a, new Float32Array(r * s.inFeatures)], [k.b, new Float32Array(s.outFeatures * r)]];
    }));
    return this.zero;
  }

  /** The [B, T] token grid of log-probs: position t holds log p(token t | tokens < t); position 0 is 0. */
  private async run(batch: StepBatch, weights: LoraWeights): Promise<Float32Array> {
    // Every token after each row's first goes through the (chunked) LM head, as in the training
    // step's forward pass (./step-feeds.ts).
    checkTokens(batch, this.vocabSize);
    const picked = pickAll(batch);
    const feeds: Record<string, ort.Tensor> = modelFeeds(batch, picked);
    const r = this.lora.r;
    for (const spec of this.specs) {
      const k = loraKeys(spec);
      feeds[k.a] = new ort.Tensor('float32', weights.get(k.a)!, [r, spec.inFeatures]);
      feeds[k.b] = new ort.Tensor('float32', weights.get(k.b)!, [spec.outFeatures, r]);
    }
    const out = await this.session.run(feeds);
    return toGrid(out.logprobs!.data as Float32Array, picked, batch);
  }
}
