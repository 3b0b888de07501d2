/**
 * What a fine-tune will need in memory, before it starts (issue 31): the frozen weights in
 * the run's storage, the LoRA weights with their gradients and optimizer state, the
 * activations of one step at the run's max length and batch size, the loss's logits path,
 * the teacher's forward pass, the runtime itself, and an on-policy run's rollouts' decode cache
 * ({@link rolloutCacheBytes}). `hindsight train` prints it beside the
 * machine's memory and refuses a run that cannot fit; the Training page shows it live and the
 * API refuses the same way (docs/design.md §Memory estimate). Node-free: the page computes it
 * as the form changes, from the model's shape and the host's memory the API gives it.
 *
 * It is an estimate of the peak resident memory of the CPU step, for rows as long as the max
 * length (a batch is padded to its longest row, and a run's longest rows set its peak): its RSS
 * with the weight file's pages counted once. Every session of the process maps that one file
 * and RSS counts its pages once per mapping, so with the teacher's session beside the step's
 * RSS shows the weights twice while memory holds them once (docs/design.md §Memory estimate).
 * Its structure follows what the step holds (docs/design.md §Memory); its coefficients are
 * fitted to the peaks the benches measure (the Qwen3-0.6B shape at 1,024 to 8,192 tokens and
 * int8 / int4, the Qwen3-8B shape in int4, a 68M Qwen3 shape with the real vocabulary at several
 * lengths, batch sizes and quantisations), and test/train/train-memory.test.ts holds it
 * within {@link ESTIMATE_MARGIN} under and {@link ESTIMATE_MARGIN_OVER} over them.
 */
import { defaultMaxLength, defaultPrecision, recomputeOn, LORA_TARGETS, TRAIN_DEFAULTS, type LoraTarget, type OptimizerKind, type Precision, type Quantize, type RecomputeMode, type TrainDevice } from './training.js';
import type { TrainConfig } from './training-api.js';

/** What the estimate reads of a model: its config.json's shape (ModelConfig, src-main/model/model-config.ts). */
export interface ModelShape {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  tieWordEmbeddings: boolean;
  maxPositionEmbeddings: number;
  /**
   * Attention's scores soft-capped (Gemma 2, ModelConfig.gemma.attentionSoftcap): the backward
   * pass keeps the cap's tanh beside the probabilities, one more [heads, rows, T] value a layer.
   */
  softcappedAttention?: boolean;
}

/** The settings of a run that its memory depends on. */
export interface MemoryRun {
  /** Tokens per row: the run's max length (rows are padded to the batch's longest). */
  maxLength: number;
  /** Rows of one optimizer update (the batch, or a PPO minibatch). */
  batchSize: number;
  /**
   * Rows per pass of the step (gradient accumulation, docs/design.md §Micro-batches): what the
   * activations are priced at. Unset: {@link memoryVerdict} chooses the most that fit
   * ({@link chooseMicroBatch}); {@link estimateTrainMemory} prices the whole batch in one pass.
   */
  microBatch?: number;
  loraR: number;
  targets: readonly LoraTarget[];
  quantize: Quantize;
  recompute: RecomputeMode;
  optimizer: OptimizerKind;
  /**
   * A forward pass of the base beside the step: the teacher (a method that reads the hint: opd,
   * combine), the KL reference, or the held-out evaluation (which the app's runs have).
   */
  teacher: boolean;
  /** Where the step runs; on a GPU the activations live in its memory, not the host's. Default cpu. */
  device?: TrainDevice;
  /** The base's arithmetic (fp16 halves the projections' memory); default fp32. */
  precision?: Precision;
  /** The process holds the model's tokenizer (a run does; the benches' bare steps do not); default true. */
  tokenizer?: boolean;
  /** An on-policy run's rollouts, generated beside the step ({@link rolloutsOf}); absent for an offline run. */
  rollouts?: RolloutBatch;
}

/**
 * What an on-policy step generates at once (src-main/rollout/manager.ts: every running episode
 * of every context in one `generateBatch` per turn): its decode cache is what the rollouts hold.
 */
