/**
 * `npm run bench:train` — one LoRA training step (all seven targets, r=16, alpha=32, AdamW,
 * PPO-clip loss, grad-norm clipping) on a random Llama-shaped model of ~125M parameters,
 * batch 8 × 256 tokens (the second half of each row is the response), on the CPU EP;
 * against PyTorch doing the same step (bench/train_torch.py: same checkpoint, same initial
 * LoRA, same batch, same loss, same thread count) in the same run when Debian's python3-torch
 * is importable. Also cross-checks the two: first-step loss and gradient norm.
 *
 * Reports the median step time of BENCH_REPEATS steps after a warm-up step, the old-log-prob
 * forward the trainer runs before each step, and peak resident memory of each process.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_BATCH (8), BENCH_LEN (256),
 * BENCH_REPEATS (2). Writes to bench/output/ (git-ignored); the model is reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Checkpoint } from '../src-main/model/checkpoint.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { padBatch } from '../src-main/train/batches.js';
import { initLora, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { writeAdapter } from '../src-main/train/peft.js';
import { createTrainStepInProcess } from '../src-main/train/step/index.js';
import type { OptimizerConfig, OptimizerState } from '../src-main/train/step-api.js';
import { writeTinyModel } from '../test/model/tiny-models.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const B = Number(process.env.BENCH_BATCH ?? 8);
const T = Number(process.env.BENCH_LEN ?? 256);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const LOSS = { method: 'rl' as const, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 };
const OPTIMIZER: OptimizerConfig = { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 };

function findTorchPython(): string | undefined {
  for (const py of ['python3', '/usr/bin/python3']) {
    if (spawnSync(py, ['-c', 'import torch, numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mb = (kb: number) => (kb / 1024).toFixed(0);

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const modelDir = path.join(OUT, 'llama-125m');
  if (!fs.existsSync(path.join(modelDir, 'model.safetensors'))) {
    console.error('writing a random Llama of ~125M parameters …');
    writeTinyModel(modelDir, { family: 'llama', hiddenSize: 768, numLayers: 12, numHeads: 12, numKvHeads: 4, headDim: 64, intermediateSize: 2048, vocabSize: 32000, std: 0.02, seed: 7 });
  }
  const ckpt = Checkpoint.open(modelDir);
  const c = ckpt.config;
  const params = ckpt.tensorNames.reduce((n, name) => n + ckpt.entry(name).shape.reduce((a, d) => a * d, 1), 0);
  const specs = loraSpecs(c, DEFAULT_LORA.targets);
  const weights = initLora(specs, DEFAULT_LORA.r, 1);
  const loraParams = [...weights.values()].reduce((n, w) => n + w.length, 0);
  const adapterDir = path.join(OUT, 'train-bench-adapter');
  writeAdapter(adapterDir, { lora: DEFAULT_LORA, specs, weights, baseModel: modelDir });

  // The batch: random tokens, responses in the second half, rewards ±1, and `old` a little
  // off the policy (so the ratio and the clip are exercised, identically in both).
  const rand = seededRandom(11);
  const rows = Array.from({ length: B }, () => ({ inputIds: Array.from({ length: T }, () => Math.floor(rand() * c.vocabSize)), responseStart: T / 2 }));
  const batch = padBatch(rows);

  console.log(`model: random Llama ${(params / 1e6).toFixed(1)}M parameters (${c.numLayers} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}); ` +
    `LoRA r=${DEFAULT_LORA.r} on ${DEFAULT_LORA.targets.join(',')}: ${(loraParams / 1e6).toFixed(2)}M trainable; batch ${B} × ${T}; ${THREADS} threads`);
  let t = Date.now();
  const step = await createTrainStepInProcess(ckpt, { lora: DEFAULT_LORA, loss: LOSS, optimizer: OPTIMIZER, device: 'cpu', threads: THREADS });
  const buildS = (Date.now() - t) / 1000;
  t = Date.now();
  const policy = await step.policyLogprobs(batch, weights);
  const forwardFirstS = (Date.now() - t) / 1000;
  for (let i = 0; i < batch.oldLogprobs.length; i++) {
    if (!batch.responseMask[i]) continue;
    batch.oldLogprobs[i] = policy[i]! + 0.3 * (rand() - 0.5);
    batch.advantages[i] = Math.floor(i / T) % 2 ? -1 : 1;
  }
  const forwardTimes: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    t = Date.now();
    await step.policyLogprobs(batch, weights);
    forwardTimes.push((Date.now() - t) / 1000);
  }
  let state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
  let w = weights;
  t = Date.now();
  const first = await step.step(batch, w, state); // warm-up, from the initial weights
  const warmS = (Date.now() - t) / 1000;
  ({ weights: w, state } = first);
  const times: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    t = Date.now();
    ({ weights: w, state } = await step.step(batch, w, state));
    times.push((Date.now() - t) / 1000);
  }
  await step.close();
  const ortStep = median(times);
  const ortPeak = process.resourceUsage().maxRSS;
  console.log(`onnxruntime (${step.executionProvider} EP, optimizer on the ${step.placement}): graph + session ${buildS.toFixed(1)} s; ` +
    `first forward ${forwardFirstS.toFixed(1)} s (session start); old-log-prob forward ${median(forwardTimes).toFixed(2)} s; ` +
    `warm-up step ${warmS.toFixed(2)} s; training step (forward + backward + AdamW) ${ortStep.toFixed(2)} s median of ${REPEATS} ` +
    `= ${((B * T) / ortStep).toFixed(0)} tokens/s; peak RSS ${mb(ortPeak)} MB`);
  console.log(`  first step: loss ${first.metrics.loss.toFixed(6)}, grad norm ${first.metrics.gradNorm.toFixed(6)}, clipfrac ${first.metrics.clipfrac.toFixed(4)}`);

  const python = findTorchPython();
  if (!python) {
    console.log('pytorch: not importable here (install Debian\'s python3-torch for the comparison)');
    return;
  }
  const grid = (a: ArrayLike<number | bigint>) => Array.from({ length: B }, (_, r) => Array.from({ length: T }, (_, i) => Number(a[r * T + i]!)));
  const request = {
    model: modelDir, adapter: adapterDir, threads: THREADS, repeats: REPEATS, lr: OPTIMIZER.lr, max_grad_norm: OPTIMIZER.maxGradNorm,
    eps_low: LOSS.epsLow, eps_high: LOSS.epsHigh,
    batch: { input_ids: grid(batch.inputIds), response_mask: grid(batch.responseMask), old: grid(batch.oldLogprobs), advantages: grid(batch.advantages) },
  };
  const file = path.join(OUT, 'train-torch-request.json');
  fs.writeFileSync(file, JSON.stringify(request));
  const env = { ...process.env, OMP_NUM_THREADS: String(THREADS), OPENBLAS_NUM_THREADS: String(THREADS) };
  const r = spawnSync(python, [path.resolve('bench/train_torch.py'), file], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`train_torch.py failed: ${r.stderr}`);
  const torch = JSON.parse(r.stdout) as { torch: string; threads: number; first_loss: number; first_grad_norm: number; step_s: number; peak_rss_mb: number };
  console.log(`pytorch ${torch.torch} (${torch.threads} threads): training step ${torch.step_s.toFixed(2)} s median of ${REPEATS}; peak RSS ${torch.peak_rss_mb.toFixed(0)} MB`);
  console.log(`  first step: loss ${torch.first_loss.toFixed(6)}, grad norm ${torch.first_grad_norm.toFixed(6)}`);
  console.log(`cross-check: |Δloss| ${Math.abs(torch.first_loss - first.metrics.loss).toExponential(2)}, ` +
    `grad norm relative difference ${(Math.abs(torch.first_grad_norm - first.metrics.gradNorm) / torch.first_grad_norm).toExponential(2)}`);
  console.log(`ratio: onnxruntime step / pytorch step = ${(ortStep / torch.step_s).toFixed(2)} (below 1: onnxruntime is faster); ` +
    `peak memory ratio ${(ortPeak / 1024 / torch.peak_rss_mb).toFixed(2)}`);
}

await main();
