/**
 * The in-thread model engine: a checkpoint, its tokenizer and its ONNX Runtime sessions,
 * with scoring and generation. ONNX Runtime blocks the thread that calls it, so the app
 * uses this through `LocalModel` (./local-model.ts), which runs it in a worker. Code that
 * already lives in a worker (the trainer) may use it directly.
 *
 * The graphs, each built on first use:
 * - score:    no cache, output `target_logprobs`: the LM head and its log-sum-exp at the
 *             response positions only (./score-feeds.ts, docs/design.md §Scoring), in fp32 in
 *             the graph, so one float per response token crosses the Node binding, never logits.
 * - generate: with KV cache, output `last_logprobs` [B, V]; also used without the cache
 *             (empty past, the whole sequence each step) as a check of the incremental path.
 *             Every generation is a batch (./batch-decode.ts, docs/design.md §Batched
 *             generation); `generate` is a batch of one.
 * - decode_chunk: on CUDA, generation's instead of generate: the same decoder inside a loop
 *             that samples in the graph, several tokens a run (./decode-chunk-graph.ts,
 *             ./chunk-decode.ts), so the host cache crosses to the GPU once a chunk.
 * With `quantize` int8/int4 both graphs use weight-only quantised projections (MatMulNBits,
 * docs/design.md §Quantisation); `quantizationDrift` measures what that costs in log-probs.
 * On the CPU both read the weights from the process's one memory-mapped copy
 * (./weight-file.ts); a session still keeps its own prepacked copy of the matmul weights
 * unless `prepack` is false, so a process that only scores never builds the other.
 *
 * With `lora` both graphs take the adapter's A/B tensors as inputs (./lora-inputs.ts), fed on
 * every run from the weights `setLora` was last given (./lora-feeds.ts): the policy of
 * on-policy training changes every step, and one built graph serves every step
 * (docs/design.md §Rollouts).
 *
 * The decode cache lives in host memory on the CPU and CUDA (./kv-cache.ts) and in GPU memory
 * on WebGPU (./device-kv-cache.ts), the one device the Node binding keeps outputs on; CUDA's
 * stays on the GPU within a chunk.
 */
import { UserError } from '../../src-shared/types.js';
import { Checkpoint, type ModelConfig } from './hf-checkpoint.js';
import { checkpointWeights, decoderGraph, type WeightSource } from './decoder.js';
import { defaultPrecision, type Precision } from '../../src-shared/training.js';
import { ort, createSession, assertDeviceAvailable, fusesMatMul, inferenceFusions, type InferenceFusions, type Device, type SessionConfig } from './ort-session.js';
import { ChatTokenizer } from './tokenizer.js';
import { DEFAULT_MAX_NEW_TOKENS, replyBudget } from './context-limit.js';
import { PREFILL_PIECE, generateSequences, type GeneratedTokens } from './batch-decode.js';
import { KvCache } from './kv-cache.js';
import { CarriedRows, REUSE_KEEP_MS } from './carried-rows.js';
import type { DecodeCacheFactory } from './cache-slots.js';
import { DeviceGraphs, cacheOutputNames } from './device-kv-cache.js';
import { LoraFeeds } from './lora-feeds.js';
import { decodeCachePlacement, type EngineOptions } from './engine-options.js';
import { generateInChunks } from './chunk-decode.js';
import { decodeChunkGraph } from './decode-chunk-graph.js';
import { quantScheme, type Quantize } from './quantize.js';
import { scoreRows, type ScoreRow } from './score-feeds.js';
import { SCORE_ATTENTION_CHUNKING, attentionChunksFor, type AttentionChunking } from './attention.js';
import { driftTextIds, measureDrift, type QuantDrift } from './quant-drift.js';
import { checkLoraShape, loraInputHook, loraSpecs, type LoraShape, type LoraSpec } from './lora-inputs.js';

export type { ScoreRow } from './score-feeds.js';
export type { EngineOptions } from './engine-options.js';

export interface ScoreOptions {
  /** Rows per ONNX Runtime call (rows are grouped by length first). Default 8. */
  batchSize?: number;
  /** Where the padding goes in a batch; results do not depend on it. Default 'right'. */
  padding?: 'left' | 'right';
}