export interface RolloutBatch {
  /** Sequences decoded together: contexts per step × rollouts (a turn's episodes; never more). */
  sequences: number;
  /**
   * Prompts prefilled before them: the step's contexts. A prompt's cache is prefilled once and
   * then copied to each of its sequences (src-main/model/batch-decode.ts), and the prompts' cache
   * is garbage from then on, which the garbage collector need not free before the sequences end.
   */
  prompts: number;
  /**
   * Assistant turns an episode may take (maxTurns): past one, a later turn prefills a tool's
   * turn for every sequence that goes on (see {@link rolloutCacheBytes}).
   */
  turns: number;
}

/** The estimate in bytes, by part. */
export interface MemoryEstimate {
  /**
   * The frozen base as the step stores it (fp32, fp16 projections, or int8 / int4 blocks with
   * fp16 tables), less an untied model's embedding table: the step reads it only at the rows
   * it gathers, so its other pages of the mapped weight file are never resident.
   */
  weights: number;
  /** LoRA's weights, their gradients and the optimizer's state (AdamW: two moments), as the step passes them in and out. */
  lora: number;
  /** The decoder's activations of one step (what recomputation keeps down) and its gradients. */
  activations: number;
  /** The loss's path through the LM head: reply positions × vocabulary chunks, never [T, V]. */
  logits: number;
  /** The teacher's (or KL reference's) forward pass: its own session's buffers. */
  teacher: number;
  /** Node, ONNX Runtime, the tokenizer and the allocator's slack. */
  runtime: number;
  /**
   * An on-policy run's rollouts (MemoryRun.rollouts): the generation engine's decode cache, its
   * sequences' and its prompts' rows of {@link rolloutRow} each ({@link rolloutCacheBytes}); 0 for
   * an offline run. In host memory on the CPU and CUDA (onnxruntime-node keeps CUDA's cache in
   * the host: src-main/model/kv-cache.ts), on the GPU on WebGPU (device-kv-cache.ts).
   */
  rolloutCache: number;
  /** One sequence's decode cache at the run's max length (0 for an offline run): what a CUDA chunk run takes to the card per row. */
  rolloutRow: number;
  total: number;
  /** Whether the run recomputes activations (src-shared/training.ts recomputeOn). */
  recompute: boolean;
  /** Whether `activations`, `logits` and `teacher` are on a GPU (device cuda / webgpu): then the host needs weights, lora and runtime (and CUDA's rollout cache). */
  onGpu: boolean;
  /** What the host's memory must hold: total on the CPU, less what a GPU holds. */
  host: number;
}

/** How far the estimate may be under a measured peak (the test holds it to this). */
export const ESTIMATE_MARGIN = 0.2;
/**
 * How far it may be over one: more, since over only refuses a run early. The fit favours the
 * real shapes; at the 68M shape 4,096 tokens peaked at 1,092–1,646 MB by how they were split into
 * rows, which one linear form cannot follow (docs/design.md §Memory estimate).
 */
export const ESTIMATE_MARGIN_OVER = 0.35;
/**
 * The margin for the figures the README quotes (the Qwen3-0.6B shape at 1,024, 2,048 and 8,192
 * tokens, the Qwen3-8B shape in int4 at 2,048), which the estimate must not be under either.
 */
export const ESTIMATE_MARGIN_QUOTED = 0.1;

// ── What the step is built with (mirrored from src-main, where these are defined; the test
//    checks they agree) ────────────────────────────────────────────────────────────────────

/** src-main/model/quantize.ts QUANT_BLOCK_SIZE: weights per MatMulNBits block. */
export const QUANT_BLOCK = 128;
/**
 * src-main/model/attention.ts ATTENTION_CHUNKING: attention in chunks of 1,024 query rows past
 * 2,048 tokens, or past 256 MiB per layer's fp32 [heads, T, T] value.
 */
