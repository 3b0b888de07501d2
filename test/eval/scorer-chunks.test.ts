// The evaluation scorer (src-main/train/lora-scorer.ts) on rows past the chunking length runs
// attention in query chunks, as `score` does (docs/design.md §Scoring): the same log-probs as in
// one piece, with the base model and with an adapter.
import { describe, expect, it } from 'vitest';
import { attentionChunksFor } from '../../src-main/model/attention.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import { LoraScorer } from '../../src-main/train/lora-scorer.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { MODEL } from '../onpolicy/helpers.js';

describe('the evaluation scorer on long rows', () => {
  it('scores with attention in query chunks as in one piece, base and adapter', async () => {
    const checkpoint = Checkpoint.open(MODEL);
    const lora = { r: 2, alpha: 4, targets: ['q' as const, 'v' as const] };
    const rand = seededRandom(5);
    const spans = [40, 33, 12].map((n) => ({ inputIds: Array.from({ length: n }, () => 3 + Math.floor(rand() * 500)), responseStart: Math.floor(n / 2) }));
    // B ≠ 0, so the adapter changes the log-probs and the chunked path sees it.
    const adapter = initLora(loraSpecs(checkpoint.config, lora.targets), lora.r, 3);
    for (const [key, w] of adapter) if (key.includes('lora_B')) w.forEach((_, i) => (w[i] = (rand() - 0.5) * 0.2));
    const options = { device: 'cpu' as const, threads: 1, batchSize: 3, longestRow: 40 };
    const whole = await LoraScorer.create(checkpoint, lora, options);
    const chunking = { rows: 4, above: 8 };
    expect(attentionChunksFor(40, chunking)).toBe(16);
    const chunked = await LoraScorer.create(checkpoint, lora, { ...options, attentionChunking: chunking });
    try {
      for (const weights of [null, adapter]) {
        const [a, b] = [await whole.score(spans, weights), await chunked.score(spans, weights)];
        a.forEach((row, r) => row.forEach((v, i) => expect(Math.abs(v - b[r]![i]!)).toBeLessThan(1e-5)));
      }
      const [base, tuned] = [await whole.score(spans, null), await whole.score(spans, adapter)];
      expect(Math.max(...base[0]!.map((v, i) => Math.abs(v - tuned[0]![i]!)))).toBeGreaterThan(1e-4);
    } finally {
      await whole.close();
      await chunked.close();
    }
  });
});
