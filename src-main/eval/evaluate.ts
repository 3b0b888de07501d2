/**
 * Evaluation of a base model and adapters on held-out samples (docs/design.md §Evaluation):
 * the engine behind `hindsight eval` (and the app's Evaluate page, through
 * ./run-in-worker.ts). The caller reads the samples from the database (Workspace
 * .evaluationSamples) and hands them over with the model folders; `evaluate` returns one
 * EvalReport (src-shared/eval-report.ts), the object `eval --json` prints.
 *
 *     const report = await evaluate({ modelDir, adapters: ['runs/a'], samples, split, metrics: ['likelihood', 'hints'], seed: 0, device: 'cpu' },
 *       { onProgress: (p) => console.error(p.message), shouldStop: () => stopped });
 *
 * Likelihood and hint gap are measured here, with the trainer's forward pass
 * (src-main/train/lora-scorer.ts): the base is the same graph with the adapter's tensors at
 * zero, so an adapter whose B is zero compares with the base at exactly zero. Adapters of
 * another shape (r, alpha, targets) get their own session, and are compared with the base
 * measured in that same session.
 *
 * Lessons (docs/design.md §Lessons): with `lessons`, one more model, "lessons", is the base with
 * the lessons as its system prompt (src-shared/lessons.ts withLessons), measured in the base's
 * session on the same samples, replayed with the same seeds, and compared with the base and with
 * each adapter: whether training beats simply telling the model.
 *
 * Replay and generation statistics (./replay.ts) run after the scoring, when asked for: replay
 * needs an LLM judge in `replay.judge`, statistics only the generated replies. Stopping (shouldStop) keeps what was measured:
 * the model being measured reports the samples done so far, and the report says `cancelled`.
 */
import path from 'node:path';
import {
  BASE_MODEL_NAME, gapDelta, hintMetrics, LESSONS_MODEL_NAME, likelihoodMetrics, marginDelta,
  type Comparison, type EvalMetric, type EvalReport, type EvalSplit, type ModelEval, type SampleScore,
} from '../../src-shared/eval-report.js';
import { defaultMaxLength } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { fitInference } from '../model/inference-fit.js';
import { deviceGpuMemory } from '../model/gpu-memory.js';
import type { Device } from '../model/ort-session.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { evalRowsFromSamples, sampleScores, teacherLogprobs, type EvalRow, type SpanScorer } from '../train/eval-rows.js';
import { LoraScorer, sameShape } from '../train/lora-scorer.js';
import { readAdapter, type LoadedAdapter } from '../train/peft.js';
import { generationParts } from './replay-report.js';
import { boundedContexts, replay, REPLAY_DEFAULTS, type Replayed, type ReplayModel, type ReplaySettings } from './replay.js';

export interface EvalOptions {
  modelDir: string;
  /** Adapter folders (PEFT LoRA), as the user named them: each name in the report is the folder as given. */
  adapters: string[];
  /** The samples to measure, in a stable order (Workspace.evaluationSamples). */
  samples: TrainingSample[];
  split: { name: EvalSplit; sessions: number; samples: number };
  metrics: EvalMetric[];
  /** Seeds every bootstrap interval. */
  seed: number;
  device: Device;
  threads?: number;
  /** Rows per forward pass (default 8). */
  batchSize?: number;
  /** Tokens per row, as in training (default the trainer's, capped by the model's). */
  maxLength?: number;
  /** Replay's settings (K, sampling, the judge and its votes); defaults REPLAY_DEFAULTS, no judge. */
  replay?: Partial<ReplaySettings>;
  /** A system prompt of lessons: also measures the base model told them, as "lessons" (blank: not). */
  lessons?: string;
}

export interface EvalProgress {
  /** The model being measured ("base" or an adapter's name). */
  model: string;
  done: number;
  total: number;
  message: string;
}

export interface EvalHooks {
  onProgress?: (p: EvalProgress) => void;
  /** Polled between batches; true stops, keeping what was measured. */
  shouldStop?: () => boolean;
}

