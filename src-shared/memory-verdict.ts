/**
 * The verdict on a run's memory (issue 31, docs/design.md §Memory estimate, §Micro-batches):
 * src-shared/train-memory.ts's estimate set against the host's memory, and a CUDA run's against
 * its GPU's too when that is known; the micro-batch a run goes with (the most rows a pass fits,
 * or the one forced), whether `recompute: 'auto'` recomputes, and the one line that refuses a
 * run that cannot fit even one row at a time, with what would fit, in the words of its reader
 * (the CLI's flags, the Training page's fields, live capture's status). Node-free: the page
 * computes it too.
 */
import { recomputeOn, type Quantize, type RecomputeMode } from './training.js';
import { estimateTrainMemory, type MemoryEstimate, type MemoryRun, type ModelShape } from './train-memory.js';

/** The machine's memory as the back end reads it. */
export interface HostMemory {
  totalBytes: number;
  /** What a new process can use without swapping: Linux's MemAvailable, else the OS's free memory. */
  availableBytes: number;
  /** Where `availableBytes` came from. */
  source: 'MemAvailable' | 'freemem' | 'budget';
  /** HINDSIGHT_MEMORY_BUDGET, when set: the most a run may plan to use (below what the machine has). */
  budgetBytes: number | null;
}

/** A CUDA GPU's memory as nvidia-smi reports it (src-main/model/gpu-memory.ts). */
export interface GpuMemory {
  name: string;
  totalBytes: number;
  /** What nothing on the card uses now: a run's sessions can have at most this. */
  freeBytes: number;
}

/**
 * What a CUDA process holds on the card beside its sessions' buffers: the CUDA context (the
 * provider's kernels, cuBLAS's and cuDNN's handles and workspaces), which nvidia-smi counts as
 * used. Some 0.3–0.5 GB by the cards' generation; not measured alone here (the measured peaks of
 * docs/benchmarks.md "On a GPU" include it), so the larger figure.
 */
export const CUDA_CONTEXT_BYTES = 0.5 * 2 ** 30;

/**
 * What a CUDA run needs in the GPU's memory: the frozen weights once for each session that
 * holds them there (ONNX Runtime's CUDA provider copies a session's initializers to the card:
 * the step's training session, and its forward session for the teacher pass, the KL reference
 * and the held-out evaluation), LoRA with its gradients and optimizer state (fed in every run),
 * the activations, the loss's logits, the teacher pass's buffers, and {@link CUDA_CONTEXT_BYTES}.
 * The activations are the CPU step's fitted figure: at the one measured row (the Qwen3-0.6B
 * shape, 1 × 2,048, no recomputation, an H200) this is 21.8 GB for 18.7 GB measured in fp32
 * and 21.0 for 18.9 in fp16, over by 11–17%, which only refuses a run early.
 *
 * An on-policy run's rollouts add their generation engine's session, which holds the weights on
 * the card once more, and its decode chunk graph's cache (src-main/model/decode-chunk-graph.ts):
 * each run takes the host cache to the card, and its Loop carries the cache grown by a token a
 * step, each step's Concat making the next copy while the last is alive, so about
 * {@link CHUNK_CACHE_COPIES} copies of the sequences' cache. The CUDA arena keeps what it reserved,
 * so this counts beside the step's. Read from the graph, not measured on a card.
 */
export function cudaBytes(e: MemoryEstimate, run: MemoryRun): number {
  const rollouts = run.rollouts ? e.weights + CHUNK_CACHE_COPIES * e.rolloutRow * run.rollouts.sequences : 0;
  return e.weights * (run.teacher ? 2 : 1) + e.lora + e.activations + e.logits + e.teacher + rollouts + CUDA_CONTEXT_BYTES;
}

/** Copies of the sequences' decode cache a CUDA chunk run holds on the card: the one it takes in, the Loop's carried one and the next (see {@link cudaBytes}). */
export const CHUNK_CACHE_COPIES = 3;

/** The room a run must fit in: the host's available bytes, and the CUDA GPU's free bytes where known (else null). */
interface Room {
  host: number;
  gpu: number | null;
}

/** The memories an estimate does not fit in `room`, the GPU first; empty when it fits. */
function shortOf(e: MemoryEstimate, run: MemoryRun, room: Room): ('gpu' | 'host')[] {
  const short: ('gpu' | 'host')[] = [];
  if (room.gpu !== null && cudaBytes(e, run) > room.gpu) short.push('gpu');
  if (e.host > room.host) short.push('host');
  return short;
}