export interface GenerateOptions {
  /** Default 256; capped to the positions the prompt leaves (./context-limit.ts). */
  maxNewTokens?: number;
  /** 0 (the default) is greedy decoding. */
  temperature?: number;
  /** Nucleus sampling mass, (0, 1]. Default 1 (off). */
  topP?: number;
  /** Seed of the sampling PRNG; the same seed gives the same tokens. Default: random. */
  seed?: number;
  /** Generation stops once the decoded text contains one of these; the text is cut before it. */
  stopStrings?: string[];
  /** Token ids that end generation; default: the model's EOS ids. */
  stopTokenIds?: number[];
  /** Default true. false recomputes the whole sequence every step (slow; a check). */
  useKvCache?: boolean;
  /** Set to 1 (from any thread) to stop after the current token, finish reason 'cancelled' (./batch-decode.ts). */
  stopFlag?: Int32Array;
  /**
   * Default true. false leaves `text` empty unless a stop string cut it: a caller holding the
   * tokenizer (LocalModel) decodes the tokens itself, so the engine need not load one.
   */
  decodeText?: boolean;
  /**
   * Continue the decode cache the engine's last call with this option left, as far as each
   * prompt begins the same way, and leave this call's for the next (./carried-rows.ts): a chat's
   * next message, or the next batch of contexts from the same conversations, prefills only what
   * is new. Default false. Costs the memory of that cache between calls (for REUSE_KEEP_MS at most).
   */
  reusePrefix?: boolean;
}

export type { FinishReason, GeneratedTokens } from './batch-decode.js';

/** A batch's options: a generation's, and the cache rows it may continue and leaves its own in (./carried-rows.ts; in process only). */
export type BatchOptions = Omit<GenerateOptions, 'seed'> & { carry?: CarriedRows };

/** One prompt of a batch and the seeds of its sequences: one sequence per seed. */
export interface BatchPrompt {
  promptIds: number[];
  seeds: number[];
  /** This prompt's budget, when it differs from the options' (capped to its positions left). */
  maxNewTokens?: number;
}

type Feeds = Record<string, ort.Tensor>;
type Runner = (feeds: Feeds) => Promise<ort.InferenceSession.OnnxValueMapType>;

/** The graphs an engine builds. */
type Graphs = 'score' | 'generate' | 'decode_chunk';

export class ModelEngine {
  readonly config: ModelConfig;
  private loadedTokenizer?: ChatTokenizer;
  private readonly eosTokenIds?: readonly number[];
  private readonly weights: WeightSource;
  private readonly sessionConfig: SessionConfig;
  /** The fp32 weights' identity, for the drift measure's fp32 graph beside quantised ones. */
  private readonly fp32Identity?: string;
  /** Built sessions by graph and attention chunk count (0: in one piece). */
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();
  /** The EP sessions were created on; undefined until the first session exists. */
  executionProvider?: Device;
  /** The --quantize choice the sessions are built with. */
  readonly quantize: Quantize;
  /** The adapter shape the graphs take as inputs, when built with `lora`. */
  readonly lora?: LoraShape;
  /** Every LoRA pair of the graphs (empty without `lora`). */
  readonly loraSpecs: readonly LoraSpec[];
  /** The LoRA inputs fed on every run: the last `setLora` weights, zeros before (./lora-feeds.ts). */
  private readonly loraFeeds?: LoraFeeds;
  /** The decode cache the last call with `reusePrefix` left, which the next continues as far as it can. */
  private readonly lastReply = new CarriedRows();
  private readonly attentionChunking?: AttentionChunking;
  private readonly prefillPiece: number;
  /** The fused ops its inference graphs use (./ort-session.ts, INFERENCE_FUSIONS). */
  private readonly fusions: InferenceFusions;
  /** The precision of the base's projections; fp32 graphs are built for quantised engines whatever this says (MatMulNBits has its own weights). */
  readonly precision: Precision;
  /** The graphs that keep the decode cache and LoRA inputs on the GPU (WebGPU); undefined: host memory. */
  private readonly deviceCache?: DeviceGraphs;
  /** Makes the decode cache generation and `scoreIncremental` use. */
  private readonly newCache: DecodeCacheFactory;
  /** Whether generation runs the decode chunk graph (EngineOptions.decodeInGraph). */
  private readonly decodeInGraph: boolean;
  /** The host decode cache's values (EngineOptions.cachePrecision). */
  readonly cachePrecision: 'fp32' | 'fp16';