export const DEFAULT_EVAL_METRICS: readonly EvalMetric[] = ['likelihood', 'hints'];
const DEFAULT_BATCH = 8;
/** Any shape serves the base alone: its tensors are all zero. The smallest is the cheapest. */
const BASE_ONLY_SHAPE = { r: 1, alpha: 1, targets: ['q' as const] };

interface Measured {
  name: string;
  adapter?: string;
  scores: SampleScore[];
  /** The base measured in the same session, for the comparison (adapters only). */
  base?: SampleScore[];
}

/** Lets the event loop run (a Ctrl-C handler, progress messages) between batches on this thread. */
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve));

class Stopped extends Error {}

export async function evaluate(options: EvalOptions, hooks: EvalHooks = {}): Promise<EvalReport> {
  const checkpoint = Checkpoint.open(options.modelDir);
  const tokenizer = ChatTokenizer.load(options.modelDir);
  const lessons = lessonsOf(options);
  const adapters = loadAdapters(options.adapters, checkpoint);
  const maxLength = options.maxLength ?? defaultMaxLength(checkpoint.config.maxPositionEmbeddings);
  const { rows, skipped } = evalRowsFromSamples(options.samples, tokenizer, maxLength);
  const notes = Object.entries(skipped).map(([why, n]) => `${n} sample${n === 1 ? '' : 's'} not measured: ${why}`);
  const lessonRows = lessons ? evalRowsFromSamples(options.samples, tokenizer, maxLength, { lessons }) : null;
  for (const [why, n] of Object.entries(lessonRows?.skipped ?? {})) {
    const more = n - (skipped[why] ?? 0);
    if (more > 0) notes.push(`${more} more sample${more === 1 ? '' : 's'} not measured with the lessons: ${why}`);
  }
  const scoring = options.metrics.includes('likelihood') || options.metrics.includes('hints');
  const measured: Measured[] = [];
  let cancelled = false;
  if (scoring && rows.length > 0) {
    try {
      const form = await measureAll({ rows, lessons: lessonRows?.rows ?? null }, checkpoint, adapters, options, hooks, measured);
      if (form) notes.push(`likelihood and hints measured with ${form}`);
    } catch (err) {
      if (!(err instanceof Stopped)) throw err;
      cancelled = true;
      notes.push('stopped before the end: the numbers cover what was measured');
    }
  } else if (scoring) notes.push(`no sample to measure in the ${options.split.name === 'heldout' ? 'held-out split' : 'database'}: label some held-out replies ±1, or give them hints or repairs`);
  const generation = cancelled ? { replayed: null, why: 'the run stopped before replay' } : await runReplay(options, adapters, hooks);
  const bound = replaySettings(options).contexts;
  if (generation.replayed && bound !== undefined && bound < options.samples.length) notes.push(`replay covers the first ${bound} of the ${options.samples.length} held-out contexts (--replay-contexts)`);
  if (generation.replayed?.weightsNote) notes.push(`replay generated with ${generation.replayed.weightsNote}`);
  if (generation.replayed?.stopped) {
    cancelled = true;
    notes.push('stopped during replay: replay covers the contexts generated and judged under every model');
  }
  return assemble(options, adapters, measured, notes, cancelled, generation);
}

/** The lessons to measure (null: none), refusing an adapter named like their row. */
function lessonsOf(o: EvalOptions): string | null {
  const lessons = o.lessons?.trim() || null;
  if (lessons && o.adapters.includes(LESSONS_MODEL_NAME)) {
    throw new UserError(`the adapter '${LESSONS_MODEL_NAME}' would share its name with the lessons' row: give its folder as ./${LESSONS_MODEL_NAME}`);
  }
  return lessons;
}

const replaySettings = (o: EvalOptions): ReplaySettings => ({ ...REPLAY_DEFAULTS, judge: null, ...o.replay });