/** The one fit predicate: whether `run` fits the host's room and, where known, the GPU's. */
function fitsRoom(shape: ModelShape, run: MemoryRun, room: Room): boolean {
  return shortOf(estimateTrainMemory(shape, run), run, room).length === 0;
}

/** The bytes a run needs in one memory: the GPU's (cudaBytes) or the host's. */
function bytesIn(memory: 'gpu' | 'host', shape: ModelShape, run: MemoryRun): number {
  const e = estimateTrainMemory(shape, run);
  return memory === 'gpu' ? cudaBytes(e, run) : e.host;
}

/** "3.6 GB", "820 MB": binary units (GiB, MiB) as the benches print them. */
export function formatBytes(bytes: number): string {
  const gib = bytes / 2 ** 30;
  if (gib >= 100) return `${Math.round(gib)} GB`;
  if (gib >= 1) return `${gib.toFixed(1)} GB`;
  return `${Math.max(1, Math.round(bytes / 2 ** 20))} MB`;
}

/** Who reads the line: the CLI names flags, the Training page its fields, live capture's background runs the Settings page's. */
export type MemoryReader = 'cli' | 'app' | 'capture';

/** A change that would make a run fit, with its estimate. */
export interface MemorySuggestion {
  quantize?: Quantize;
  maxLength?: number;
  microBatch?: number;
  /** An on-policy run: one assistant turn an episode, or fewer contexts each step (the rollouts' cache shrinks with both). */
  maxTurns?: number;
  contextsPerStep?: number;
  /** What it would need in the memory that was short: the GPU's when `memory` says so, else the host's. */
  bytes: number;
  memory?: 'gpu';
}

export interface MemoryVerdict {
  /** The estimate at the run's micro-batch (one row when not even one fits). */
  estimate: MemoryEstimate;
  fits: boolean;
  /**
   * Rows per pass the run goes with: the one asked for (--micro-batch), else the most that fit
   * ({@link chooseMicroBatch}), else 1 (a run started anyway).
   */
  microBatch: number;
  /**
   * Whether the step recomputes activations: the run's recompute mode at its max length
   * (recomputeOn), except that `auto` on a CUDA GPU whose memory is known is off when the run
   * fits without it ({@link memoryVerdict}). How the step runs, as the micro-batch is; the run
   * keeps the mode asked for.
   */
  recompute: boolean;
  /** `auto` left recomputation off because the CUDA GPU has room, where the length rule would have turned it on. */
  autoRecomputeOff: boolean;
  /** The GPU's part of the estimate ({@link cudaBytes}) and the card, for a CUDA run whose GPU is known; else null. */
  gpu: { bytes: number; memory: GpuMemory } | null;
  /** Changes that would make the run fit, best first (empty when it fits, or when nothing tried does). */
  suggestions: MemorySuggestion[];
  /** One line: what the run needs beside what the machine has. */
  summary: string;
  /** The refusal, one line, when it does not fit; null when it does. */
  refusal: string | null;
}

/** Rounds a length down to a multiple of 256 (of 16 below 256), never under the smallest max length. */
function roundLength(n: number): number {
  const step = n >= 256 ? 256 : 16;
  return Math.max(16, Math.floor(n / step) * step);
}

/** The longest max length (rounded down) at which the run fits, or null when not even 16 tokens do. */
function longestFitting(shape: ModelShape, run: MemoryRun, room: Room): number | null {
  const fits = (T: number) => fitsRoom(shape, { ...run, maxLength: T }, room);
  if (!fits(16)) return null;
  let lo = 16, hi = run.maxLength;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  const rounded = roundLength(lo);
  return fits(rounded) ? rounded : lo;
}

/**
 * A max length shorter than this is not offered as the way to fit: it would cut most chats to
 * their last reply. (A run asked for less than this is offered at most half its length.)
 */
export const SHORTEST_SUGGESTED_LENGTH = 512;

/**
 * The rows per pass of the training step (gradient accumulation, docs/design.md §Micro-batches)
 * that the estimate fits in `room`: the fewest passes over the batch whose micro-batch fits, its
 * rows spread evenly (16 rows of which 5 fit go as 4 passes of 4, not 5, 5, 5 and 1: as many
 * passes, less memory); `gpuRoom`, a CUDA GPU's free bytes, must hold it too. The whole batch
 * when it fits; null when not even one row does. The one place the choice is made: the CLI, the
 * app's training service and live capture's background runs ask {@link memoryVerdict}, which
 * asks this.
 */
