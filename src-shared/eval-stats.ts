/**
 * The statistics of evaluation (docs/design.md §Evaluation): means with 95% percentile
 * bootstrap intervals over samples, seeded so the same numbers and seed always give the same
 * interval. Node-free: the trainer, `hindsight eval` and the app's pages share it.
 *
 *     estimateMean([0.2, 0.4, 0.1], 7)          → { n: 3, mean: 0.233…, ci: [lo, hi] }
 *     estimateMargin(pos, neg, 7)                → mean(pos) − mean(neg), strata resampled apart
 *     estimatePairedMarginDelta(a, b, 7)         → margin(a) − margin(b) over the same samples
 *
 * A resample draws n values with replacement from the n values (each stratum apart, for a
 * margin); the statistic is computed on it; the interval is the 2.5th and 97.5th percentile
 * of the statistic over the resamples (linear interpolation between order statistics). An
 * empty group has mean and interval null.
 */

/**
 * The fewest held-out samples an interval is shown for: below it the Evaluate page says "too few
 * held-out samples to tell (n = 2)", and the split rule (src-main/pipeline/split-rule.ts) holds
 * out at least this many when the data allows. With 20 paired samples a bootstrap interval of a
 * mean difference is wide but no longer a point ([0.07, 0.07] from n = 2).
 */
export const MIN_HELD_OUT_SAMPLES = 20;

/** The words for an estimate on fewer than MIN_HELD_OUT_SAMPLES samples, or null when it has enough. */
export function tooFewToTell(n: number): string | null {
  return n < MIN_HELD_OUT_SAMPLES ? `too few held-out samples to tell (n = ${n})` : null;
}

/** A mean over samples with its interval: what every metric of a report carries. */
export interface Estimate {
  n: number;
  mean: number | null;
  ci: [number, number] | null;
}

/** A difference of means (a margin, a delta): its interval, and the samples behind it. */
export interface DeltaEstimate {
  mean: number | null;
  ci: [number, number] | null;
  n: number;
}

export const BOOTSTRAP_RESAMPLES = 1000;
export const CONFIDENCE = 0.95;

/**
 * A small seeded generator of floats in [0, 1): a counter stepped by the golden ratio and
 * mixed by a 32-bit hash finaliser. Good enough to pick resample indices, and the same in
 * Node and the browser.
 */
export function seededUniform(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let h = state;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    h ^= h >>> 16;
    return (h >>> 0) / 4294967296;
  };
}

export function mean(values: readonly number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** The q-quantile (0 ≤ q ≤ 1) of sorted values, interpolating linearly between neighbours. */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) throw new Error('quantile of no values');
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** The mean of a resample of `values` (n draws with replacement). */
function resampledMean(values: readonly number[], random: () => number): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[Math.floor(random() * values.length)]!;
  return sum / values.length;
}

/** The percentile interval of a statistic computed on `resamples` seeded resamples. */
function percentileInterval(statistic: (random: () => number) => number, seed: number, resamples = BOOTSTRAP_RESAMPLES): [number, number] {
  const random = seededUniform(seed);
  const stats = Array.from({ length: resamples }, () => statistic(random)).sort((a, b) => a - b);
  const tail = (1 - CONFIDENCE) / 2;
  return [quantileSorted(stats, tail), quantileSorted(stats, 1 - tail)];
}

/** Mean of the values with its 95% bootstrap interval. */
export function estimateMean(values: readonly number[], seed: number): Estimate {
  if (values.length === 0) return { n: 0, mean: null, ci: null };
  return { n: values.length, mean: mean(values), ci: percentileInterval((r) => resampledMean(values, r), seed) };
}

/**
 * mean(pos) − mean(neg) with its interval; each resample redraws the two groups apart (a
 * stratified bootstrap), so neither group is ever empty in a resample.
 */
export function estimateMargin(pos: readonly number[], neg: readonly number[], seed: number): DeltaEstimate {
  const n = pos.length + neg.length;
  if (pos.length === 0 || neg.length === 0) return { n, mean: null, ci: null };
  return { n, mean: mean(pos) - mean(neg), ci: percentileInterval((r) => resampledMean(pos, r) - resampledMean(neg, r), seed) };
}

/** Per-sample differences a − b (same samples, same order). */
export function pairedDifferences(a: readonly number[], b: readonly number[]): number[] {
  if (a.length !== b.length) throw new Error(`paired values differ in length (${a.length} and ${b.length})`);
  return a.map((x, i) => x - b[i]!);
}

/**
 * mean(a) − mean(b) over the same samples, a paired bootstrap: each resample draws samples,
 * and both models' values of a drawn sample go together (the mean of the differences).
 */
export function estimatePairedDelta(a: readonly number[], b: readonly number[], seed: number): DeltaEstimate {
  const d = pairedDifferences(a, b);
  const e = estimateMean(d, seed);
  return { n: e.n, mean: e.mean, ci: e.ci };
}

/**
 * margin(a) − margin(b) over the same samples, a paired, stratified bootstrap: a resample
 * draws +1 samples and −1 samples apart, and takes both models' values of each drawn sample.
 * It equals mean over +1 of (a − b) minus mean over −1 of (a − b).
 */
export function estimatePairedMarginDelta(
  a: { pos: readonly number[]; neg: readonly number[] },
  b: { pos: readonly number[]; neg: readonly number[] },
  seed: number,
): DeltaEstimate {
  return estimateMargin(pairedDifferences(a.pos, b.pos), pairedDifferences(a.neg, b.neg), seed);
}
