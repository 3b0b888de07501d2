// Top-K on-policy distillation (issue 33 item 6, --opd-topk K; src-main/train/step-loss.ts
// appendTopKDistillation): the per-token reverse KL over the teacher's top K and a tail bin on
// hand-computed cases, its gradient against the closed form and finite differences, the tail's
// log against float64 expm1, the teacher's pass (a vocabulary chunk at a time) against the top K
// of the whole log-softmax, the training step's loss against the formula of the student's own
// log-probs and its gradient against finite differences, and two offline steps with it.
// test/interop/openclaw-loss.test.ts runs OpenClaw-RL's formulation in torch on the same inputs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { aggregator, appendTopKDistillation, log1mExp, TAIL_CAP } from '../../src-main/train/step-loss.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { train } from '../../src-main/train/trainer.js';
import type { LoraWeights, StepBatch, TeacherTopK } from '../../src-main/train/training-step.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { gradCheck } from '../graph/gradcheck.js';
import { LORA, axpy, dot, lossConfig, randomDirection, randomLora, scaled, sgd, tinyBatch } from './step-helpers.js';

/** Runs the distillation term alone: student and teacher [N, K], weights [N]; token mean over `mask`. */
async function distillation(student: number[][], teacher: number[][], weights: number[], mask = weights.map(() => 1)) {
  const N = student.length, K = student[0]!.length;
  const b = new GraphBuilder('topk');
  const s = b.input('s', 'float32', [N, K]), t = b.input('t', 'float32', [N, K]);
  const w = b.input('w', 'float32', [N]), m = b.input('m', 'float32', [N]);
  const out = appendTopKDistillation(b, { student: s, teacher: t, weights: w }, aggregator(b, m).mean);
  b.output(b.identityAs(out.loss, 'loss'));
  b.output(b.identityAs(out.perToken, 'kl'));
  const session = await ort.InferenceSession.create(serializeModel(b.graph));
  const f32 = (x: number[], dims: number[]) => new ort.Tensor('float32', Float32Array.from(x), dims);
  const r = await session.run({ s: f32(student.flat(), [N, K]), t: f32(teacher.flat(), [N, K]), w: f32(weights, [N]), m: f32(mask, [N]) });
  await session.release();
  return { loss: (r.loss!.data as Float32Array)[0]!, kl: Array.from(r.kl!.data as Float32Array) };
}

const ln = Math.log;

