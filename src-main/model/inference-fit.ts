/**
 * The form a model's weights take to answer (docs/design.md §Memory for inference): checked
 * against the machine's memory before a load, so that a model too big in fp32 is not loaded
 * into swap or the kernel's OOM killer. Every load goes through it: LocalModel.load's (the Chat
 * page, `/v1`, the local judge, evaluation replays, the token view, `generate`, `score`), and
 * those that open an engine or a scorer themselves (`score --adapter`, `rollout`, evaluation's
 * likelihood measure).
 *
 * - `auto` (every load's default): the most exact form that fits, fp32 (fp16 on CUDA), then int8,
 *   then int4 (src-shared/inference-memory.ts fittingForm), in the host's memory and, on CUDA, in
 *   the card's (read by the caller: ./gpu-memory.ts, FitRequest.gpu). A small model keeps fp32, exactly as before;
 *   Qwen3-8B on a 16 GB laptop answers in int4 (about 7.5 GB with a 4,096-token chat) where fp32
 *   would need 33 GB. A load that had to leave fp32 says so (InferenceFit.note).
 * - a form asked for (`--quantize none|int8|int4`): loaded as asked if it fits, else refused in
 *   one line naming the forms that would fit.
 * - nothing fits, not even int4: refused in one line with what it needs and what there is.
 * `ignoreMemory` (the CLI's --ignore-memory) loads regardless: `auto` then takes int4.
 *
 * The form is chosen for a chat of 4,096 tokens (INFERENCE_CONTEXT); the decode cache grows with
 * the chat, so the fit also says how long a chat fits beside the weights (`context.tokens`, up to
 * the model's positions): a model loaded with room for 12,000 tokens refuses a longer prompt in one
 * line (LocalModel.maxPositions) rather than growing into swap or the OOM killer mid-chat. On
 * the CPU, where an fp32 cache would hold fewer tokens than the model's positions, the cache is
 * held in fp16 (`context.cachePrecision`: chats twice as long; ./kv-cache.ts).
 */
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { cudaInferenceBytes, estimateInferenceMemory, fittingChat, fittingForm, fitsRoom, formName, INFERENCE_FORMS, type CachePrecision, type InferenceEstimate, type InferenceLoad } from '../../src-shared/inference-memory.js';
import { formatBytes, type GpuMemory, type HostMemory } from '../../src-shared/memory-verdict.js';
import { loraParameters, SLOT_BLOCK, type ModelShape } from '../../src-shared/train-memory.js';
import type { LoraTarget } from '../../src-shared/training.js';
import type { CatalogModel } from '../../src-shared/models-api.js';
import { hostMemory, modelShape } from './host-memory.js';
import type { Quantize } from './quantize.js';
import type { Device } from './ort-session.js';

/** A load's form: one of the quantisations, or the most exact that fits. */
export type LoadQuantize = Quantize | 'auto';

export interface FitRequest extends Omit<InferenceLoad, 'quantize' | 'loraParameters' | 'cachePrecision'> {
  quantize: LoadQuantize;
  /**
   * The device a LocalModel loads on: on the CPU its decode cache may be fp16 (ChatContext
   * .cachePrecision). Absent: fp32, for callers that open their engine themselves.
   */
  device?: Device;
  /** A live adapter fed beside the base: its rank and targets. */
  lora?: { r: number; targets: readonly LoraTarget[] };
  /** A CUDA load's card as nvidia-smi reads it (./gpu-memory.ts): the load must fit it too; absent or null: the host alone. */
  gpu?: GpuMemory | null;
  /** Load whatever the estimate says. */
  ignoreMemory?: boolean;
  /** Whose words a refusal is in: the flags of a command that has --quantize and --ignore-memory (generate, score), or plain ones. Default 'app'. */
  reader?: 'cli' | 'app';
}

export interface InferenceFit {
  quantize: Quantize;
  /** The request's engines together, in that form, in the host's memory. */
  estimate: InferenceEstimate;
  host: HostMemory;
  /** Why the weights are not fp32 (fp16 on CUDA), where `auto` had to leave it; null otherwise. */
  note: string | null;
  /** How long a chat, and how big a batch of replies, fits beside the weights in that form. */
  context: ChatContext;
}

/** The chats a load answers within (LocalModel.maxPositions, .generateBatch). */
export interface ChatContext {
  /**
   * The longest chat, prompt and reply together: the model's positions, or fewer where a longer
   * chat's decode cache would not fit the memory there is (with `ignoreMemory`, the positions).
   */
  tokens: number;
  /** Where `tokens` is below the model's positions: why, in one line; null otherwise. */
  note: string | null;
  /** The decode cache's values for these chats (EngineOptions.cachePrecision): fp16 where fp32 would hold a shorter chat, on the CPU. */
  cachePrecision: CachePrecision;
  /**
   * Whether a batch of `rows` replies, each row's cache `slots` long, fits beside the weights as
   * the load found the memory (always, with `ignoreMemory`): a batch that does not is generated in
   * parts (the judge's votes, replays' rollouts, `generate --n`).
   */
  fitsBatch(rows: number, slots: number): boolean;
}