/** Generates (and judges, with a judge) the replays when replay or statistics are asked for. */
async function runReplay(o: EvalOptions, adapters: ReturnType<typeof loadAdapters>, hooks: EvalHooks): Promise<{ replayed: Replayed | null; why: string | null }> {
  const settings = replaySettings(o);
  const wanted = o.metrics.includes('stats') || (o.metrics.includes('replay') && settings.judge !== null);
  if (!wanted) return { replayed: null, why: null };
  const contexts = boundedContexts(o.samples, settings);
  if (contexts.length === 0) return { replayed: null, why: 'no held-out context to replay' };
  const lessons = o.lessons?.trim();
  const models: ReplayModel[] = [
    { name: BASE_MODEL_NAME, adapterDir: null },
    ...(lessons ? [{ name: LESSONS_MODEL_NAME, adapterDir: null, system: lessons }] : []),
    ...adapters.map((a) => ({ name: a.name, adapterDir: a.dir })),
  ];
  const replayed = await replay(contexts, models, {
    modelDir: o.modelDir, device: o.device, seed: o.seed, settings, shouldStop: hooks.shouldStop,
    onProgress: (model, done, total, message) => hooks.onProgress?.({ model, done, total, message }),
  });
  return { replayed, why: null };
}

function loadAdapters(dirs: readonly string[], checkpoint: Checkpoint): { name: string; dir: string; adapter: LoadedAdapter }[] {
  const seen = new Set<string>();
  return dirs.map((name) => {
    const dir = path.resolve(name);
    if (seen.has(dir)) throw new UserError(`adapter ${name} is named twice`);
    seen.add(dir);
    return { name, dir, adapter: readAdapter(dir, checkpoint.config) };
  });
}

/** Measures the base (and the lessons, in its session), then every adapter, one scoring session per adapter shape. */
async function measureAll(
  { rows, lessons }: { rows: EvalRow[]; lessons: EvalRow[] | null }, checkpoint: Checkpoint, adapters: ReturnType<typeof loadAdapters>, o: EvalOptions, hooks: EvalHooks, out: Measured[],
): Promise<string | null> {
  const groups: (typeof adapters)[] = [];
  for (const a of adapters) {
    const group = groups.find((g) => sameShape(g[0]!.adapter.lora, a.adapter.lora));
    if (group) group.push(a);
    else groups.push([a]);
  }
  if (groups.length === 0) groups.push([]);
  const longestRow = Math.max(...[...rows, ...(lessons ?? [])].flatMap((r) => [r.student, r.teacher, r.repair].map((span) => span?.inputIds.length ?? 0)));
  const batchSize = o.batchSize ?? DEFAULT_BATCH;
  // Every model measured in one form of the weights, the most exact that fits a batch of the longest rows.
  const fit = fitInference(o.modelDir, { quantize: 'auto', rows: batchSize, contextTokens: longestRow, gpu: await deviceGpuMemory(o.device) });
  if (fit.note) hooks.onProgress?.({ model: BASE_MODEL_NAME, done: 0, total: rows.length, message: `likelihood: ${fit.note}` });
  for (const [i, group] of groups.entries()) {
    const scorer = await LoraScorer.create(checkpoint, group[0]?.adapter.lora ?? BASE_ONLY_SHAPE, { device: o.device, threads: o.threads, batchSize, longestRow, quantize: fit.quantize });
    const measure = (weights: LoadedAdapter['weights'] | null, name: string, scores: SampleScore[], teacher: (Float32Array | undefined)[]) =>
      measureModel(rows, (spans) => scorer.score(spans, weights), weights === null, { name, batchSize, hooks }, scores, teacher);
    try {
      const teacher: (Float32Array | undefined)[] = [];
      const base: SampleScore[] = [];
      if (i === 0) out.push({ name: BASE_MODEL_NAME, scores: base });
      await measure(null, BASE_MODEL_NAME, base, teacher);
      if (i === 0 && lessons) {
        // The base's weights on the rows with the lessons; their teacher is the base's, with the hint.
        const scores: SampleScore[] = [];
        out.push({ name: LESSONS_MODEL_NAME, scores, base });
        await measureModel(lessons, (spans) => scorer.score(spans, null), true, { name: LESSONS_MODEL_NAME, batchSize, hooks }, scores, []);
      }
      for (const a of group) {
        const scores: SampleScore[] = [];
        out.push({ name: a.name, adapter: a.dir, scores, base });
        await measure(a.adapter.weights, a.name, scores, teacher);
      }
    } finally {
      await scorer.close();
    }
  }
  return fit.note;
}