export const ATTENTION_CHUNK_ROWS = 1024;
export const ATTENTION_CHUNK_ABOVE = 2048;
export const ATTENTION_CHUNK_SCORE_BYTES = 256 * 2 ** 20;
/** src-main/model/chunked-head.ts DEFAULT_VOCAB_CHUNK: the loss's head runs over this many vocabulary rows at a time. */
export const VOCAB_CHUNK = 8192;
/** src-main/model/cache-slots.ts SLOT_BLOCK: the decode cache's slots grow in blocks of this many. */
export const SLOT_BLOCK = 32;
/** src-main/model/batch-decode.ts PREFILL_PIECE: prompt tokens per row a prefill run feeds. */
export const PREFILL_PIECE = 512;
/**
 * The most prompt tokens one prefill step feeds over all its rows (src-main/model/batch-decode.ts
 * prefillInPieces). A step's new keys and values and its attention scores grow with rows × piece:
 * an on-policy run's later turn prefills a tool's turn for every sequence (16 at the defaults;
 * a tool's result may be 4,000 characters), 8,192 tokens a step at 512 a row, whose new keys and
 * values alone are 1.8 GB at the Qwen3-0.6B shape. Capped, a step of many rows takes fewer tokens
 * of each; one to four rows (a chat, a judge's prompts, an on-policy run's first turn) keep
 * {@link PREFILL_PIECE}.
 */
export const PREFILL_STEP_TOKENS = 2048;

/** Prompt tokens per row in one prefill step of `rows` rows: `piece`, fewer when the rows would pass {@link PREFILL_STEP_TOKENS}. */
export const prefillPieceFor = (rows: number, piece: number): number => Math.max(1, Math.min(piece, Math.floor(PREFILL_STEP_TOKENS / rows)));

/**
 * Prompt tokens per row in a prefill step whose queries read `keys` keys (the cache's and the
 * step's own) in a model of `heads` query heads: {@link prefillPieceFor}'s, fewer where one copy
 * of the step's fp32 attention scores [rows, heads, piece, keys] would pass
 * {@link ATTENTION_CHUNK_SCORE_BYTES}, as a scored row's attention chunks are held. A long chat's
 * next message otherwise held scores the size of the cache itself beside it (Qwen3-8B at 16,384
 * tokens: 1 GB a copy for a piece of 512, four copies alive); the piece shrinks with the chat
 * (256 there at 8,192 keys, 128 at 16,384), and a step's weights, read once a step, cost little
 * beside its matmuls at those lengths.
 */
export const prefillPieceAt = (rows: number, piece: number, heads: number, keys: number): number =>
  Math.max(1, Math.min(prefillPieceFor(rows, piece), Math.floor(ATTENTION_CHUNK_SCORE_BYTES / (4 * rows * heads * keys))));

// ── The fitted coefficients (see the module comment) ───────────────────────────────────────

export const COEFFICIENTS = {
  /** Node and ONNX Runtime, bytes. */
  runtime: 110 * 2 ** 20,
  /** The embedding table's fp32 size again, times this (measured: what grows with the vocabulary beside the weights). */
  tableCopies: 0.23,
  /** The tokenizer in JavaScript, bytes per vocabulary entry (Qwen's 151,936: about 135 MB; docs/design.md §Memory). */
  tokenizerPerToken: 900,
  /** With recomputation: copies of one layer's per-token values alive in its backward pass. */
  layerCopies: 3.1,
  /** With recomputation: copies of one layer's attention scores ([heads, rows, T]) alive at once. */
  attentionCopies: 3.3,
  /** Without recomputation: copies of every layer's per-token values kept for the backward pass. */
  keptLayerCopies: 1.3,
  /** Without recomputation: copies of every layer's attention scores kept. */
  keptAttentionCopies: 1.25,
  /**
   * The loss's log-sum-exp over vocabulary chunks: copies of one chunk's [reply tokens, C]
   * values (logits, exponentials and what their products and sums read) alive at once. The
   * chunks run one after another, each freed before the next (docs/design.md §Memory), so this
   * does not grow with the vocabulary.
   */
  vocabChunkCopies: 3,
  /**
   * The teacher's forward pass (and the held-out evaluation's and the KL reference's: the same
   * session), which reads the weights from the step's mapped file, so no copy of them: its
   * session and what its arena keeps, bytes, and copies of one layer's per-token values and of
   * its attention scores (the pass scores every position, its head one vocabulary chunk at a time).
   */
  teacherRuntime: 96 * 2 ** 20,
  teacherLayerCopies: 0.05,
  teacherAttentionCopies: 0,
} as const;