export function chooseMicroBatch(shape: ModelShape, run: MemoryRun, hostRoom: number, gpuRoom: number | null = null): number | null {
  return chooseIn(shape, run, { host: hostRoom, gpu: gpuRoom });
}

function chooseIn(shape: ModelShape, run: MemoryRun, room: Room): number | null {
  for (let rows = run.batchSize; rows >= 1; rows--) {
    if (!fitsRoom(shape, { ...run, microBatch: rows }, room)) continue;
    return Math.ceil(run.batchSize / Math.ceil(run.batchSize / rows));
  }
  return null;
}

/** "batch 16 as 4 micro-batches of 4", "batch 16 as 6 micro-batches of 3, the last of 1"; null when the batch is one pass. */
export function microBatchText(batchSize: number, microBatch: number): string | null {
  if (microBatch >= batchSize) return null;
  const passes = Math.ceil(batchSize / microBatch), last = batchSize - (passes - 1) * microBatch;
  return `batch ${n(batchSize)} as ${passes} micro-batches of ${n(microBatch)}${last < microBatch ? `, the last of ${n(last)}` : ''}`;
}

/**
 * When not even one row fits: for an on-policy run first what shrinks its rollouts' cache and
 * keeps the model and its context whole (one turn an episode; the most contexts a step that
 * fit, each with its rollouts); then int4 alone; a shorter max length alone, when it still holds
 * a chat ({@link SHORTEST_SUGGESTED_LENGTH}; not for live capture, whose runs take the model's
 * length); then int4 with a shorter length. At most three, each one row at a time.
 */
function suggestionsFor(shape: ModelShape, run: MemoryRun, room: Room, short: 'gpu' | 'host', reader: MemoryReader): MemorySuggestion[] {
  const out: MemorySuggestion[] = [];
  const one = { ...run, microBatch: 1 };
  const fits = (change: Partial<MemoryRun>) => fitsRoom(shape, { ...one, ...change }, room);
  const at = (change: Partial<MemoryRun>) => bytesIn(short, shape, { ...one, ...change });
  const floor = Math.min(SHORTEST_SUGGESTED_LENGTH, Math.floor(run.maxLength / 2));
  const length = (r: MemoryRun) => {
    if (reader === 'capture') return null;
    const t = longestFitting(shape, r, room);
    return t !== null && t < r.maxLength && t >= floor ? t : null;
  };
  const rollouts = run.rollouts;
  if (rollouts) {
    const oneTurn = { rollouts: { ...rollouts, turns: 1 } };
    if (rollouts.turns > 1 && fits(oneTurn)) out.push({ maxTurns: 1, bytes: at(oneTurn) });
    const perContext = rollouts.sequences / rollouts.prompts;
    for (let contexts = rollouts.prompts - 1; contexts >= 1; contexts--) {
      const fewer = { batchSize: Math.min(run.batchSize, contexts * perContext), rollouts: { ...rollouts, prompts: contexts, sequences: contexts * perContext } };
      if (!fits(fewer)) continue;
      out.push({ contextsPerStep: contexts, bytes: at(fewer) });
      break;
    }
  }
  const general: MemorySuggestion[] = [];
  const int4 = run.quantize !== 'int4';
  if (int4 && fits({ quantize: 'int4' })) general.push({ quantize: 'int4', bytes: at({ quantize: 'int4' }) });
  const shorter = length(one);
  if (shorter !== null) general.push({ maxLength: shorter, bytes: at({ maxLength: shorter }) });
  if (int4 && general.length === 0) {
    const shorterQ = length({ ...one, quantize: 'int4' });
    if (shorterQ !== null) general.push({ quantize: 'int4', maxLength: shorterQ, bytes: at({ quantize: 'int4', maxLength: shorterQ }) });
  }
  return [...out, ...general].slice(0, 3).map((s) => (short === 'gpu' ? { ...s, memory: 'gpu' } : s));
}

const n = (x: number) => x.toLocaleString('en-US');