describe('the top-K reverse KL: hand-computed', () => {
  it('two tokens and the tail: KL(student ‖ teacher) over p_s = .5, .3, .2 and p_t = .6, .1, .3', async () => {
    // .5·ln(.5/.6) + .3·ln(.3/.1) + .2·ln(.2/.3) = −0.0911608 + 0.3295837 − 0.0810930 = 0.1573299
    const { kl, loss } = await distillation([[ln(0.5), ln(0.3)]], [[ln(0.6), ln(0.1)]], [1]);
    const expected = 0.5 * ln(0.5 / 0.6) + 0.3 * ln(0.3 / 0.1) + 0.2 * ln(0.2 / 0.3);
    expect(expected).toBeCloseTo(0.1573299, 6);
    expect(kl[0]).toBeCloseTo(expected, 6);
    expect(loss).toBeCloseTo(expected, 6);
  });

  it('reverse, not forward: the student’s probabilities weigh the log-ratios', async () => {
    const { kl } = await distillation([[ln(0.6), ln(0.1)]], [[ln(0.5), ln(0.3)]], [1]);
    // Swapping the two gives KL(p_t ‖ p_s) of the case above, a different number.
    expect(kl[0]).toBeCloseTo(0.6 * ln(0.6 / 0.5) + 0.1 * ln(0.1 / 0.3) + 0.3 * ln(0.3 / 0.2), 6);
  });

  it('equal distributions give 0; the weights and the token mean apply per token', async () => {
    const same = [ln(0.7), ln(0.2)];
    const { kl, loss } = await distillation([same, [ln(0.5), ln(0.3)]], [same, [ln(0.6), ln(0.1)]], [1, 2], [1, 1]);
    expect(kl[0]).toBeCloseTo(0, 7);
    expect(loss).toBeCloseTo((0 + 2 * 0.1573299) / 2, 6);
  });

  it('a top K holding (nearly) all the mass: the tail is 1 − Σp within fp32’s precision of log Σp, capped at 1 − e^(−1e-7)', async () => {
    // Student top-2 mass 1 − 1e-5, teacher 1 − 1e-3: the tails are 1e-5 and 1e-3.
    const s = [ln(0.9), ln(0.1 - 1e-5)].map(Math.fround), t = [ln(0.9), ln(0.1 - 1e-3)].map(Math.fround);
    const { kl } = await distillation([s], [t], [1]);
    // In float64 from the same fp32 inputs: the tails are 1 − Σp of those.
    const bins = (x: number[]) => [...x.map(Math.exp), -Math.expm1(Math.log(x.reduce((a, v) => a + Math.exp(v), 0)))];
    const [ps, pt] = [bins(s), bins(t)];
    expect(ps[2]).toBeCloseTo(1e-5, 7);
    const expected = ps.reduce((a, p, j) => a + p * Math.log(p / pt[j]!), 0);
    // log Σp = −1e-5 is known to fp32's absolute precision (~1e-8), so the student's tail to ~1e-3 of itself.
    expect(Math.abs(kl[0]! - expected)).toBeLessThan(3e-7);
    expect(Math.abs(kl[0]! - expected) / expected).toBeLessThan(3e-4);
    // Mass ≥ 1 (a K that covers the vocabulary, or rounding): finite, the cap's tail.
    const full = await distillation([[ln(0.5), ln(0.5)]], [[ln(0.5), ln(0.5)]], [1]);
    expect(Number.isFinite(full.kl[0]!)).toBe(true);
    expect(full.kl[0]).toBeCloseTo(0, 7);
  });

  it('log(1 − eˢ) matches float64 log(−expm1(s)) across both branches', async () => {
    const xs = [TAIL_CAP, -1e-6, -1e-4, -0.01, -0.3, -0.69, -0.7, -1, -3, -10, -30];
    const b = new GraphBuilder('log1mexp');
    const x = b.input('x', 'float32', [xs.length]);
    b.output(b.identityAs(log1mExp(b, x), 'y'));
    const session = await ort.InferenceSession.create(serializeModel(b.graph));
    const y = (await session.run({ x: new ort.Tensor('float32', Float32Array.from(xs), [xs.length]) })).y!.data as Float32Array;
    await session.release();
    xs.forEach((v, i) => {
      const exact = Math.log(-Math.expm1(Math.fround(v)));
      expect(Math.abs(y[i]! - exact)).toBeLessThan(2e-6 * Math.max(1, Math.abs(exact)));
    });
  });
});