/** The in and out features of each LoRA target. */
export function targetDims(shape: ModelShape, target: LoraTarget): [number, number] {
  const H = shape.hiddenSize, q = shape.numHeads * shape.headDim, kv = shape.numKvHeads * shape.headDim, I = shape.intermediateSize;
  switch (target) {
    case 'q': return [H, q];
    case 'k': case 'v': return [H, kv];
    case 'o': return [q, H];
    case 'gate': case 'up': return [H, I];
    case 'down': return [I, H];
  }
}

/** Bytes of an [n, k] weight as MatMulNBits blocks of `bits` (src-main/model/quantize.ts quantizedDims). */
export function quantizedBytes(n: number, k: number, bits: 4 | 8): number {
  const blocks = Math.ceil(k / QUANT_BLOCK);
  return n * blocks * ((QUANT_BLOCK * bits) / 8) + n * blocks * 4 + n * Math.ceil((blocks * bits) / 8);
}

/** One [V, H] table (the embedding, or an untied head) as the step stores it: quantised, its rows are fp16 (src-main/train/step-graph.ts halfTables). */
export function tableBytes(shape: ModelShape, quantize: Quantize): number {
  return shape.vocabSize * shape.hiddenSize * (quantize === 'none' ? 4 : 2);
}

/** The frozen base as the step stores it. */
export function weightBytes(shape: ModelShape, quantize: Quantize, precision: Precision = 'fp32'): number {
  const norms = shape.numLayers * (2 * shape.hiddenSize + 2 * shape.headDim) + shape.hiddenSize;
  let projections = 0;
  for (const t of LORA_TARGETS) {
    const [inF, outF] = targetDims(shape, t);
    projections += quantize === 'none' ? inF * outF * (precision === 'fp16' ? 2 : 4) : quantizedBytes(outF, inF, quantize === 'int8' ? 8 : 4);
  }
  return shape.numLayers * projections + tableBytes(shape, quantize) * (shape.tieWordEmbeddings ? 1 : 2) + norms * 4;
}

/** LoRA's parameter count for rank r on `targets`. */
export function loraParameters(shape: ModelShape, r: number, targets: readonly LoraTarget[]): number {
  return shape.numLayers * targets.reduce((sum, t) => sum + r * targetDims(shape, t).reduce((a, b) => a + b, 0), 0);
}

/**
 * One layer's values per token, in floats: the attention block's (input, its norm, q, k, v,
 * their norms and rotations, k and v repeated over the query heads, the context, the output)
 * and the MLP's (norm, gate, up, the activation, the product, the output), and LoRA's x·A.
 */
function layerFloatsPerToken(shape: ModelShape, r: number, targets: number): number {
  const H = shape.hiddenSize, q = shape.numHeads * shape.headDim, kv = shape.numKvHeads * shape.headDim, I = shape.intermediateSize;
  return 6 * H + 5 * q + 4 * kv + 5 * I + r * targets;
}

/** The longest row whose attention stays in one piece for a model of `heads` query heads (src-main/model/attention.ts chunksAttention). */
export function attentionOnePiece(heads: number): number {
  return Math.max(ATTENTION_CHUNK_ROWS, Math.min(ATTENTION_CHUNK_ABOVE, Math.floor(Math.sqrt(ATTENTION_CHUNK_SCORE_BYTES / (4 * heads)))));
}

/** Query rows of one attention piece at max length T (chunks of 1,024 rows past {@link attentionOnePiece}). */
export function attentionRows(maxLength: number, heads: number): number {
  if (maxLength <= attentionOnePiece(heads)) return maxLength;
  const chunks = Math.ceil(maxLength / ATTENTION_CHUNK_ROWS);
  return Math.ceil((maxLength + chunks) / chunks);
}