/** How each reader names the settings a refusal offers, how it starts a run anyway, and its recompute mode `auto`. */
const READER_WORDS: Record<MemoryReader, {
  quantize: string; maxLength: string; microBatch: string; maxTurns: string; contextsPerStep: string; run: string; override: string; nothing: string; recomputeAuto: string;
}> = {
  cli: {
    quantize: '--quantize', maxLength: '--max-length', microBatch: '--micro-batch', maxTurns: '--max-turns', contextsPerStep: '--contexts-per-step', run: 'This run', override: ', or --ignore-memory to start anyway',
    nothing: 'no --quantize or --max-length fits it; free memory or use a smaller model', recomputeAuto: '--recompute auto',
  },
  app: {
    quantize: 'Quantize', maxLength: 'Max length', microBatch: 'Micro-batch', maxTurns: 'Max turns', contextsPerStep: 'Contexts per step', run: 'This run', override: ', or tick Start anyway',
    nothing: 'no Quantize or Max length fits it; free memory or choose a smaller model', recomputeAuto: 'Recomputation Auto',
  },
  capture: {
    quantize: 'Base in training', maxLength: '', microBatch: '', maxTurns: '', contextsPerStep: '', run: 'Background training was not started: it', override: '',
    nothing: 'free memory or choose a smaller model', recomputeAuto: 'Recomputation auto',
  },
};

/** A suggestion in the reader's words: "--quantize int4 (about 2.1 GB)", "Max length 512 (about 3.0 GB)". */
function suggestionText(s: MemorySuggestion, reader: MemoryReader): string {
  const w = READER_WORDS[reader], parts: string[] = [];
  if (s.quantize) parts.push(`${w.quantize} ${s.quantize}`);
  if (s.maxLength) parts.push(`${w.maxLength} ${n(s.maxLength)}`);
  if (s.microBatch) parts.push(`${w.microBatch} ${n(s.microBatch)}`);
  if (s.maxTurns) parts.push(`${w.maxTurns} ${n(s.maxTurns)}`);
  if (s.contextsPerStep) parts.push(`${w.contextsPerStep} ${n(s.contextsPerStep)}`);
  return `${parts.join(' with ')} (about ${formatBytes(s.bytes)}${s.memory === 'gpu' ? ' on the GPU' : ''})`;
}

/**
 * The parts of the estimate in one parenthesis: "weights 2.2 GB, activations 1.1 GB at 4 × 2,048
 * tokens a pass (batch 16 as 4 micro-batches of 4), …", with an on-policy run's "rollout cache
 * 3.5 GB for 16 sequences".
 */
export function estimateParts(e: MemoryEstimate, run: MemoryRun): string {
  const rows = Math.min(run.microBatch ?? run.batchSize, run.batchSize), split = microBatchText(run.batchSize, rows);
  const base = `${run.quantize === 'none' ? (run.precision === 'fp16' ? 'fp16' : 'fp32') : run.quantize} weights ${formatBytes(e.weights)}`;
  const lora = `LoRA${run.optimizer === 'adamw' ? ' and AdamW' : ''} ${formatBytes(e.lora)}`;
  const acts = `activations ${formatBytes(e.activations + e.logits + e.teacher)} at ${n(rows)} × ${n(run.maxLength)} tokens${split ? ` a pass (${split})` : ''}${e.recompute ? ' with recomputation' : ''}${run.teacher ? ' and a teacher pass' : ''}${e.onGpu ? ' on the GPU' : ''}`;
  const rollouts = run.rollouts ? `, rollout cache ${formatBytes(e.rolloutCache)} for ${n(run.rollouts.sequences)} sequences${run.device === 'webgpu' ? ' on the GPU' : ''}` : '';
  return `${base}, ${lora}, ${acts}${rollouts}, runtime ${formatBytes(e.runtime)}`;
}

/**
 * `auto` on a CUDA GPU whose memory is known: off when the run (at its micro-batch as asked,
 * else the whole batch in one pass) fits both memories without it, since recomputing costs the
 * step a second forward pass, about a third more time; else the length rule (recomputeOn). The
 * CPU keeps the length rule: its memory is shared with the user's other work, which a step that
 * takes all it can would push into swap, and its runs are long enough for that to matter.
 */
function decidedRecompute(shape: ModelShape, run: MemoryRun, room: Room): RecomputeMode {
  if (run.recompute !== 'auto' || room.gpu === null) return run.recompute;
  return fitsRoom(shape, { ...run, recompute: 'off', microBatch: run.microBatch ?? run.batchSize }, room) ? 'off' : 'auto';
}

