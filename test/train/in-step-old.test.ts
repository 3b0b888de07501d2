// In-step old (src-main/train/step-loss.ts): the stop-gradient marker in the autodiff, and the training step
// that computes old := stopgrad(logp) and the OPD advantages in its own forward pass, against
// the path with a separate forward pass for old and host advantages (advantages.ts
// fillAdvantages): same loss, metrics, gradients and updated weights for rl, opd and combine,
// rows with rollout log-probs included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GraphBuilder, int } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { appendGradients, stopGradient } from '../../src-main/graph/autodiff.js';
import { isStopGradient } from '../../src-main/graph/autodiff.js';
import { fillAdvantages, fillInStepAdvantages, inStepAdvantageMetrics } from '../../src-main/train/advantages.js';
import { padBatch, responseValues, type TrainRow } from '../../src-main/train/batches.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { emptyState } from '../../src-main/train/step-optimizer.js';
import { cloneWeights } from '../../src-main/train/lora.js';
import type { LoraWeights, OptimizerConfig, StepBatch, TrainMethod } from '../../src-main/train/training-step.js';
import { seededRandom, writeTinyModel } from '../../tools/tiny-models.js';
import { LORA, adamw, lossConfig, randomLora, sgd } from './step-helpers.js';

describe('stopGradient', () => {
  /** L = Σ w·f(x, stopgrad(x)); returns L and dL/dx from ONNX Runtime. */
  async function lossAndGrad(f: (b: GraphBuilder, x: string, sx: string) => string, x: number[], w: number[]) {
    const b = new GraphBuilder('stopgrad');
    const xi = b.input('x', 'float32', [x.length]);
    const wi = b.input('w', 'float32', [x.length]);
    const sx = stopGradient(b, xi);
    const loss = b.op('ReduceSum', [b.mul(f(b, xi, sx), wi)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
    b.output(b.identityAs(loss, 'loss'));
    b.output(b.identityAs(appendGradients(b, loss, [xi]).get(xi)!, 'grad'));
    expect(b.graph.nodes.filter(isStopGradient)).toHaveLength(1);
    const session = await ort.InferenceSession.create(serializeModel(b.graph));
    const out = await session.run({ x: new ort.Tensor('float32', Float32Array.from(x), [x.length]), w: new ort.Tensor('float32', Float32Array.from(w), [w.length]) });
    await session.release();
    return { loss: (out.loss!.data as Float32Array)[0]!, grad: Array.from(out.grad!.data as Float32Array) };
  }
  const x = [0.5, -1.25, 2], w = [1, 2, -3];

  it('keeps the value and treats it as a constant: d(x·sg(x))/dx = x, not 2x', async () => {
    const { loss, grad } = await lossAndGrad((b, xi, sx) => b.mul(xi, sx), x, w);
    expect(loss).toBeCloseTo(x.reduce((s, v, i) => s + w[i]! * v * v, 0), 5);
    grad.forEach((g, i) => expect(g).toBeCloseTo(w[i]! * x[i]!, 6));
  });

  it('makes a ratio of exactly 1 whose gradient is the log-prob\'s: d exp(x − sg(x))/dx = 1', async () => {
    const { loss, grad } = await lossAndGrad((b, xi, sx) => b.exp(b.sub(xi, sx)), x, w);
    expect(loss).toBe(w.reduce((s, v) => s + v, 0));
    expect(grad).toEqual(w);
  });

  it('a path only through the stopped value gives a zero gradient', async () => {
    const { grad } = await lossAndGrad((b, _xi, sx) => b.exp(sx), x, w);
    expect(grad).toEqual([0, 0, 0]);
  });
});

describe('in-step old vs a separate forward pass for old', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-instep-'));
  let dir: string;
  let vocab: number;
  const engines: TrainStepEngine[] = [];
  beforeAll(() => {
    dir = path.join(root, 'llama');
    writeTinyModel(dir, { family: 'llama', seed: 31, hiddenSize: 16, intermediateSize: 24, headDim: 8 });
    vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size;
  });
  afterAll(async () => {
    for (const e of engines) await e.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  /**
   * Rows of every kind: ±1 and 0 rewards, with and without a teacher (its own context before
   * the same reply), one with rollout log-probs a little off the policy (so its ratio is not 1
   * and the clip can act), of different lengths (padding).
   */
  function rows(policyOnTokens: (row: TrainRow) => Promise<number[]>): Promise<TrainRow[]> {
    const rand = seededRandom(5);
    const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * (vocab - 3)));
    const make = (prompt: number, reply: number, reward: number, teacherPrompt?: number): TrainRow => {
      const response = tokens(reply);
      const row: TrainRow = { inputIds: [...tokens(prompt), ...response], responseStart: prompt, reward, origin: `row ${prompt}/${reply}` };
      if (teacherPrompt) row.teacher = { inputIds: [...tokens(teacherPrompt), ...response], responseStart: teacherPrompt };
      return row;
    };
    const list = [make(5, 4, 1, 7), make(3, 5, -1, 4), make(4, 3, 0, 6), make(6, 4, 1), make(2, 6, -1, 3)];
    return (async () => {
      const rollout = list[3]!;
      rollout.oldLogprobs = (await policyOnTokens(rollout)).map((v, i) => v + (i % 2 ? 0.4 : -0.3));
      return list;
    })();
  }

  const weightsOpt = { wOpd: 0.7, wRl: 1.3 };

  async function teacherLogprobs(e: TrainStepEngine, method: TrainMethod, list: TrainRow[]) {
    if (method === 'rl') return list.map(() => undefined);
    const withTeacher = list.filter((r) => r.teacher);
    const tb = padBatch(withTeacher.map((r) => r.teacher!));
    const base = await e.baseLogprobs(tb);
    return list.map((r) => (r.teacher ? responseValues(base, tb.seqLen, withTeacher.indexOf(r), r.teacher).slice() : undefined));
  }

  /** max |a − b| / max |b| over one tensor. */
  const relDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
    let d = 0, m = 0;
    for (let i = 0; i < b.length; i++) {
      d = Math.max(d, Math.abs(a[i]! - b[i]!));
      m = Math.max(m, Math.abs(b[i]!));
    }
    return m > 0 ? d / m : d;
  };
  const maxRelDiff = (a: LoraWeights, b: LoraWeights) => Math.max(...[...b].map(([k, v]) => relDiff(a.get(k)!, v)));

  async function compare(method: TrainMethod, optimizer: OptimizerConfig) {
    const e = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig(method), optimizer, device: 'cpu' });
    engines.push(e);
    const weights = randomLora(e.specs, LORA.r, 9);
    const list = await rows(async (row) => {
      const b = padBatch([row]);
      return Array.from(responseValues(await e.policyLogprobs(b, weights), b.seqLen, 0, row));
    });
    const teacher = await teacherLogprobs(e, method, list);
    const inputs = (batch: StepBatch) => ({ method, weights: weightsOpt, rows: list, batch, teacher });

    // The path with a separate forward pass: old first, advantages on the host.
    const before = padBatch(list);
    const policyOld = await e.policyLogprobs(before, weights);
    const hostMetrics = fillAdvantages({ ...inputs(before), policyOld });
    const separate = await e.step(before, cloneWeights(weights), emptyState()); // each path updates a copy of the same start

    // In-step old: one run of the training graph.
    const inStep = padBatch(list);
    fillInStepAdvantages(inputs(inStep));
    const fused = await e.step(inStep, cloneWeights(weights), emptyState());
    const fusedMetrics = inStepAdvantageMetrics({ ...inputs(inStep), policyOld: fused.logprobs });
    return { e, list, separate, fused, policyOld, hostMetrics, fusedMetrics, before };
  }

  for (const method of ['rl', 'opd', 'combine'] as const) {
    for (const [name, optimizer] of [['sgd', sgd(0.05, 0)], ['adamw', adamw(1e-2, 1)]] as const) {
      it(`${method}, ${name}: same loss, metrics, gradients and updated weights`, async () => {
        const { separate, fused, policyOld, hostMetrics, fusedMetrics, before } = await compare(method, optimizer);
        // Non-trivial: the gradients would be 0 if the stop-gradient did not hold old still.

        expect(fused.metrics.gradNorm).toBeGreaterThan(1e-3);
        expect(relDiff([fused.metrics.loss], [separate.metrics.loss])).toBeLessThan(1e-6);
        expect(relDiff([fused.metrics.gradNorm], [separate.metrics.gradNorm])).toBeLessThan(1e-6);
        expect(maxRelDiff(fused.grads!, separate.grads!)).toBeLessThan(1e-6);
        expect(maxRelDiff(fused.weights, separate.weights)).toBeLessThan(1e-6);
        expect(maxRelDiff(fused.state.m, separate.state.m)).toBeLessThan(1e-6);
        expect(fused.metrics.tokens).toBe(separate.metrics.tokens);
        // The policy rows have ρ = 1 exactly; only the rollout row can clip or drift.
        expect(Math.abs(fused.metrics.clipfrac - separate.metrics.clipfrac)).toBeLessThan(1e-6);
        expect(Math.abs(fused.metrics.approxKl - separate.metrics.approxKl)).toBeLessThan(1e-6);
        // The step's log-probs are the forward pass's, so the metrics match too.
        for (let i = 0; i < policyOld.length; i++) if (before.responseMask[i]) expect(Math.abs(fused.logprobs[i]! - policyOld[i]!)).toBeLessThan(1e-5);
        expect(fusedMetrics.rewardMean).toBe(hostMetrics.rewardMean);
        expect(fusedMetrics.advMean).toBeCloseTo(hostMetrics.advMean, 5);
        if (method === 'rl') expect(fusedMetrics.teacherStudentGap).toBeNull();
        else expect(fusedMetrics.teacherStudentGap!).toBeCloseTo(hostMetrics.teacherStudentGap!, 5);
      });
    }
  }

  it('without rollout rows: ratio exactly 1, clipfrac and approx_kl exactly 0, loss = −token mean of A', async () => {
    const { e, list } = await compare('combine', sgd(0.05, 0));
    const policyRows = list.filter((r) => !r.oldLogprobs);
    const teacher = await teacherLogprobs(e, 'combine', policyRows);
    const batch = padBatch(policyRows);
    fillInStepAdvantages({ method: 'combine', weights: weightsOpt, rows: policyRows, batch, teacher });
    const r = await e.step(batch, randomLora(e.specs, LORA.r, 9), emptyState());
    expect(r.metrics.clipfrac).toBe(0);
    expect(r.metrics.approxKl).toBe(0);
    // A from the host formula on the step's own old.
    const check = { ...batch, oldLogprobs: new Float32Array(batch.oldLogprobs.length), advantages: new Float32Array(batch.advantages.length) };
    fillAdvantages({ method: 'combine', weights: weightsOpt, rows: policyRows, batch: check, teacher, policyOld: r.logprobs });
    let sum = 0, n = 0;
    for (let i = 0; i < check.advantages.length; i++) if (batch.responseMask[i]) (sum += check.advantages[i]!), n++;
    expect(relDiff([r.metrics.loss], [-sum / n])).toBeLessThan(1e-6);
  });
});
