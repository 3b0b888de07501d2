/**
 * Where should the optimizer run: in TypeScript on the returned gradients ('host') or inside
 * the training graph ('graph')? Times TrainStepEngine.step for both on the same batch and
 * prints a table; the figures in src-main/train/step-engine.ts come from this script.
 *
 *     npm run bench:step-placement -- [--steps 5] [--threads N]
 *
 * Models: a random 24M-parameter Llama (hidden 512, 8 layers, 8 heads / 4 KV heads, MLP 1408)
 * written to a temp folder, and the demo model stories260K. LoRA r=16, alpha 32 on all seven
 * targets, AdamW with clipping, batch 4 × 128 tokens (the last 64 of each row trained).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LINEAR_TARGETS } from '../src-main/model/decoder.js';
import { TrainStepEngine } from '../src-main/train/step-engine.js';
import type { OptimizerPlacement } from '../src-main/train/step-options.js';
import ort from 'onnxruntime-node';
import { GraphBuilder } from '../src-main/graph/ir.js';
import { serializeModel } from '../src-main/graph/onnx.js';
import { FlatLayout, appendUpdate, applyUpdate, clipScale, emptyState, globalGradNorm } from '../src-main/train/step-optimizer.js';
import type { LoraWeights, OptimizerConfig, OptimizerState, StepBatch } from '../src-main/train/training-step.js';
import { cloneWeights } from '../src-main/train/lora.js';
import { randomLora, seededRandom, writeTinyModel } from '../tools/tiny-models.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const STEPS = flag('steps', 5);
const THREADS = flag('threads', 0) || undefined;
const B = 4, T = 128;
const LOSS = { method: 'rl' as const, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 };
const ADAMW: OptimizerConfig = { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 };

function batchFor(vocab: number): StepBatch {
  const rand = seededRandom(1);
  const n = B * T;
  const batch: StepBatch = {
    batch: B, seqLen: T,
    inputIds: BigInt64Array.from({ length: n }, () => BigInt(Math.floor(rand() * vocab))),
    attentionMask: new BigInt64Array(n).fill(1n),
    positionIds: BigInt64Array.from({ length: n }, (_, i) => BigInt(i % T)),
    responseMask: Float32Array.from({ length: n }, (_, i) => (i % T >= T - 64 ? 1 : 0)),
    oldLogprobs: new Float32Array(n),
    advantages: Float32Array.from({ length: n }, (_, i) => (i % T >= T - 64 ? (Math.floor(i / T) % 2 ? 1 : -1) : 0)),
  };
  return batch;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Both placements side by side, alternating step by step, so load from other processes hits
 * both alike; reports the minimum (the least disturbed run) and the median.
 */
async function measure(dir: string, steps: number) {
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size as number;
  const placements: OptimizerPlacement[] = ['host', 'graph'];
  const engines = await Promise.all(placements.map((placement) => TrainStepEngine.create(dir, {
    lora: { r: 16, alpha: 32, targets: [...LINEAR_TARGETS] }, loss: LOSS, optimizer: ADAMW, device: 'cpu', placement, threads: THREADS,
  })));
  try {
    const batch = batchFor(vocab);
    const start = randomLora(engines[0]!.specs, 16, 2, 0.01);
    batch.oldLogprobs = await engines[0]!.policyLogprobs(batch, start);
    // Each placement's own copy: a step writes its update into the arrays it is given.
    const runs = engines.map(() => ({ weights: cloneWeights(start), state: emptyState() as OptimizerState, times: [] as number[] }));
    for (let s = 0; s <= steps; s++) {
      for (const [k, engine] of engines.entries()) {
        const run = runs[k]!;
        const t0 = performance.now();
        const r = await engine.step(batch, run.weights, run.state);
        if (s > 0) run.times.push(performance.now() - t0); // step 0 is the warm-up
        run.weights = r.weights;
        run.state = r.state;
      }
    }
    const params = [...start.values()].reduce((p, w) => p + w.length, 0);
    return { params, host: runs[0]!.times, graph: runs[1]!.times };
  } finally {
    for (const e of engines) await e.close();
  }
}

/**
 * The part that differs between the placements, alone: an AdamW update of `sizes` tensors as
 * an ONNX session (feeds p, g, m, v; fetches new p, m, v, the norm) vs applyUpdate in JS.
 * Small and quick, so it can be repeated enough to see through other processes' load.
 */
