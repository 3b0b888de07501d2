// `hindsight score --adapter DIR`: the log-probs of a trained adapter's policy, equal to what
// the trainer's own training step gives for that adapter, in both input forms; bad input and
// bad flags get one-line errors.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { padBatch } from '../../src-main/train/batches.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { train } from '../../src-main/train/trainer.js';
import { runCli as cli } from '../helpers/cli.js';

const MODEL = path.resolve('resources/models/stories260K');
const ctx = [{ role: 'user', content: 'Tell me a story.' }];
const replies = [' Once upon a time, there was a little girl named Lily.', ' The dog ran to the park and played with a ball.', ' Lily went to the park with her mom.'];
let tmp: string;
let adapterDir: string;
let inputFile: string;
let spans: { inputIds: number[]; responseStart: number }[];

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-score-adapter-'));
  const tok = ChatTokenizer.load(MODEL);
  spans = replies.map((r) => tok.encodeResponse(ctx, r));
  const data = path.join(tmp, 'data.jsonl');
  fs.writeFileSync(data, spans.map((s, i) => JSON.stringify({ input_ids: s.inputIds, response_start: s.responseStart, reward: i === 1 ? -1 : 1 })).join('\n') + '\n');
  adapterDir = path.join(tmp, 'adapter');
  await train({ modelDir: MODEL, outDir: adapterDir, dataFile: data, method: 'rl', steps: 3, batchSize: 3, lr: 5e-3, seed: 1, loraR: 4, loraAlpha: 8 });
  // Both input forms: messages + response for the first row, token ids for the others.
  inputFile = path.join(tmp, 'in.jsonl');
  const lines = [{ messages: ctx, response: replies[0] }, ...spans.slice(1).map((s) => ({ input_ids: s.inputIds, response_start: s.responseStart }))];
  fs.writeFileSync(inputFile, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
}, 120_000);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const readScores = (file: string) => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l).logprobs as number[]);

