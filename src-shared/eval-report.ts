/**
 * What an evaluation reports (docs/design.md §Evaluation), and how per-sample numbers become
 * it. `hindsight eval --json` prints an EvalReport; the trainer writes the same shape to
 * `eval.json` and its `"type":"eval"` log lines carry the likelihood and hint parts; the app's
 * pages read them. Node-free, so the renderer imports the types and the wording.
 *
 * The measuring (tokenising held-out samples the way training does, scoring them) happens in
 * src-main; it hands over one SampleScore per held-out sample and model, in the same sample
 * order for every model, and everything below is arithmetic on those.
 */
import type { ReplayContext, ReplayMetrics, WinTieLoss } from './eval-replay.js';
import { estimateMargin, estimateMean, estimatePairedDelta, estimatePairedMarginDelta, tooFewToTell, type DeltaEstimate, type Estimate } from './eval-stats.js';

export type { DeltaEstimate, Estimate };

export type EvalMetric = 'likelihood' | 'hints' | 'replay' | 'stats';
export const EVAL_METRICS: readonly EvalMetric[] = ['likelihood', 'hints', 'replay', 'stats'];
export type EvalSplit = 'heldout' | 'all';
export const EVAL_SPLITS: readonly EvalSplit[] = ['heldout', 'all'];

/** One held-out sample measured under one model. */
export interface SampleScore {
  /** `<session id>/<response turn>`: the same sample has the same key under every model. */
  key: string;
  /** The sample's label: +1, −1, or 0 (neutral or unlabelled). */
  reward: number;
  /** Mean per-token log-prob of the original reply under the model. */
  original: number;
  /** Mean per-token log-prob of the user's repair, on the same context, when there is one. */
  repair?: number;
  /** Mean over the reply's tokens of teacher − this model, when the sample has a hint. */
  hintGap?: number;
}

/** A part of the report that was not measured, and why (e.g. replay without an LLM judge). */
export interface Skipped {
  skipped: string;
}

export interface LikelihoodMetrics {
  /** Mean per-token log-prob of replies labelled +1. */
  pos: Estimate;
  /** The same for −1. */
  neg: Estimate;
  /** pos − neg; a fine-tune that learnt the labels raises it. */
  margin: DeltaEstimate;
  /** Over repaired samples: the fraction where the repair is likelier than the original. */
  repair: Estimate;
}

export interface HintMetrics {
  n: number;
  /** Mean per-token teacher − student gap on the original reply; absorbed hints shrink it. */
  gap: Estimate;
}

/** Statistics of generated replies (generationStats in src-main/eval/generation-stats.ts). */
export interface GenerationStats {
  replies: number;
  /** Reply length in generated tokens. */
  reply_tokens: Estimate;
  /** Share of replies that are refusals (the heuristic judge's refusal rule). */
  refusal_rate: Estimate;
  /** Reasoning length in characters (0 for a reply without reasoning). */
  reasoning_chars: Estimate;
  /** Over replies that tried a tool call: the share whose every call parsed. */
  valid_tool_call_rate: Estimate;
}

export type { ReplayContext, ReplayMetrics, WinTieLoss } from './eval-replay.js';

export interface ModelEval {
  /** "base", "lessons" (the base model told the lessons), or the adapter folder's name. */
  name: string;
  /** The adapter folder, for an adapter. */
  adapter?: string;
  /** For "lessons": the system prompt the base model was given (docs/design.md §Lessons). */
  lessons?: string;
  likelihood?: LikelihoodMetrics;
  hints?: HintMetrics;
  replay?: ReplayMetrics | Skipped;
  stats?: GenerationStats | Skipped;
}

export interface Comparison {
  a: string;
  b: string;
  /** margin(a) − margin(b), paired over the same samples. */
  margin_delta?: DeltaEstimate;
  /** gap(a) − gap(b), paired; below 0 when a absorbed the hints better than b. */
  gap_delta?: DeltaEstimate;
  /** Win/tie/loss of a against b per replayed context. */
  replay?: WinTieLoss | Skipped;
}