  private constructor(readonly dir: string, checkpoint: Checkpoint, options: EngineOptions) {
    this.config = checkpoint.config;
    this.eosTokenIds = options.eosTokenIds && [...options.eosTokenIds];
    this.weights = checkpointWeights(checkpoint);
    this.quantize = options.quantize ?? 'none';
    const share = options.shareWeights !== false;
    this.fp32Identity = share ? checkpoint.identity() : undefined;
    this.sessionConfig = {
      device: options.device ?? 'cpu', threads: options.threads, cacheDir: options.cacheDir, externalData: options.externalData,
      // Quantised weights are another file than the fp32 ones (which the training step shares).
      sharedWeights: share ? checkpoint.identity(this.quantize === 'none' ? undefined : this.quantize) : undefined,
      prepack: options.prepack, graphCache: options.graphCache, keepGraph: true,
    };
    this.attentionChunking = options.attentionChunking;
    this.prefillPiece = options.prefillPiece ?? PREFILL_PIECE;
    this.fusions = { ...inferenceFusions(this.sessionConfig.device), ...options.fusions };
    this.precision = options.precision ?? defaultPrecision(this.sessionConfig.device);
    if (!(Number.isInteger(this.prefillPiece) && this.prefillPiece >= 1)) throw new UserError(`prefillPiece must be a whole number ≥ 1, got ${options.prefillPiece}`);
    const cache = decodeCachePlacement(options, this.sessionConfig.device);
    if (cache.onDevice) this.deviceCache = new DeviceGraphs(this.config, this.sessionConfig);
    this.decodeInGraph = cache.inGraph;
    this.cachePrecision = cache.precision;
    this.newCache = (rows, reserve) => this.deviceCache?.empty(rows) ?? KvCache.empty(this.config, rows, reserve, this.cachePrecision);
    this.lora = options.lora && { ...options.lora, targets: [...options.lora.targets] };
    this.loraSpecs = this.lora ? loraSpecs(this.config, this.lora.targets) : [];
    if (this.lora) this.loraFeeds = new LoraFeeds(this.loraSpecs, this.lora.r, this.deviceCache && ((feeds) => this.deviceCache!.upload(feeds)));
  }

  /**
   * Opens the checkpoint and tokenizer; checks the device now, builds sessions on first use.
   * `tokenizer`: the checkpoint's, from a caller in this thread that has loaded it already.
   */
  static open(dir: string, options: EngineOptions = {}, tokenizer?: ChatTokenizer): ModelEngine {
    if (options.device) assertDeviceAvailable(options.device);
    // LoRA's branch adds to a quantised projection as to an fp32 one (an on-policy run's rollouts under --quantize, docs/design.md §QLoRA).
    if (options.lora) checkLoraShape(options.lora);
    const engine = new ModelEngine(dir, Checkpoint.open(dir), options);
    engine.loadedTokenizer = tokenizer;
    if (!options.eosTokenIds) void engine.tokenizer; // a bad tokenizer fails the open, not a later call
    return engine;
  }

  /** The checkpoint's tokenizer, loaded on first use when the caller gave its eosTokenIds. */
  get tokenizer(): ChatTokenizer {
    return (this.loadedTokenizer ??= ChatTokenizer.load(this.dir));
  }

  /** The graph generation runs: the decode chunk graph where the engine decodes in the graph. */
  private get generationGraph(): Graphs {
    return this.decodeInGraph ? 'decode_chunk' : 'generate';
  }

  /** Builds the named sessions now (to fail early, or to time loading apart from work). */
  async prepare(which: ('score' | 'generate')[]): Promise<void> {
    await Promise.all(which.map((w) => this.session(w === 'generate' ? this.generationGraph : w)));
  }

