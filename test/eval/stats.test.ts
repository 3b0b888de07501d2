// The bootstrap of docs/design.md §Evaluation on fixed numbers: means, percentile intervals,
// the stratified margin and the paired deltas, all seeded and deterministic.
import { describe, expect, it } from 'vitest';
import {
  estimateMargin, estimateMean, estimatePairedDelta, estimatePairedMarginDelta, quantileSorted, seededUniform,
} from '../../src-shared/eval-stats.js';
import { describeMarginDelta, gapDelta, hintMetrics, likelihoodMetrics, marginDelta, type SampleScore } from '../../src-shared/eval-report.js';

describe('bootstrap statistics', () => {
  it('interpolates quantiles between order statistics', () => {
    expect(quantileSorted([1, 2, 3, 4], 0)).toBe(1);
    expect(quantileSorted([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantileSorted([1, 2, 3, 4], 1)).toBe(4);
    expect(quantileSorted([0, 10], 0.025)).toBeCloseTo(0.25, 12);
  });

  it('draws the same stream for a seed, another for another seed, always in [0, 1)', () => {
    const a = seededUniform(7), b = seededUniform(7), c = seededUniform(8);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 1000 }, () => c())).not.toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(xs.reduce((s, x) => s + x, 0) / xs.length).toBeCloseTo(0.5, 1);
  });

  it('gives the mean with a 95% percentile interval, the same for the same seed', () => {
    // Resample means of [0, 1] are 0, ½ or 1 with chances ¼, ½, ¼: the tails are exactly 0 and 1.
    expect(estimateMean([0, 1], 3)).toEqual({ n: 2, mean: 0.5, ci: [0, 1] });
    // No spread, no width.
    expect(estimateMean([2.5, 2.5, 2.5], 3)).toEqual({ n: 3, mean: 2.5, ci: [2.5, 2.5] });
    expect(estimateMean([], 3)).toEqual({ n: 0, mean: null, ci: null });
    const values = [-3.1, -2.7, -4.0, -3.3, -2.9, -3.8, -3.0, -2.2];
    const e = estimateMean(values, 11);
    expect(e.mean).toBeCloseTo(-3.125, 12);
    expect(estimateMean(values, 11)).toEqual(e);
    expect(estimateMean(values, 12).ci).not.toEqual(e.ci);
    const [lo, hi] = e.ci!;
    expect(lo).toBeLessThan(e.mean!);
    expect(hi).toBeGreaterThan(e.mean!);
    expect(lo).toBeGreaterThanOrEqual(-4.0);
    expect(hi).toBeLessThanOrEqual(-2.2);
    // About mean ± 1.96·sd/√n (sd 0.568 → ±0.39); the percentile interval is close to it.
    expect(hi - lo).toBeGreaterThan(0.55);
    expect(hi - lo).toBeLessThan(0.95);
  });

  it('computes the margin over two strata, never with an empty group', () => {
    expect(estimateMargin([1, 1, 1], [0, 0], 1)).toEqual({ n: 5, mean: 1, ci: [1, 1] });
    expect(estimateMargin([1, 2], [], 1)).toEqual({ n: 2, mean: null, ci: null });
    const m = estimateMargin([-2, -2.5, -1.5], [-3, -3.5, -2.5], 1);
    expect(m.mean).toBeCloseTo(1, 12);
    expect(m.ci![0]).toBeGreaterThan(0); // every resample of these keeps pos above neg
  });

  it('pairs a delta sample by sample: a constant shift has no width, unpaired it would', () => {
    const b = [-3.1, -2.7, -4.0, -3.3, -2.9];
    const a = b.map((x) => x + 0.5);
    const paired = estimatePairedDelta(a, b, 5);
    expect(paired.mean).toBeCloseTo(0.5, 12);
    expect(paired.ci![0]).toBeCloseTo(0.5, 12);
    expect(paired.ci![1]).toBeCloseTo(0.5, 12);
    expect(estimatePairedDelta(b, b, 5)).toEqual({ n: 5, mean: 0, ci: [0, 0] });
    const unpaired = estimateMargin(a, b, 5);
    expect(unpaired.ci![1] - unpaired.ci![0]).toBeGreaterThan(0.5);
    expect(() => estimatePairedDelta([1], [1, 2], 5)).toThrow(/differ in length/);
  });

  it('pairs margin deltas within each stratum', () => {
    const b = { pos: [-3, -2.5, -2], neg: [-3, -3.5] };
    const a = { pos: b.pos.map((x) => x + 0.3), neg: b.neg.map((x) => x - 0.2) };
    expect(estimatePairedMarginDelta(a, b, 9)).toMatchObject({ n: 5, ci: [expect.closeTo(0.5, 12), expect.closeTo(0.5, 12)] });
    expect(estimatePairedMarginDelta(b, b, 9)).toEqual({ n: 5, mean: 0, ci: [0, 0] });
  });
});