/**
 * The estimate against the host's memory, and a CUDA run's against `gpu`, its card's, when that
 * is known (null: no nvidia-smi, or another device; then the host's alone, as before the GPU was
 * read). With it, the micro-batch the run goes with: the one `run.microBatch` asks for, else
 * {@link chooseMicroBatch}'s, so that the batch size, a learning setting, never makes a run not
 * fit; and whether it recomputes ({@link decidedRecompute}). It is refused, in one line in the
 * reader's words naming the memory that is short, only when not even one row at the max length
 * fits (offering int4 and a shorter max length), or when the micro-batch asked for does not fit
 * (offering the one that does). Each choice asks the one fit predicate, {@link fitsRoom}.
 */
export function memoryVerdict(shape: ModelShape, asked: MemoryRun, host: HostMemory, reader: MemoryReader, gpu: GpuMemory | null = null): MemoryVerdict {
  const card = asked.device === 'cuda' ? gpu : null;
  const room: Room = { host: host.availableBytes, gpu: card?.freeBytes ?? null };
  const run = { ...asked, recompute: decidedRecompute(shape, asked, room) };
  const askedRows = run.microBatch === undefined ? undefined : Math.min(run.microBatch, run.batchSize);
  const chosen = chooseIn(shape, run, room);
  const microBatch = askedRows ?? chosen ?? 1;
  const at = { ...run, microBatch };
  const estimate = estimateTrainMemory(shape, at);
  const recompute = estimate.recompute;
  const onCard = card && { bytes: cudaBytes(estimate, at), memory: card };
  const autoRecomputeOff = run.recompute !== asked.recompute && recomputeOn(asked.recompute, run.maxLength);
  const short = shortOf(estimate, at, room);
  const have = `${formatBytes(room.host)} ${host.source === 'budget' ? 'allowed (HINDSIGHT_MEMORY_BUDGET)' : 'available'} of ${formatBytes(host.totalBytes)}`;
  const w = READER_WORDS[reader];
  const summary = onCard
    ? `about ${formatBytes(estimate.host)} in the host's memory and ${formatBytes(onCard.bytes)} on the GPU (${estimateParts(estimate, at)}, CUDA context ${formatBytes(CUDA_CONTEXT_BYTES)}); this machine has ${have}, the GPU (${card.name}) ${formatBytes(card.freeBytes)} free of ${formatBytes(card.totalBytes)}`
      + (autoRecomputeOff ? `; ${w.recomputeAuto} leaves recomputation off: the GPU has room without it` : '')
    : `about ${formatBytes(estimate.total)}${estimate.onGpu ? `, ${formatBytes(estimate.host)} of it in the host's memory` : ''} (${estimateParts(estimate, at)}); this machine has ${have}`;
  const verdict = { estimate, microBatch, recompute, autoRecomputeOff, gpu: onCard, summary };
  if (short.length === 0) return { ...verdict, fits: true, suggestions: [], refusal: null };
  // Asked for more rows a pass than fit, where fewer would: offer those.
  const suggestions: MemorySuggestion[] = askedRows !== undefined && chosen !== null
    ? [{ microBatch: chosen, bytes: bytesIn(short[0]!, shape, { ...run, microBatch: chosen }), ...(short[0] === 'gpu' ? { memory: 'gpu' as const } : {}) }]
    : suggestionsFor(shape, run, room, short[0]!, reader);
  const advice = suggestions.length ? `try ${suggestions.map((s) => suggestionText(s, reader)).join(' or ')}` : w.nothing;
  const rows = askedRows !== undefined && askedRows > 1 ? `${n(askedRows)} rows of ${n(run.maxLength)} tokens a pass (${w.microBatch} ${n(askedRows)})` : `one row of ${n(run.maxLength)} tokens at a time`;
  // An on-policy run's rollouts' cache does not shrink with the step's micro-batch: say it is in.
  const what = run.rollouts ? `${rows}, beside its rollouts' cache for ${n(run.rollouts.sequences)} sequences` : rows;
  const needs = { gpu: onCard && `${formatBytes(onCard.bytes)} on the GPU (${onCard.memory.name})`, host: `${formatBytes(estimate.host)}${short.length > 1 ? " in the host's memory" : ''}` };
  const has = { gpu: card && `the GPU has ${formatBytes(card.freeBytes)} free of ${formatBytes(card.totalBytes)}`, host: `this machine has ${have}` };
  const refusal = `${w.run} needs about ${short.map((m) => needs[m]).join(' and ')} even with ${what}, but ${short.map((m) => has[m]).join(' and ')}: ${advice}${w.override}.`;
  return { ...verdict, fits: false, suggestions, refusal };
}