/** The form `modelPath` loads in on this machine now (see the module comment); throws a UserError when it does not fit. */
export function fitInference(modelPath: string, request: FitRequest, env: NodeJS.ProcessEnv = process.env): InferenceFit {
  const { quantize: asked, ignoreMemory, reader, lora, gpu, device, ...rest } = request;
  const shape = modelShape(modelPath);
  const load = { ...rest, loraParameters: lora ? loraParameters(shape, lora.r, lora.targets) : 0 };
  const host = hostMemory(env);
  const room = { host: host.availableBytes, gpu: gpu?.freeBytes ?? null };
  const word = (q: Quantize) => formName(q, load.precision);
  // What a load needs where it is shortest of room: the card where it does not fit there, else the host.
  const needOf = (l: InferenceLoad) => {
    const onCard = gpu ? cudaInferenceBytes(shape, l) : 0;
    return gpu && onCard > gpu.freeBytes ? { bytes: onCard, where: 'gpu' as const } : { bytes: estimateInferenceMemory(shape, l).total, where: 'host' as const };
  };
  const need = (q: Quantize) => needOf({ ...load, quantize: q });
  const about = (q: Quantize) => {
    const { bytes, where } = need(q);
    return `about ${formatBytes(bytes)}${where === 'gpu' ? ' on the GPU' : ''}`;
  };
  const roomFor = (where: 'gpu' | 'host') => where === 'gpu' && gpu
    ? `the GPU (${gpu.name}) has ${formatBytes(gpu.freeBytes)} free of ${formatBytes(gpu.totalBytes)}`
    : `this machine has ${formatBytes(host.availableBytes)} available of ${formatBytes(host.totalBytes)}${host.source === 'budget' ? ' (HINDSIGHT_MEMORY_BUDGET)' : ''}`;
  const name = path.basename(modelPath);
  const cli = reader === 'cli';
  const anyway = cli ? ', or --ignore-memory to load it anyway' : '';
  if (asked === 'auto') {
    const quantize = fittingForm(shape, room, load) ?? (ignoreMemory ? 'int4' : null);
    if (!quantize) {
      throw new UserError(`${name} needs ${about('int4')} to answer even with int4 weights, but ${roomFor(need('int4').where)}: close other programs or use a smaller model${anyway}.`);
    }
    const note = quantize === 'none' ? null
      : `${word(quantize)} weights: ${word('none')} would need ${about('none')}${quantize === 'int4' ? ` and int8 ${about('int8')}` : ''}; ${roomFor(need('none').where)}`;
    return fitted(quantize, note);
  }
  if (!fitsRoom(shape, { ...load, quantize: asked }, room) && !ignoreMemory) {
    const others = INFERENCE_FORMS.filter((q) => q !== asked && fitsRoom(shape, { ...load, quantize: q }, room));
    const flag = (q: Quantize) => (cli ? `--quantize ${q}` : `${word(q)} weights`);
    const suggestion = others.length ? `try ${others.map((q) => `${flag(q)} (${about(q)})`).join(' or ')}` : 'not even int4 fits; close other programs or use a smaller model';
    throw new UserError(`${name} with ${word(asked)} weights needs ${about(asked)}, but ${roomFor(need(asked).where)}: ${suggestion}${anyway}.`);
  }
  return fitted(asked, null);

  /** The fit in form `quantize`, with the longest chat that fits beside it. */
  function fitted(quantize: Quantize, note: string | null): InferenceFit {
    const positions = shape.maxPositionEmbeddings;
    const chat = ignoreMemory ? { tokens: positions, cachePrecision: 'fp32' as const } : fittingChat(shape, { ...load, quantize }, room, device === 'cpu');
    const { tokens, cachePrecision } = chat;
    const chosen = { ...load, quantize, cachePrecision };
    // Where the next block would not fit.
    const contextNote = tokens >= positions ? null
      : `chats up to ${count(tokens)} tokens of the model's ${count(positions)}${cachePrecision === 'fp16' ? ' (its cache in fp16)' : ''}: a longer chat's cache would not fit; ${roomFor(needOf({ ...chosen, contextTokens: tokens + SLOT_BLOCK }).where)}`;
    const fitsBatch = (rows: number, slots: number) => !!ignoreMemory || fitsRoom(shape, { ...chosen, rows, contextTokens: slots }, room);
    return { quantize, estimate: estimateInferenceMemory(shape, chosen), host, note, context: { tokens, note: contextNote, cachePrecision, fitsBatch } };
  }
}

const count = (n: number) => n.toLocaleString('en-US');

/**
 * How a model would answer on this machine's CPU now, for the model lists (`hindsight models`,
 * the pages' model fields): the form `auto` takes, what it needs, and the longest chat that fits
 * beside it; or, where not even int4 fits (`form` null), what int4 would need.
 */
export function answersHere(shape: ModelShape, env: NodeJS.ProcessEnv = process.env): NonNullable<CatalogModel['answers']> {
  const room = { host: hostMemory(env).availableBytes, gpu: null };
  const form = fittingForm(shape, room);
  const bytes = estimateInferenceMemory(shape, { quantize: form ?? 'int4' }).total;
  return { form, bytes, contextTokens: form ? fittingChat(shape, { quantize: form }, room, true).tokens : null };
}