/**
 * An on-policy run's decode cache (src-main/model/kv-cache.ts): fp32 keys and values, layers × 2 ×
 * kvHeads × headDim × 4 bytes a slot, every row as long as the run's max length (or the model's
 * positions) in whole blocks. A row's slots are its prompt and what it has generated, and the
 * longest row sets every row's (left-padded to it); a context longer than the max length
 * generates past it (its row is then cut for training), which an estimate cannot know.
 * - One turn: the sequences' rows and their prompts' ({@link RolloutBatch.prompts}). Sequences
 *   that end leave in place (KvCache.select), so nothing more per row is held.
 * - More turns: the next turn continues each sequence's row (src-main/model/carried-rows.ts), in
 *   the last turn's memory when it has room, no bigger, and prefills only a tool's turn; what a
 *   later turn adds is its prefill step's new keys and values for a piece of every row
 *   ({@link PREFILL_PIECE} tokens, fewer past {@link PREFILL_STEP_TOKENS} a step: a tool's result
 *   may be long), held beside the cache until written in, and as much again for the step's own
 *   buffers in ONNX Runtime's arena, which also covers the rows copied out of a batch when their
 *   sequences end before it does.
 * Measured at the Qwen3-0.6B shape's layout, 4 prompts of up to 480 tokens × 4 sequences
 * (bench/rollout-memory.ts, docs/design.md §Memory estimate): 256 new tokens in one turn 3,192 MB
 * above the loaded engine, this 3,220 MB; in two turns of 128 with 16 tokens of a tool's turn
 * between them 3,264 MB continued (3,789–3,886 MB prefilled whole, as before), this 4,256 MB.
 */
export function rolloutCacheBytes(shape: ModelShape, maxLength: number, rollouts: RolloutBatch): { row: number; cache: number } {
  const slots = Math.max(1, Math.ceil(Math.min(maxLength, shape.maxPositionEmbeddings) / SLOT_BLOCK)) * SLOT_BLOCK;
  const slot = shape.numLayers * 2 * shape.numKvHeads * shape.headDim * 4, row = slot * slots;
  const oneTurn = row * (rollouts.sequences + rollouts.prompts);
  const piece = Math.min(prefillPieceFor(rollouts.sequences, PREFILL_PIECE), slots);
  const laterTurn = rollouts.turns > 1 ? 2 * slot * rollouts.sequences * piece : 0;
  return { row, cache: oneTurn + laterTurn };
}