export interface EvalReport {
  split: { name: EvalSplit; sessions: number; samples: number };
  seed: number;
  metrics: EvalMetric[];
  models: ModelEval[];
  comparisons: Comparison[];
  /** The replayed contexts (with replay), for the per-sample drill-down. */
  replay_contexts?: ReplayContext[];
  /** Things the user should know: skipped metrics, samples left out and why. */
  notes: string[];
  /** True when the run was stopped early; what was measured is kept. */
  cancelled: boolean;
}

const BASE = 'base';
export { BASE as BASE_MODEL_NAME };
/** The base model with the lessons as its system prompt, measured as an adapter is (docs/design.md §Lessons). */
export const LESSONS_MODEL_NAME = 'lessons';

const values = (scores: readonly SampleScore[], reward: number) => scores.filter((s) => s.reward === reward).map((s) => s.original);

export function likelihoodMetrics(scores: readonly SampleScore[], seed: number): LikelihoodMetrics {
  const pos = values(scores, 1);
  const neg = values(scores, -1);
  const repaired = scores.filter((s) => s.repair !== undefined).map((s) => (s.repair! > s.original ? 1 : 0));
  return { pos: estimateMean(pos, seed), neg: estimateMean(neg, seed), margin: estimateMargin(pos, neg, seed), repair: estimateMean(repaired, seed) };
}

export function hintMetrics(scores: readonly SampleScore[], seed: number): HintMetrics {
  const gaps = scores.filter((s) => s.hintGap !== undefined).map((s) => s.hintGap!);
  return { n: gaps.length, gap: estimateMean(gaps, seed) };
}

/** The samples both models measured, in order (a cancelled run may have measured fewer under one). */
function common(a: readonly SampleScore[], b: readonly SampleScore[]): [SampleScore[], SampleScore[]] {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i]!.key !== b[i]!.key) throw new Error(`samples out of order: ${a[i]!.key} against ${b[i]!.key}`);
  return [a.slice(0, n), b.slice(0, n)];
}

export function marginDelta(a: readonly SampleScore[], b: readonly SampleScore[], seed: number): DeltaEstimate {
  const [x, y] = common(a, b);
  return estimatePairedMarginDelta({ pos: values(x, 1), neg: values(x, -1) }, { pos: values(y, 1), neg: values(y, -1) }, seed);
}

export function gapDelta(a: readonly SampleScore[], b: readonly SampleScore[], seed: number): DeltaEstimate {
  const [x, y] = common(a, b);
  const hinted = x.map((s, i) => [s.hintGap, y[i]!.hintGap] as const).filter(([p, q]) => p !== undefined && q !== undefined);
  return estimatePairedDelta(hinted.map(([p]) => p!), hinted.map(([, q]) => q!), seed);
}

/** "+0.41" / "−0.12": a signed number for sentences. */
export function signed(x: number, digits = 2): string {
  return `${x < 0 ? '−' : '+'}${Math.abs(x).toFixed(digits)}`;
}

function interval(ci: [number, number] | null): string {
  return ci ? `95% CI [${ci[0].toFixed(2)}, ${ci[1].toFixed(2)}]` : 'no interval';
}

/**
 * The margin comparison in words, as the CLI and the app show it: whether model `a` prefers
 * the replies the user liked more than `b` does, and how sure the interval is.
 */
export function describeMarginDelta(c: Pick<Comparison, 'a' | 'b' | 'margin_delta'>): string {
  const d = c.margin_delta;
  if (!d || d.mean === null) return `${c.a} vs ${c.b}: no margin (it needs held-out replies labelled +1 and −1)`;
  const few = tooFewToTell(d.n);
  if (few) return `${c.a} vs ${c.b}: ${few}; hold out more labelled sessions on the Sessions page`;
  const where = d.ci && d.ci[0] > 0 ? 'prefers the replies you liked more than' : d.ci && d.ci[1] < 0 ? 'prefers the replies you liked less than' : 'cannot be told apart from';
  return `${c.a} ${where} ${c.b}: margin ${signed(d.mean)} nats/token, ${interval(d.ci)}, ${d.n} samples`;
}