describe('report parts from per-sample scores', () => {
  const base: SampleScore[] = [
    { key: 's1/1', reward: 1, original: -3, repair: -2.5, hintGap: 0.4 },
    { key: 's1/3', reward: -1, original: -2.8 },
    { key: 's2/1', reward: 1, original: -3.4, hintGap: 0.6 },
    { key: 's2/3', reward: 0, original: -3, repair: -3.5 },
    { key: 's3/1', reward: -1, original: -3.2 },
  ];
  const adapter = base.map((s) => ({ ...s, original: s.original + (s.reward === 1 ? 0.4 : s.reward === -1 ? -0.1 : 0), ...(s.hintGap !== undefined ? { hintGap: s.hintGap - 0.2 } : {}) }));

  it('splits +1 and −1, counts repairs likelier than the original, and averages hint gaps', () => {
    const l = likelihoodMetrics(base, 0);
    expect(l.pos).toMatchObject({ n: 2, mean: expect.closeTo(-3.2, 12) });
    expect(l.neg).toMatchObject({ n: 2, mean: expect.closeTo(-3.0, 12) });
    expect(l.margin).toMatchObject({ n: 4, mean: expect.closeTo(-0.2, 12) });
    expect(l.repair).toMatchObject({ n: 2, mean: 0.5 });
    expect(hintMetrics(base, 0)).toMatchObject({ n: 2, gap: { n: 2, mean: expect.closeTo(0.5, 12) } });
  });

  it('compares two models over the same samples', () => {
    expect(marginDelta(adapter, base, 0)).toMatchObject({ n: 4, mean: expect.closeTo(0.5, 12), ci: [expect.closeTo(0.5, 12), expect.closeTo(0.5, 12)] });
    expect(gapDelta(adapter, base, 0)).toMatchObject({ n: 2, mean: expect.closeTo(-0.2, 12) });
    expect(marginDelta(base, base, 0)).toEqual({ n: 4, mean: 0, ci: [0, 0] });
    // A run stopped early compares the samples both models measured.
    expect(marginDelta(adapter.slice(0, 3), base, 0).n).toBe(3);
    expect(() => marginDelta([...adapter].reverse(), base, 0)).toThrow(/out of order/);
  });

  it('says the comparison in words', () => {
    expect(describeMarginDelta({ a: 'run', b: 'base', margin_delta: { n: 38, mean: 0.41, ci: [0.22, 0.6] } }))
      .toBe('run prefers the replies you liked more than base: margin +0.41 nats/token, 95% CI [0.22, 0.60], 38 samples');
    expect(describeMarginDelta({ a: 'run', b: 'base', margin_delta: { n: 29, mean: -0.05, ci: [-0.3, 0.2] } })).toMatch(/^run cannot be told apart from base: margin −0.05/);
    // Below the minimum no verdict and no interval: issue 34's "prefers … 95% CI [0.07, 0.07]" from 2 samples.
    expect(describeMarginDelta({ a: 'run', b: 'base', margin_delta: { n: 2, mean: 0.07, ci: [0.07, 0.07] } }))
      .toBe('run vs base: too few held-out samples to tell (n = 2); hold out more labelled sessions on the Sessions page');
    expect(describeMarginDelta({ a: 'run', b: 'base', margin_delta: { n: 1, mean: null, ci: null } })).toMatch(/no margin/);
  });
});