/** The estimate (see the module comment). */
export function estimateTrainMemory(shape: ModelShape, run: MemoryRun, c: Record<keyof typeof COEFFICIENTS, number> = COEFFICIENTS): MemoryEstimate {
  const f = 4; // fp32 bytes
  // A pass holds one micro-batch's activations; the batch's other rows wait as token ids.
  const B = Math.min(run.microBatch ?? run.batchSize, run.batchSize), T = run.maxLength, L = shape.numLayers;
  const accumulates = B < run.batchSize;
  const recompute = recomputeOn(run.recompute, T);
  // Measured at the Qwen3-8B shape (untied): peak RSS 6.89 GB at 1 × 128, with 5.8 GB of weights stored.
  const weights = weightBytes(shape, run.quantize, run.precision) - (shape.tieWordEmbeddings ? 0 : tableBytes(shape, run.quantize));
  // Weights fed in, new weights out, gradients; AdamW's two moments in and out; with
  // micro-batches, the next pass's gradients beside the sum.
  const lora = loraParameters(shape, run.loraR, run.targets) * f * ((run.optimizer === 'adamw' ? 7 : 3) + (accumulates ? 1 : 0));
  const tokens = B * T;
  const layer = layerFloatsPerToken(shape, run.loraR, run.targets.length);
  // One layer's [B, heads, rows, T]. Chunked, the chunks hold less than one piece did at the
  // longest one-piece length, but a chunked layer's extra pass has its own values: counted as no less.
  const onePiece = attentionOnePiece(shape.numHeads);
  const scores = B * shape.numHeads * Math.max(attentionRows(T, shape.numHeads) * T, Math.min(T, onePiece) ** 2);
  // A soft-capped layer's tanh, kept for its gradient: one copy of its scores more, in every layer
  // kept, or in the one layer recomputed at a time (counted from what autodiff keeps, not fitted).
  const capped = shape.softcappedAttention ? 1 : 0;
  // A quantised layer's projection is dequantised for its input gradient, one at a time.
  const dequantised = run.quantize === 'none' ? 0 : Math.max(...LORA_TARGETS.map((t) => targetDims(shape, t).reduce((a, b) => a * b, 1))) * f * 2;
  const activations = recompute
    ? f * (tokens * (L * shape.hiddenSize + c.layerCopies * layer) + (c.attentionCopies + capped) * scores) + dequantised
    : f * (tokens * L * (c.keptLayerCopies * layer) + L * (c.keptAttentionCopies + capped) * scores) + dequantised;
  // The loss gathers the reply positions (about half a row) and runs the head over chunks of the vocabulary.
  const reply = tokens / 2;
  const logits = f * reply * (c.vocabChunkCopies * Math.min(shape.vocabSize, VOCAB_CHUNK) + 2 * shape.hiddenSize);
  const table = shape.vocabSize * shape.hiddenSize * f;
  const teacher = run.teacher ? c.teacherRuntime + f * (tokens * c.teacherLayerCopies * layer + c.teacherAttentionCopies * scores) : 0;
  const runtime = c.runtime + c.tableCopies * table + (run.tokenizer === false ? 0 : c.tokenizerPerToken * shape.vocabSize);
  const rollouts = run.rollouts ? rolloutCacheBytes(shape, T, run.rollouts) : { row: 0, cache: 0 };
  const total = weights + lora + activations + logits + teacher + runtime + rollouts.cache;
  const device = run.device ?? 'cpu', onGpu = device !== 'cpu';
  const host = onGpu ? weights + lora + runtime + (device === 'webgpu' ? 0 : rollouts.cache) : total;
  return { weights, lora, activations, logits, teacher, runtime, rolloutCache: rollouts.cache, rolloutRow: rollouts.row, total, recompute, onGpu, host };
}

/** An on-policy run's rollouts: its contexts per step, each generating `rollouts` sequences over up to `maxTurns` turns. */
export function rolloutsOf(contextsPerStep: number, rollouts: number, maxTurns: number): RolloutBatch {
  return { sequences: contextsPerStep * rollouts, prompts: contextsPerStep, turns: maxTurns };
}

/**
 * The run the Training page's settings make (the trainStart call's TrainConfig): its max length
 * or min(2,048, the model's positions); an on-policy run updates on contexts × rollouts rows at
 * once and generates them first (its rollouts' cache); the forward pass of the teacher or the held-out evaluation beside the step; the
 * recomputation chosen (absent: 'auto', as the step runs it).
 */
export function memoryRunOf(config: Pick<TrainConfig, 'method' | 'batchSize' | 'microBatch' | 'loraR' | 'targets' | 'optimizer' | 'device' | 'maxLength' | 'quantize' | 'precision' | 'recompute' | 'onPolicy'>, shape: ModelShape): MemoryRun {
  return {
    maxLength: config.maxLength ?? defaultMaxLength(shape.maxPositionEmbeddings),
    batchSize: config.onPolicy ? config.onPolicy.contextsPerStep * config.onPolicy.rollouts : config.batchSize,
    ...(config.onPolicy ? { rollouts: rolloutsOf(config.onPolicy.contextsPerStep, config.onPolicy.rollouts, config.onPolicy.maxTurns) } : {}),
    ...(config.microBatch !== undefined ? { microBatch: config.microBatch } : {}),
    loraR: config.loraR,
    targets: config.targets,
    quantize: config.quantize ?? TRAIN_DEFAULTS.quantize,
    recompute: config.recompute ?? TRAIN_DEFAULTS.recompute,
    optimizer: config.optimizer,
    // The app evaluates the held-out split with the same forward session whatever the method.
    teacher: true,
    device: config.device,
    // The Precision the run asked for; absent: the device's default, as the step runs it.
    precision: config.precision ?? defaultPrecision(config.device),
  };
}