describe('the top-K reverse KL: gradient', () => {
  it('d KL / d student_k = p_k·(s_k − t_k − s_tail + t_tail), the closed form', async () => {
    // p_s = .5, .3 (tail .2), p_t = .6, .1 (tail .3):
    //   k=0: .5·(ln .5 − ln .6 − ln .2 + ln .3) = 0.1115718;  k=1: .3·(ln .3 − ln .1 − ln .2 + ln .3) = 0.4512233
    const report = await gradCheck({
      name: 'topk-kl-closed-form',
      inputs: [{ name: 's', shape: [1, 2], data: [ln(0.5), ln(0.3)] }, { name: 't', shape: [1, 2], data: [ln(0.6), ln(0.1)], wrt: false }],
      build: (b, x) => appendTopKDistillation(b, { student: x.s!, teacher: x.t!, weights: b.scalar(1) }, (v) => v).perToken,
      h: 1e-3,
    });
    const w = report.analytic.s!; // dL/ds for L = Σ y·W with one random W: the closed form times W
    const closed = [0.5 * (ln(0.5) - ln(0.6) - ln(0.2) + ln(0.3)), 0.3 * (ln(0.3) - ln(0.1) - ln(0.2) + ln(0.3))];
    expect(closed[0]).toBeCloseTo(0.1115718, 6);
    expect(closed[1]).toBeCloseTo(0.4512233, 6);
    expect(w[0]! / w[1]!).toBeCloseTo(closed[0]! / closed[1]!, 4);
  });

  it('matches finite differences for random K = 5 log-probs, both tail branches', async () => {
    // Random logits → log-probs of the top 5 of a 12-way softmax (mass < 1), then a case with mass near 1.
    const rand = seededRandom(3);
    const lp = (sharp: number) => {
      const z = Array.from({ length: 12 }, () => sharp * (2 * rand() - 1));
      const lse = Math.log(z.reduce((a, v) => a + Math.exp(v), 0));
      return z.map((v) => v - lse).sort((a, b) => b - a).slice(0, 5);
    };
    for (const sharp of [1, 8]) {
      const s = [lp(sharp), lp(sharp)], t = [lp(sharp), lp(sharp)];
      await gradCheck({
        name: `topk-kl-${sharp}`,
        inputs: [{ name: 's', shape: [2, 5], data: s.flat() }, { name: 't', shape: [2, 5], data: t.flat(), wrt: false }],
        build: (b, x) => appendTopKDistillation(b, { student: x.s!, teacher: x.t!, weights: b.scalar(1) }, (v) => v).perToken,
        h: 1e-3,
      });
    }
  });
});