/**
 * One model's scores, a batch of rows at a time, appended to `scores`. The base (`isBase`)
 * also measures the teacher into `teacher`, which the adapters after it reuse.
 */
async function measureModel(
  rows: EvalRow[], model: SpanScorer, isBase: boolean, run: { name: string; batchSize: number; hooks: EvalHooks },
  scores: SampleScore[], teacher: (Float32Array | undefined)[],
): Promise<void> {
  const { name, batchSize, hooks } = run;
  for (let i = 0; i < rows.length; i += batchSize) {
    await breathe();
    if (hooks.shouldStop?.()) throw new Stopped();
    const part = rows.slice(i, i + batchSize);
    if (isBase) teacher.push(...(await teacherLogprobs(part, model)));
    scores.push(...(await sampleScores(part, model, teacher.slice(i, i + part.length))));
    hooks.onProgress?.({ model: name, done: scores.length, total: rows.length, message: `${name}: ${scores.length}/${rows.length} samples` });
  }
}

function assemble(
  o: EvalOptions, adapters: ReturnType<typeof loadAdapters>, measured: Measured[], notes: string[], cancelled: boolean,
  { replayed, why }: { replayed: Replayed | null; why: string | null },
): EvalReport {
  const generation = generationParts(o.metrics, replaySettings(o), replayed, o.seed, why);
  notes.push(...generation.notes);
  const byName = new Map(measured.map((m) => [m.name, m]));
  const modelEval = (name: string, adapter?: string): ModelEval => {
    const scores = byName.get(name)?.scores ?? [];
    return {
      name, ...(adapter ? { adapter } : {}),
      ...(o.metrics.includes('likelihood') ? { likelihood: likelihoodMetrics(scores, o.seed) } : {}),
      ...(o.metrics.includes('hints') ? { hints: hintMetrics(scores, o.seed) } : {}),
      ...generation.model(name),
    };
  };
  const compare = (a: string, b: string, [x, y]: [SampleScore[], SampleScore[]]): Comparison => {
    const replayed = generation.comparison(a, b);
    return {
      a, b,
      ...(o.metrics.includes('likelihood') ? { margin_delta: marginDelta(x, y, o.seed) } : {}),
      ...(o.metrics.includes('hints') ? { gap_delta: gapDelta(x, y, o.seed) } : {}),
      ...(replayed ? { replay: replayed } : {}),
    };
  };
  const scoresOf = (name: string) => byName.get(name)?.scores ?? [];
  const lessons = o.lessons?.trim() || null;
  // Each adapter against the base of its own session; the lessons against the base, then each adapter against the lessons.
  const comparisons: Comparison[] = [
    ...adapters.map(({ name }) => compare(name, BASE_MODEL_NAME, [scoresOf(name), byName.get(name)?.base ?? []])),
    ...(lessons ? [compare(LESSONS_MODEL_NAME, BASE_MODEL_NAME, paired(scoresOf(LESSONS_MODEL_NAME), scoresOf(BASE_MODEL_NAME)))] : []),
    ...(lessons ? adapters.map(({ name }) => compare(name, LESSONS_MODEL_NAME, paired(scoresOf(name), scoresOf(LESSONS_MODEL_NAME)))) : []),
  ];
  return {
    split: o.split, seed: o.seed, metrics: [...o.metrics],
    models: [modelEval(BASE_MODEL_NAME), ...(lessons ? [{ ...modelEval(LESSONS_MODEL_NAME), lessons }] : []), ...adapters.map((a) => modelEval(a.name, a.dir))],
    comparisons, notes, cancelled,
    ...(replayed?.judged ? { replay_contexts: boundedContexts(o.samples, replaySettings(o)).map(({ tools: _tools, ...c }) => c) } : {}),
  };
}

/**
 * a's and b's scores of the samples both measured, in a's order: the lessons' rows may leave out
 * a sample whose reply no longer fits beside them, and a stopped run measured fewer under one.
 */
function paired(a: readonly SampleScore[], b: readonly SampleScore[]): [SampleScore[], SampleScore[]] {
  const byKey = new Map(b.map((s) => [s.key, s]));
  const both = a.filter((s) => byKey.has(s.key));
  return [both, both.map((s) => byKey.get(s.key)!)];
}
