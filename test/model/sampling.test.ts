// Token sampling (docs/design.md §Batched generation) from the model's log-probs: draws follow
// softmax(logprobs / t), top-p keeps only the nucleus, and the log-prob reported is the model's
// own (t = 1, before top-p).
import { describe, expect, it } from 'vitest';
import { sampleToken, seededRandom } from '../../src-main/model/sampling.js';

const logits = [2, 1, 0.5, -1, 0];
const logZ = Math.log(logits.reduce((a, x) => a + Math.exp(x), 0));
const logprobs = Float32Array.from(logits, (x) => x - logZ);

function softmax(xs: number[], t: number): number[] {
  const m = Math.max(...xs);
  const e = Array.from(xs, (x) => Math.exp((x - m) / t));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

function frequencies(t: number, topP: number, draws: number): number[] {
  const rand = seededRandom(7);
  const counts = new Array<number>(logits.length).fill(0);
  for (let i = 0; i < draws; i++) counts[sampleToken(logprobs, t, topP, rand).token]!++;
  return counts.map((c) => c / draws);
}

describe('sampleToken', () => {
  it('draws in proportion to softmax(logits / t)', () => {
    const expected = softmax(logits, 0.7);
    frequencies(0.7, 1, 40_000).forEach((f, i) => expect(Math.abs(f - expected[i]!)).toBeLessThan(0.01));
  });

  it('top-p draws only from the smallest set reaching p, renormalised', () => {
    const p = softmax(logits, 1); // [0.56, 0.21, 0.13, 0.03, 0.08]: the top three reach 0.85
    const f = frequencies(1, 0.85, 40_000);
    expect(f[3]).toBe(0);
    expect(f[4]).toBe(0);
    const nucleus = p[0]! + p[1]! + p[2]!;
    [0, 1, 2].forEach((i) => expect(Math.abs(f[i]! - p[i]! / nucleus)).toBeLessThan(0.01));
  });

  it('reports the log-prob given (t = 1) whatever the temperature; greedy picks the argmax', () => {
    const logp = softmax(logits, 1).map(Math.log);
    const rand = seededRandom(3);
    for (const t of [0, 0.5, 2]) {
      const { token, logprob } = sampleToken(logprobs, t, 0.9, rand);
      expect(logprob).toBeCloseTo(logp[token]!, 6);
      if (t === 0) expect(token).toBe(0);
    }
  });
});