describe('hindsight score --adapter', () => {
  it("gives the trainer's policy log-probs for the adapter, not the base model's", async () => {
    const out = path.join(tmp, 'adapter-scores.jsonl');
    const r = await cli('score', '--model', MODEL, '--input', inputFile, '--out', out, '--adapter', adapterDir, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ rows: 3, execution_provider: 'cpu', adapter: adapterDir });
    const scored = readScores(out);

    const adapter = readAdapter(adapterDir, Checkpoint.open(MODEL).config);
    const step = await createTrainStep(MODEL, {
      lora: adapter.lora, device: 'cpu',
      loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
      optimizer: { kind: 'sgd', lr: 1, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
    });
    const batch = padBatch(spans);
    const policy = await step.policyLogprobs(batch, adapter.weights);
    await step.close();

    const baseOut = path.join(tmp, 'base-scores.jsonl');
    expect((await cli('score', '--model', MODEL, '--input', inputFile, '--out', baseOut)).code).toBe(0);
    const base = readScores(baseOut);

    let maxDiff = 0, moved = 0;
    spans.forEach((s, b) => {
      expect(scored[b]).toHaveLength(s.inputIds.length - s.responseStart);
      scored[b]!.forEach((x, i) => {
        maxDiff = Math.max(maxDiff, Math.abs(x - policy[b * batch.seqLen + s.responseStart + i]!));
        moved = Math.max(moved, Math.abs(x - base[b]![i]!));
      });
    });
    expect(maxDiff).toBeLessThan(1e-5);
    expect(moved).toBeGreaterThan(1e-2);
  });

  it('bad input and bad flags get one-line errors', async () => {
    const out = path.join(tmp, 'never.jsonl');
    const missing = await cli('score', '--model', MODEL, '--input', inputFile, '--out', out, '--adapter', path.join(tmp, 'nope'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/adapter folder not found: .*nope/);

    const bad = path.join(tmp, 'bad.jsonl');
    fs.writeFileSync(bad, JSON.stringify({ input_ids: [1, 2, 99999], response_start: 1 }) + '\n');
    const outside = await cli('score', '--model', MODEL, '--input', bad, '--out', out, '--adapter', adapterDir);
    expect(outside.code).toBe(1);
    expect(outside.stderr).toMatch(/bad\.jsonl: row 1: token id 99999 is outside the vocabulary \[0, \d+\)/);
    // Without the adapter the base model's path names the file the same way.
    const outsideBase = await cli('score', '--model', MODEL, '--input', bad, '--out', out);
    expect(outsideBase.code).toBe(1);
    expect(outsideBase.stderr).toMatch(/bad\.jsonl: row 1: token id 99999 is outside the vocabulary \[0, \d+\)/);
    // A row past the model's positions: its log-probs would mean nothing.
    const long = path.join(tmp, 'long.jsonl');
    const positions = (JSON.parse(fs.readFileSync(path.join(MODEL, 'config.json'), 'utf8')).max_position_embeddings as number);
    fs.writeFileSync(long, JSON.stringify({ input_ids: Array.from({ length: positions + 1 }, (_, i) => 1 + (i % 50)), response_start: 1 }) + '\n');
    const past = await cli('score', '--model', MODEL, '--input', long, '--out', out);
    expect(past.code).toBe(1);
    expect(past.stderr).toMatch(new RegExp(`long\\.jsonl: row 1 is ${positions + 1} tokens long, past the model's ${positions} positions \\(its context length\\)`));

    const flags = await cli('score', '--model', MODEL, '--input', inputFile, '--out', out, '--adapter', adapterDir, '--quantize', 'int3');
    expect(flags.code).toBe(2);
    expect(flags.stderr).toMatch(/--quantize must be one of none, int8, int4, got 'int3'/);
    expect(fs.existsSync(out)).toBe(false);
  });

  it('scores with the adapter on int8 weights: near the fp32 scores, far from the base\'s', async () => {
    const fp32 = path.join(tmp, 'adapter-fp32.jsonl'), int8 = path.join(tmp, 'adapter-int8.jsonl');
    const asFp32 = await cli('score', '--model', MODEL, '--input', inputFile, '--out', fp32, '--adapter', adapterDir, '--json');
    const asInt8 = await cli('score', '--model', MODEL, '--input', inputFile, '--out', int8, '--adapter', adapterDir, '--quantize', 'int8', '--json');
    expect([asFp32.code, asFp32.json().quantize, asInt8.code, asInt8.json().quantize]).toEqual([0, 'none', 0, 'int8']);
    const [a, b] = [readScores(fp32), readScores(int8)];
    const baseInt8 = path.join(tmp, 'base-int8.jsonl');
    expect((await cli('score', '--model', MODEL, '--input', inputFile, '--out', baseInt8, '--quantize', 'int8')).code).toBe(0);
    const c = readScores(baseInt8);
    const mean = (x: number[][], y: number[][]) => { const d = x.flatMap((row, r) => row.map((v, i) => Math.abs(v - y[r]![i]!))); return d.reduce((s, v) => s + v, 0) / d.length; };
    // int8's drift (mean 0.045 here) is small beside what the adapter changes on the same weights (2.05).
    expect(mean(a, b)).toBeGreaterThan(0);
    expect(mean(a, b)).toBeLessThan(0.1 * mean(c, b));
  });

  it('scores the same rows alike one at a time and in a batch, with --threads', async () => {
    const one = path.join(tmp, 'one-at-a-time.jsonl'), all = path.join(tmp, 'batched.jsonl');
    expect((await cli('score', '--model', MODEL, '--input', inputFile, '--out', one, '--adapter', adapterDir, '--batch-size', '1', '--threads', '1')).code).toBe(0);
    expect((await cli('score', '--model', MODEL, '--input', inputFile, '--out', all, '--adapter', adapterDir, '--batch-size', '3')).code).toBe(0);
    const [a, b] = [readScores(one), readScores(all)];
    expect(b.map((row) => row.length)).toEqual(a.map((row) => row.length));
    a.forEach((row, r) => row.forEach((x, i) => expect(Math.abs(x - b[r]![i]!)).toBeLessThan(1e-5)));
  });
});