// ── the step ───────────────────────────────────────────────────────────────────────────

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-topk-'));
let dir: string;
let vocab: number;
const engines: TrainStepEngine[] = [];
beforeAll(() => {
  dir = path.join(root, 'qwen3');
  writeTinyModel(dir, { family: 'qwen3', seed: 21, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
  vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
});
afterAll(async () => {
  for (const e of engines) await e.close();
  fs.rmSync(root, { recursive: true, force: true });
});

async function engine(k: number, vocabChunk?: number, method: 'opd' | 'combine' = 'opd'): Promise<TrainStepEngine> {
  const e = await TrainStepEngine.create(dir, { lora: LORA, loss: { ...lossConfig(method), opdTopK: k }, optimizer: sgd(0.05), device: 'cpu', ...(vocabChunk !== undefined ? { vocabChunk } : {}) });
  engines.push(e);
  return e;
}

/** The log-prob of token `id` at grid cell `cell` under `weights`: the batch with that token put there (causal: nothing before it moves). */
async function logprobOf(e: TrainStepEngine, batch: StepBatch, weights: LoraWeights | null, cell: number, id: number): Promise<number> {
  const probe = { ...batch, inputIds: batch.inputIds.slice(), responseMask: new Float32Array(batch.responseMask.length) };
  probe.inputIds[cell] = BigInt(id);
  probe.responseMask[cell] = 1;
  const lp = weights ? await e.policyLogprobs(probe, weights) : await e.baseLogprobs(probe);
  return lp[cell]!;
}

describe("the teacher's pass", () => {
  it('chunked (a vocabulary chunk at a time) gives the top K of the whole log-softmax, and the targets’ log-probs', async () => {
    const K = 6;
    const whole = await engine(K, 0), chunked = await engine(K, 7); // 7: chunks that split the top K, a ragged last chunk
    const batch = tinyBatch('opd', vocab, 5);
    const a = await whole.baseTopK(batch, K), c = await chunked.baseTopK(batch, K);
    const base = await whole.baseLogprobs(batch);
    batch.responseMask.forEach((m, cell) => {
      if (!m) {
        expect(Array.from(c.topK.logprobs.subarray(cell * K, (cell + 1) * K))).toEqual(new Array(K).fill(0));
        return;
      }
      expect(c.logprobs[cell]).toBeCloseTo(base[cell]!, 5);
      expect(Array.from(c.topK.indices.subarray(cell * K, (cell + 1) * K))).toEqual(Array.from(a.topK.indices.subarray(cell * K, (cell + 1) * K)));
      for (let j = 0; j < K; j++) expect(c.topK.logprobs[cell * K + j]).toBeCloseTo(a.topK.logprobs[cell * K + j]!, 5);
      // Descending, and each the log-prob of its token.
      for (let j = 1; j < K; j++) expect(c.topK.logprobs[cell * K + j]!).toBeLessThanOrEqual(c.topK.logprobs[cell * K + j - 1]!);
    });
    // The top 1 is the log-prob of its token (checked on one cell: each probe is a model run).
    const cell = batch.responseMask.findIndex((m) => m === 1);
    expect(await logprobOf(whole, batch, null, cell, c.topK.indices[cell * K]!)).toBeCloseTo(c.topK.logprobs[cell * K]!, 5);
  });

  it('K above the vocabulary is refused', async () => {
    const e = await engine(4);
    await expect(e.baseTopK(tinyBatch('opd', vocab, 5), vocab + 1)).rejects.toThrow(/top-K must be a whole number in \[1, \d+\]/);
  });
});

/** A batch for a top-K step: its teacher the base model's top K (the hint left out: any teacher will do here), weight 1 on row 0, 0.5 on row 1. */
async function distilBatch(e: TrainStepEngine, K: number): Promise<StepBatch> {
  const batch = tinyBatch('opd', vocab, 5);
  const { topK } = await e.baseTopK(batch, K);
  // A teacher other than the student's base: shift its top-K log-probs (any K log-probs with mass < 1 will do).
  const shifted: TeacherTopK = { k: K, indices: topK.indices, logprobs: Float32Array.from(topK.logprobs, (v, i) => (v === 0 ? 0 : v - 0.05 * (i % 3))) };
  return {
    ...batch, advantages: new Float32Array(batch.advantages.length), oldFromPolicy: Float32Array.from(batch.responseMask),
    teacherTopK: shifted, distillWeights: Float32Array.from(batch.responseMask, (m, i) => (m ? (i < batch.seqLen ? 1 : 0.5) : 0)),
  };
}

describe('the training step with --opd-topk', () => {
  it("its loss is the token mean of w·KL over the student's own log-probs of the teacher's K tokens", async () => {
    const K = 3;
    const e = await engine(K, 7);
    const w = randomLora(e.specs, LORA.r, 3);
    const batch = await distilBatch(e, K);
    const g = await e.gradients(batch, w);
    let sum = 0, n = 0, klSum = 0, klN = 0;
    for (let cell = 0; cell < batch.responseMask.length; cell++) {
      if (!batch.responseMask[cell]) continue;
      const s: number[] = [], t: number[] = [];
      for (let j = 0; j < K; j++) {
        s.push(await logprobOf(e, batch, w, cell, batch.teacherTopK!.indices[cell * K + j]!));
        t.push(batch.teacherTopK!.logprobs[cell * K + j]!);
      }
      const tail = (x: number[]) => Math.log(-Math.expm1(Math.min(Math.log(x.reduce((a, v) => a + Math.exp(v), 0)), TAIL_CAP)));
      const sb = [...s, tail(s)], tb = [...t, tail(t)];
      const kl = sb.reduce((a, v, j) => a + Math.exp(v) * (v - tb[j]!), 0);
      sum += batch.distillWeights![cell]! * kl;
      klSum += kl;
      klN++;
      n++;
    }
    // opd with top-K: A = 0 (the sampled token's term is replaced), so the PPO part is 0.
    expect(g.loss).toBeCloseTo(sum / n, 5);
    expect(g.topkKl).toBeCloseTo(klSum / klN, 5);
    expect(g.loss).toBeGreaterThan(0);
  });

  it('its gradient matches finite differences', async () => {
    const K = 4;
    const e = await engine(K, 7);
    const batch = await distilBatch(e, K);
    const weights = randomLora(e.specs, LORA.r, 7);
    const at = await e.gradients(batch, weights);
    const loss = async (w: LoraWeights) => (await e.gradients(batch, w)).loss;
    const gNorm = Math.sqrt(dot(at.grads, at.grads));
    expect(gNorm).toBeGreaterThan(1e-4);
    const h = 1e-2;
    for (const d of [scaled(at.grads, 1 / gNorm), randomDirection(weights, 8), randomDirection(weights, 9)]) {
      const fd = ((await loss(axpy(weights, d, h))) - (await loss(axpy(weights, d, -h)))) / (2 * h);
      expect(Math.abs(fd - dot(at.grads, d))).toBeLessThan(2e-3 * gNorm + 2e-5);
    }
  });

  it('chunked and unchunked heads give the same loss and gradients', async () => {
    const K = 4;
    const [whole, chunked] = [await engine(K, 0), await engine(K, 7)];
    const batch = await distilBatch(whole, K);
    const w = randomLora(whole.specs, LORA.r, 5);
    const [a, c] = [await whole.gradients(batch, w), await chunked.gradients(batch, w)];
    expect(c.loss).toBeCloseTo(a.loss, 6);
    for (const [key, g] of a.grads) c.grads.get(key)!.forEach((v, i) => expect(v).toBeCloseTo(g[i]!, 5));
  });

  it('a batch without the teacher’s top K is refused', async () => {
    const e = await engine(2);
    const batch = tinyBatch('opd', vocab, 5);
    await expect(e.gradients(batch, randomLora(e.specs, LORA.r, 3))).rejects.toThrow(/top-K distillation needs teacherTopK and distillWeights/);
  });
});

describe('offline runs with --opd-topk', () => {
  /** --data rows with a teacher span: the context with a "hint" token in front, the same reply tokens. */
  function dataFile(name: string, reward: (i: number) => number): string {
    const rand = seededRandom(10);
    const lines = Array.from({ length: 4 }, (_, i) => {
      const ids = Array.from({ length: 10 }, () => Math.floor(rand() * (vocab - 3)));
      const teacher = [ids[0]!, 5, 6, ...ids.slice(1)];
      return JSON.stringify({ input_ids: ids, response_start: 6, reward: reward(i), teacher_input_ids: teacher, teacher_response_start: 8 });
    });
    const file = path.join(root, name);
    fs.writeFileSync(file, lines.join('\n') + '\n');
    return file;
  }

  it.each(['opd', 'combine'] as const)('%s: two steps log the top-K KL, and the run settings keep K and the aggregation', async (method) => {
    const outDir = path.join(root, `run-${method}`);
    const result = await train({
      modelDir: dir, outDir, dataFile: dataFile(`${method}.jsonl`, (i) => (method === 'combine' ? (i % 2 ? 1 : -1) : 0)), method, steps: 2, batchSize: 2,
      lr: 1e-2, seed: 1, loraR: 4, loraAlpha: 8, saveEvery: 0, opdTopK: 5, lossAgg: 'sample-mean',
    });
    expect(result).toMatchObject({ status: 'finished', steps: 2 });
    const log = readLog(result.logFile);
    for (const line of log) {
      expect(line.topk_kl).toBeGreaterThanOrEqual(0);
      expect(line.teacher_student_gap).not.toBeNull();
      expect(line.grad_norm).toBeGreaterThan(0);
    }
    const state = JSON.parse(fs.readFileSync(path.join(result.checkpointDir!, 'trainer_state.json'), 'utf8'));
    expect(state.settings.loss).toMatchObject({ lossAgg: 'sample-mean', opdTopK: 5 });
    // A resume keeps them; asking for another is refused.
    await expect(train({ resume: outDir, steps: 3, opdTopK: 0 })).rejects.toThrow(/keeps its top-K distillation \(5\)/);
    await expect(train({ resume: outDir, steps: 3, lossAgg: 'token-mean' })).rejects.toThrow(/keeps its loss aggregation \("sample-mean"\)/);
  });

  it('rl with --opd-topk is refused: it has no teacher', async () => {
    await expect(train({ modelDir: dir, outDir: path.join(root, 'run-rl'), dataFile: dataFile('rl.jsonl', (i) => (i % 2 ? 1 : -1)), method: 'rl', steps: 1, opdTopK: 5 }))
      .rejects.toThrow(/--opd-topk distils the teacher that a hint makes, which rl does not use; use --method opd or combine/);
  });
});