async function optimizerOnly(sizes: number[], repeats = 30) {
  const cfg = ADAMW;
  const b = new GraphBuilder('adamw');
  const params = new Map<string, string>(), grads = new Map<string, string>();
  sizes.forEach((n, i) => {
    params.set(`p${i}`, b.input(`p${i}`, 'float32', [n]));
    grads.set(`p${i}`, b.input(`g${i}`, 'float32', [n]));
  });
  appendUpdate(b, cfg, params, grads);
  const session = await ort.InferenceSession.create(serializeModel(b.graph), { intraOpNumThreads: THREADS ?? 0 });
  const rand = seededRandom(5);
  const data = sizes.map((n) => Float32Array.from({ length: n }, () => rand() - 0.5));
  const weights: LoraWeights = new Map(data.map((d, i) => [`p${i}`, d]));
  const state: OptimizerState = { step: 3, m: new Map(data.map((d, i) => [`p${i}`, d.map((x) => x * 0.1)])), v: new Map(data.map((d, i) => [`p${i}`, d.map((x) => x * x)])) };
  const layout = new FlatLayout(new Map(sizes.map((n, i) => [`p${i}`, n])));
  const host: number[] = [], graph: number[] = [];
  for (let r = 0; r < repeats; r++) {
    // applyUpdate writes in place: each repeat updates a fresh copy of the same inputs, as the session does.
    const w = cloneWeights(weights), st = { ...state, m: cloneWeights(state.m), v: cloneWeights(state.v) };
    const flatSt = { ...state, m: cloneWeights(state.m), v: cloneWeights(state.v) };
    layout.feeds(cfg, flatSt); // flattened once, as the engine's state is after its first step
    let t0 = performance.now();
    applyUpdate(cfg, w, weights, st, clipScale(globalGradNorm(weights), cfg.maxGradNorm));
    host.push(performance.now() - t0);
    t0 = performance.now();
    const feeds: Record<string, ort.Tensor> = layout.feeds(cfg, flatSt);
    data.forEach((d, i) => {
      feeds[`p${i}`] = new ort.Tensor('float32', d, [d.length]);
      feeds[`g${i}`] = new ort.Tensor('float32', d, [d.length]);
    });
    await session.run(feeds);
    graph.push(performance.now() - t0);
  }
  await session.release();
  return { host, graph };
}

const fmt = (xs: number[]) => `${Math.min(...xs).toFixed(0)} / ${median(xs).toFixed(0)} ms`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-placement-'));
try {
  const random = writeTinyModel(path.join(tmp, 'llama24m'), {
    family: 'llama', hiddenSize: 512, numLayers: 8, numHeads: 8, numKvHeads: 4, headDim: 64, intermediateSize: 1408, std: 0.02, seed: 3,
  }).dir;
  const stories = path.join(path.dirname(fileURLToPath(import.meta.url)), '../resources/models/stories260K');
  console.log(`batch ${B}×${T}, AdamW, LoRA r=16 on all targets, ${STEPS} steps each (stories260K: ${4 * STEPS}) after a warm-up (min / median), ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)}`);
  console.log('model               LoRA params      host update     in-graph update   graph/host (min)');
  for (const [name, dir] of [['random llama 24M', random], ['stories260K', stories]] as const) {
    const m = await measure(dir, dir === stories ? 4 * STEPS : STEPS); // the small model is quick: more steps
    const ratio = Math.min(...m.graph) / Math.min(...m.host);
    console.log(`${name.padEnd(20)}${(m.params / 1e6).toFixed(2).padStart(9)} M   ${fmt(m.host).padStart(16)}   ${fmt(m.graph).padStart(16)}   ${ratio.toFixed(2).padStart(8)}`);
  }
  console.log('\nthe AdamW update alone (the part that differs), same 1.20 M parameters in 56 tensors:');
  const llamaSizes = [512, 512, 512, 512, 512, 1408, 1408].flatMap((inF, k) => {
    const outF = [512, 256, 256, 512, 1408, 1408, 512][k]!;
    return [16 * inF, outF * 16];
  });
  const alone = await optimizerOnly(Array.from({ length: 8 }, () => llamaSizes).flat());
  console.log(`  host (JS loop): ${fmt(alone.host)}   in a session (copies in and out included): ${fmt(alone.graph)}`);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
