/**
 * The verdict on a run's memory (issue 31, docs/design.md §Memory estimate, §Micro-batches):
 * src-shared/train-memory.ts's estimate set against the host's memory, the micro-batch a run goes
 * with (the most rows a pass fits, or the one forced), and the one line that refuses a run that
 * cannot fit even one row at a time, with what would fit, in the words of its reader (the CLI's
 * flags, the Training page's fields, live capture's status). Node-free: the page computes it too.
 */
import type { Quantize } from './training.js';
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
  bytes: number;
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
function longestFitting(shape: ModelShape, run: MemoryRun, room: number): number | null {
  const fits = (T: number) => estimateTrainMemory(shape, { ...run, maxLength: T }).host <= room;
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
 * passes, less memory). The whole batch when it fits; null when not even one row does. The one
 * place the choice is made: the CLI, the app's training service and live capture's background
 * runs ask {@link memoryVerdict}, which asks this.
 */
export function chooseMicroBatch(shape: ModelShape, run: MemoryRun, room: number): number | null {
  for (let rows = run.batchSize; rows >= 1; rows--) {
    if (estimateTrainMemory(shape, { ...run, microBatch: rows }).host > room) continue;
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
 * When not even one row fits: int4 alone; a shorter max length alone, when it still holds a chat
 * ({@link SHORTEST_SUGGESTED_LENGTH}; not for live capture, whose runs take the model's length);
 * then int4 with a shorter length. At most three, each one row at a time.
 */
function suggestionsFor(shape: ModelShape, run: MemoryRun, room: number, reader: MemoryReader): MemorySuggestion[] {
  const out: MemorySuggestion[] = [];
  const one = { ...run, microBatch: 1 };
  const at = (change: Partial<MemoryRun>) => estimateTrainMemory(shape, { ...one, ...change }).host;
  const floor = Math.min(SHORTEST_SUGGESTED_LENGTH, Math.floor(run.maxLength / 2));
  const length = (r: MemoryRun) => {
    if (reader === 'capture') return null;
    const t = longestFitting(shape, r, room);
    return t !== null && t < r.maxLength && t >= floor ? t : null;
  };
  const int4 = run.quantize !== 'int4';
  if (int4 && at({ quantize: 'int4' }) <= room) out.push({ quantize: 'int4', bytes: at({ quantize: 'int4' }) });
  const shorter = length(one);
  if (shorter !== null) out.push({ maxLength: shorter, bytes: at({ maxLength: shorter }) });
  if (int4 && out.length === 0) {
    const shorterQ = length({ ...one, quantize: 'int4' });
    if (shorterQ !== null) out.push({ quantize: 'int4', maxLength: shorterQ, bytes: at({ quantize: 'int4', maxLength: shorterQ }) });
  }
  return out.slice(0, 3);
}

const n = (x: number) => x.toLocaleString('en-US');

/** How each reader names the settings a refusal offers, and how it starts a run anyway. */
const READER_WORDS: Record<MemoryReader, { quantize: string; maxLength: string; microBatch: string; run: string; override: string; nothing: string }> = {
  cli: {
    quantize: '--quantize', maxLength: '--max-length', microBatch: '--micro-batch', run: 'This run', override: ', or --ignore-memory to start anyway',
    nothing: 'no --quantize or --max-length fits it; free memory or use a smaller model',
  },
  app: {
    quantize: 'Quantize', maxLength: 'Max length', microBatch: 'Micro-batch', run: 'This run', override: ', or tick Start anyway',
    nothing: 'no Quantize or Max length fits it; free memory or choose a smaller model',
  },
  capture: {
    quantize: 'Base in training', maxLength: '', microBatch: '', run: 'Background training was not started: it', override: '',
    nothing: 'free memory or choose a smaller model',
  },
};

/** A suggestion in the reader's words: "--quantize int4 (about 2.1 GB)", "Max length 512 (about 3.0 GB)". */
function suggestionText(s: MemorySuggestion, reader: MemoryReader): string {
  const w = READER_WORDS[reader], parts: string[] = [];
  if (s.quantize) parts.push(`${w.quantize} ${s.quantize}`);
  if (s.maxLength) parts.push(`${w.maxLength} ${n(s.maxLength)}`);
  if (s.microBatch) parts.push(`${w.microBatch} ${n(s.microBatch)}`);
  return `${parts.join(' with ')} (about ${formatBytes(s.bytes)})`;
}

/**
 * The parts of the estimate in one parenthesis: "weights 2.2 GB, activations 1.1 GB at 4 × 2,048
 * tokens a pass (batch 16 as 4 micro-batches of 4), …".
 */
export function estimateParts(e: MemoryEstimate, run: MemoryRun): string {
  const rows = Math.min(run.microBatch ?? run.batchSize, run.batchSize), split = microBatchText(run.batchSize, rows);
  const base = `${run.quantize === 'none' ? (run.precision === 'fp16' ? 'fp16' : 'fp32') : run.quantize} weights ${formatBytes(e.weights)}`;
  const lora = `LoRA${run.optimizer === 'adamw' ? ' and AdamW' : ''} ${formatBytes(e.lora)}`;
  const acts = `activations ${formatBytes(e.activations + e.logits + e.teacher)} at ${n(rows)} × ${n(run.maxLength)} tokens${split ? ` a pass (${split})` : ''}${e.recompute ? ' with recomputation' : ''}${run.teacher ? ' and a teacher pass' : ''}${e.onGpu ? ' on the GPU' : ''}`;
  return `${base}, ${lora}, ${acts}, runtime ${formatBytes(e.runtime)}`;
}

/**
 * The estimate against the host's memory, with the micro-batch the run goes with: the one
 * `run.microBatch` asks for, else {@link chooseMicroBatch}'s, so that the batch size, a learning
 * setting, never makes a run not fit. It is refused, in one line in the reader's words, only
 * when not even one row at the max length fits (offering int4 and a shorter max length), or when
 * the micro-batch asked for does not fit (offering the one that does). A run on a GPU is checked
 * for what the host holds (weights, LoRA, runtime); the GPU's own memory is not read here.
 */
export function memoryVerdict(shape: ModelShape, run: MemoryRun, host: HostMemory, reader: MemoryReader): MemoryVerdict {
  const room = host.availableBytes;
  const asked = run.microBatch === undefined ? undefined : Math.min(run.microBatch, run.batchSize);
  const chosen = chooseMicroBatch(shape, run, room);
  const microBatch = asked ?? chosen ?? 1;
  const at = { ...run, microBatch };
  const estimate = estimateTrainMemory(shape, at);
  const fits = estimate.host <= room;
  const have = `${formatBytes(room)} ${host.source === 'budget' ? 'allowed (HINDSIGHT_MEMORY_BUDGET)' : 'available'} of ${formatBytes(host.totalBytes)}`;
  const summary = `about ${formatBytes(estimate.total)}${estimate.onGpu ? `, ${formatBytes(estimate.host)} of it in the host's memory` : ''} (${estimateParts(estimate, at)}); this machine has ${have}`;
  if (fits) return { estimate, fits, microBatch, suggestions: [], summary, refusal: null };
  const w = READER_WORDS[reader];
  // Asked for more rows a pass than fit, where fewer would: offer those.
  const suggestions = asked !== undefined && chosen !== null
    ? [{ microBatch: chosen, bytes: estimateTrainMemory(shape, { ...run, microBatch: chosen }).host }]
    : suggestionsFor(shape, run, room, reader);
  const advice = suggestions.length ? `try ${suggestions.map((s) => suggestionText(s, reader)).join(' or ')}` : w.nothing;
  const what = asked !== undefined && asked > 1 ? `${n(asked)} rows of ${n(run.maxLength)} tokens a pass (${w.microBatch} ${n(asked)})` : `one row of ${n(run.maxLength)} tokens at a time`;
  const refusal = `${w.run} needs about ${formatBytes(estimate.host)} even with ${what}, but this machine has ${have}: ${advice}${w.override}.`;
  return { estimate, fits, microBatch, suggestions, summary, refusal };
}