  /** The session of graph `which`, with attention in `chunks` query chunks when given (long rows). */
  private session(which: Graphs, chunks?: number): Promise<ort.InferenceSession> {
    const key = `${which}:${chunks ?? 0}`;
    let s = this.sessions.get(key);
    if (!s) {
      const quantize = quantScheme(this.quantize);
      const { fusedLora, ...fusions } = this.fusions, precision = this.precision;
      const linear = this.lora && loraInputHook(this.lora, undefined, fusedLora);
      const named = `${which}${this.lora ? '_lora' : ''}${chunks ? `_chunks${chunks}` : ''}`;
      const graph = which === 'decode_chunk' ? decodeChunkGraph(this.weights, { quantize, linear, ...fusions, precision }, named)
        : which === 'generate' ? decoderGraph(this.weights, { output: 'last_logprobs', kvCache: this.deviceCache ? 'written' : 'appended', halfCache: this.cachePrecision === 'fp16', quantize, linear, ...fusions, precision }, named).graph
        : decoderGraph(this.weights, { output: 'target_logprobs', quantize, linear, attentionChunks: chunks, ...fusions, precision }, named).graph;
      // A chunked fp32 graph reads the mapped weights unpacked: a second packed copy would cost
      // about what chunking saves, and past the chunking length the keys its chunks skip pay
      // for the unpacked matmuls (SCORE_ATTENTION_CHUNKING). MatMulNBits (quantised) is only
      // fast packed, so quantised graphs keep packing.
      const config = chunks && !quantize ? { ...this.sessionConfig, prepack: false }
        : which === 'generate' && this.deviceCache ? { ...this.sessionConfig, deviceOutputs: cacheOutputNames(this.config) }
        : this.sessionConfig;
      s = createSession(graph, config).then(({ session, executionProvider }) => {
        this.executionProvider = executionProvider;
        return session;
      });
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }

  /**
   * The adapter weights every later score and generate runs with (keys and sizes as
   * `loraSpecs`, rank `lora.r`); null: zeros, the base model. A call already running keeps the
   * weights it started with. The arrays are used as they are, not copied: pass new arrays
   * rather than writing into ones a running call may still read.
   */
  setLora(weights: ReadonlyMap<string, Float32Array> | null): void {
    if (!this.loraFeeds) throw new UserError('setLora: this engine was opened without the lora option');
    this.loraFeeds.set(weights);
    // Keys and values computed with the old weights are not this policy's.
    this.lastReply.clear();
  }

  /**
   * Runs `fn` with a runner factory that adds the LoRA inputs current when it starts to every
   * run's feeds: one call, one set of weights, held until the call ends (./lora-feeds.ts).
   */
  private async withLora<T>(fn: (runner: (session: ort.InferenceSession) => Runner) => Promise<T>): Promise<T> {
    const lease = this.loraFeeds?.lease();
    try {
      return await fn((session) => async (feeds) => session.run(lease ? { ...feeds, ...(await lease.feeds()) } : feeds));
    } finally {
      lease?.release();
    }
  }

  private checkIds(ids: number[], where: string): void {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.config.vocabSize) {
        throw new UserError(`${where}: token id ${id} is outside the vocabulary [0, ${this.config.vocabSize})`);
      }
    }
  }

  /** Log-probs of each row's response tokens (docs/design.md §Losses), computed in fp32 in the graph. */
  async score(rows: ScoreRow[], options: ScoreOptions = {}): Promise<number[][]> {
    const batchSize = Math.max(1, options.batchSize ?? 8);
    rows.forEach((r, i) => {
      this.checkIds(r.inputIds, `row ${i + 1}`);
      if (!Number.isInteger(r.responseStart) || r.responseStart < 1 || r.responseStart > r.inputIds.length) {
        throw new UserError(`row ${i + 1}: response_start ${r.responseStart} must be between 1 and the length ${r.inputIds.length}`);
      }
    });
    // Longest first, so each batch pads little; results go back in input order.
    const order = rows.map((_, i) => i).sort((a, b) => rows[b]!.inputIds.length - rows[a]!.inputIds.length || a - b);
    const results: number[][] = new Array(rows.length);
    await this.withLora(async (runner) => {
      for (let k = 0; k < order.length; k += batchSize) {
        const batch = order.slice(k, k + batchSize);
        const chunks = attentionChunksFor(rows[batch[0]!]!.inputIds.length, this.attentionChunking ?? SCORE_ATTENTION_CHUNKING);
        const lp = await scoreRows(runner(await this.session('score', chunks)), batch.map((i) => rows[i]!), options.padding ?? 'right');
        batch.forEach((i, j) => (results[i] = lp[j]!));
      }
    });
    return results;
  }

  /**
   * How far this engine's quantised log-probs lie from fp32 ones on a fixed text (./quant-drift.ts);
   * undefined without quantisation. Builds an fp32 score session for the measure and releases it.
   * `textIds`: the text's ids from a caller holding the tokenizer (else this engine's encodes it).
   */
  async quantizationDrift(textIds?: readonly number[]): Promise<QuantDrift | undefined> {
    if (this.quantize === 'none') return undefined;
    const quantised = await this.session('score');
    const fp32Config = { ...this.sessionConfig, sharedWeights: this.fp32Identity };
    const { session: fp32 } = await createSession(decoderGraph(this.weights, { output: 'target_logprobs', fusedScores: fusesMatMul(fp32Config.device) }, 'score_fp32').graph, fp32Config);
    try {
      const ids = textIds ?? driftTextIds(this.tokenizer);
      return await this.withLora((runner) => measureDrift(ids, this.config.maxPositionEmbeddings, (row, s) => scoreRows(runner(s), [row]).then((r) => r[0]!), quantised, fp32));
    } finally {
      await fp32.release();
    }
  }

  /**
   * The same log-probs as {@link score}, through the KV-cache decode path: the prefix up to
   * `prefill` tokens in one step, then one token per step. A reference for tests; slow.
   */
  async scoreIncremental(row: ScoreRow, prefill = row.responseStart): Promise<number[]> {
    this.checkIds(row.inputIds, 'row');
    if (prefill < 1 || prefill > row.responseStart) throw new UserError(`prefill ${prefill} must be in [1, response_start]`);
    if (row.responseStart >= row.inputIds.length) return [];
    const session = await this.session('generate');
    const cache = this.newCache(1);
    const logprobs: number[] = [];
    let fed = 0;
    try {
      await this.withLora(async (runner) => {
        const run = runner(session);
        while (fed < row.inputIds.length - 1) {
          const chunk = row.inputIds.slice(fed, fed === 0 ? prefill : fed + 1);
          const mask = [chunk.map(() => 1)];
          const out = await run(await cache.feeds([chunk], mask));
          await cache.append(out, mask);
          fed += chunk.length;
          if (fed >= row.responseStart) logprobs.push((out.last_logprobs!.data as Float32Array)[row.inputIds[fed]!]!);
        }
      });
    } finally {
      cache.dispose();
    }
    return logprobs;
  }

  /** Generates from `promptIds` (batch 1). `onToken` sees each token as it is chosen. */
  async generate(promptIds: number[], options: GenerateOptions = {}, onToken?: (token: number, logprob: number) => void): Promise<GeneratedTokens> {
    const seed = options.seed ?? Math.floor(Math.random() * 2 ** 32);
    const [[out]] = await this.generateBatch([{ promptIds, seeds: [seed] }], options, onToken && ((_, token, logprob) => onToken(token, logprob)));
    return out!;
  }

  /**
   * Generates every prompt's sequences in one batch (./batch-decode.ts): one prefill for all
   * prompts, shared by each prompt's sequences. Sequence j of a prompt samples with
   * `seeds[j]` and gives the tokens `generate` gives with that seed. Results per prompt, per seed.
   */
  async generateBatch(prompts: BatchPrompt[], options: BatchOptions = {}, onToken?: (sequence: number, token: number, logprob: number) => void): Promise<GeneratedTokens[][]> {
    const temperature = options.temperature ?? 0;
    const topP = options.topP ?? 1;
    if (!(temperature >= 0)) throw new UserError(`temperature must be ≥ 0, got ${temperature}`);
    if (!(topP > 0 && topP <= 1)) throw new UserError(`top-p must be in (0, 1], got ${topP}`);
    const requests = prompts.flatMap((p, i) => {
      if (p.promptIds.length === 0) throw new UserError('generate: the prompt is empty (no tokens)');
      this.checkIds(p.promptIds, 'prompt');
      // The same rule LocalModel applies before it calls the worker; here too, for direct users.
      const maxNew = replyBudget(p.promptIds.length, p.maxNewTokens ?? options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS, this.config.maxPositionEmbeddings);
      return p.seeds.map((seed) => ({ prompt: i, seed, maxNew }));
    });
    if (!requests.length) return prompts.map(() => []);
    const useKvCache = options.useKvCache ?? true;
    const inGraph = this.decodeInGraph && useKvCache;
    const session = await this.session(inGraph ? 'decode_chunk' : 'generate');
    const decode = inGraph ? generateInChunks : generateSequences;
    const outs = await this.withLora((runner) => decode(this.config, runner(session), prompts.map((p) => p.promptIds), requests, {
      temperature,
      topP,
      stopIds: new Set(options.stopTokenIds ?? this.eosTokenIds ?? this.tokenizer.eosTokenIds),
      stopStrings: (options.stopStrings ?? []).filter((x) => x.length > 0),
      useKvCache,
      prefillPiece: this.prefillPiece,
      decode: (ids) => this.tokenizer.decode(ids),
      decodeText: options.decodeText ?? true,
      newCache: this.newCache,
      ...(options.stopFlag ? { stopFlag: options.stopFlag } : {}),
      ...(useKvCache && (options.carry || options.reusePrefix) ? { carry: options.carry ?? this.lastReply } : {}),
    }, onToken));
    if (options.reusePrefix) this.lastReply.expireAfter(REUSE_KEEP_MS);
    let k = 0;
    return prompts.map((p) => p.seeds.map(() => outs[k++]!));
  }

  async close(): Promise<void> {
    this.lastReply.clear();
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const s of sessions) await (await s.catch(() => undefined))?.release();
    this.loraFeeds?.dispose();
    await this.deviceCache?.close();
  }
}
