// An on-policy run on a quantised base (QLoRA, docs/design.md §QLoRA): its rollouts run
// MatMulNBits at accuracy level 4 (activations rounded to int8, fast), its training step at level
// 0 (exact, so that it differentiates what it computes), so the rollouts' log-probs are not the
// step's own: on the demo model in int4 they lie 0.04 nats a token from them. PPO's old is then
// the policy's own log-prob at the start of the step (the SPEC's definition), so the first update's
// ratio is exactly 1 (no clipping, no KL), and the rollouts' distance is still logged as `drift`.
// Before, old was the rollouts' and the first update already clipped tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { trainOnPolicy } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { MODEL, storySample } from './helpers.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-quantised-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('on-policy OPD on an int4 base', () => {
  it("takes old from the policy, not from the rollouts' int8-activation kernels: the first update's ratio is 1", async () => {
    const out = path.join(tmp, 'int4');
    const result = await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'opd', steps: 1, lr: 1e-2, loraR: 4, loraAlpha: 8, seed: 1, quantize: 'int4', ppoEpochs: 1,
      samples: [storySample('s1', 'The story is about a dog named Tim.')],
      onPolicy: { rollouts: 8, contextsPerStep: 1, maxTokens: 32 },
    });
    expect(result.status).toBe('finished');
    const [line] = readLog(path.join(out, 'trainer_log.jsonl'));
    expect(line!.tokens).toBeGreaterThan(0);
    expect(Math.abs(line!.approx_kl)).toBeLessThan(1e-6);
    expect(line!.clipfrac).toBe(0);
    // The rollouts' own log-probs, measured against the policy's (0.038 when this was written; < 1e-3 on an fp32 base: learning.test.ts).
    expect(line!.drift).toBeGreaterThan(1e-3);
    expect(line!.drift).toBeLessThan(0.2);
  });
});
