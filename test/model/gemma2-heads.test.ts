// Gemma 2's final soft-cap in every head the decoder builds (src-main/model/softcap.ts): the
// scoring head over vocabulary chunks (fp32: ./chunked-head.ts; int8: quantizedTargetLogprobs)
// and the generating head (the logits, fp32 Gemm or int8 MatMulNBits) give the same log-probs,
// and the cap matters: the same weights uncapped score otherwise by more than a nat. The fp32
// numbers against transformers: test/interop/checkpoints.test.ts; against a float64 forward:
// ./decoder.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalModel } from '../../src-main/model/local-model.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-gemma2-heads-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const tiny = writeTinyModel(path.join(root, 'capped'), { family: 'gemma2', numLayers: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 12, tie: true });
// The same weights with both caps lifted.
const uncapped = path.join(root, 'uncapped');
fs.cpSync(tiny.dir, uncapped, { recursive: true });
fs.writeFileSync(path.join(uncapped, 'config.json'), JSON.stringify({ ...tiny.config, attn_logit_softcapping: null, final_logit_softcapping: null }));

const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));

async function run(dir: string, quantize: 'none' | 'int8') {
  const model = await LocalModel.load(dir, { quantize, threads: 1 });
  try {
    const prompt = model.tokenizer.encode('the cat sat on the mat, and then the dog', true);
    const generated = await model.generate(prompt, { maxNewTokens: 10, stopTokenIds: [] });
    const [scored] = await model.score([{ inputIds: [...prompt, ...generated.tokens], responseStart: prompt.length }]);
    return { row: { inputIds: [...prompt, ...generated.tokens], responseStart: prompt.length }, generated: generated.logprobs, scored: scored! };
  } finally {
    await model.close();
  }
}

async function score(dir: string, row: { inputIds: number[]; responseStart: number }, quantize: 'none' | 'int8' = 'none'): Promise<number[]> {
  const model = await LocalModel.load(dir, { quantize, threads: 1 });
  try {
    return (await model.score([row]))[0]!;
  } finally {
    await model.close();
  }
}

describe("Gemma 2's final soft-cap", () => {
  it('the scoring head and the generating head agree, fp32 and int8; the cap changes the numbers', async () => {
    const fp32 = await run(tiny.dir, 'none');
    const int8 = await run(tiny.dir, 'int8');
    expect(maxDiff(fp32.scored, fp32.generated)).toBeLessThan(1e-4);
    // accuracy_level 4 quantises activations per call, so prefill and decode differ a little.
    expect(maxDiff(int8.scored, int8.generated)).toBeLessThan(0.05);
    const drift = maxDiff(await score(tiny.dir, fp32.row, 'int8'), fp32.scored);
    expect(drift).toBeLessThan(0.1);
    const capEffect = maxDiff(await score(uncapped, fp32.row), fp32.scored);
    console.log(`Gemma 2 heads: int8 vs fp32 ${drift.toExponential(2)} nats; the caps move the log-probs by up to ${capEffect.toFixed(2)} nats`);
    expect(capEffect).toBeGreaterThan(1);
  });
});
