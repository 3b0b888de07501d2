/**
 * `npm run bench:train` — one LoRA training step (all seven targets, r=16, alpha=32, AdamW,
 * PPO-clip loss, grad-norm clipping) on a random Llama-shaped model of ~125M parameters,
 * batch 8 × 256 tokens (the second half of each row is the response), on the CPU EP;
 * against PyTorch doing the same step (bench/train_torch.py: same checkpoint, same initial
 * LoRA, same batch, same loss, same thread count) in the same run, under .python/'s PyTorch
 * (PyPI's torch 2.x; Debian's python3-torch where .python/ is missing). Also cross-checks the two: first-step loss and gradient norm.
 *
 * Reports the median time of BENCH_REPEATS steps after a warm-up step, for the trainer's step
 * (old := stopgrad(logp) computed inside the step's own run) and for the former path (a
 * forward pass for old, then the step with old given, which PyTorch mirrors); and the peak
 * resident memory of each process.
 *
 * Measured on the 2-core VM shared with other jobs (load average 7–9, so wall times swing
 * 2×; the process's CPU seconds, in brackets, are the steadier figure), 2 threads, medians of 2:
 *
 *   trainer step, old := stopgrad(logp) in the step     28.2 s (19.0 s CPU)  peak RSS 5.2 GB
 *   before: forward pass for old + step with old given   13.7 + 38.9 = 52.6 s (8.9 + 20.3 = 29.2 s CPU)
 *                                                        peak RSS 8.9 GB (the forward session's copy of the weights)
 *   PyTorch 1.13, the same step with old given           24.1 s               peak RSS 5.2 GB
 *   cross-check of the first step vs PyTorch: |Δloss| 3.8e-8, grad norm relative difference 1.3e-7
 *
 * With the chunked loss and the shared weight file (docs/design.md §Memory; load 3–5): trainer
 * step 16.3 s (14.2 s CPU), peak RSS 3.4 GB, against PyTorch's 17.3 s and 5.2 GB.
 *
 * So computing old inside the step saves the forward pass (a third of the CPU time of a
 * trainer step) and, for rl (no teacher forward either), the forward session's memory (3.7 GB
 * here). The step with old given and the one with old in the step run the same graph and
 * cost the same CPU time (20.3 vs 19.0 s); their wall times differ by the machine's load.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_BATCH (8), BENCH_LEN (256),
 * BENCH_REPEATS (2). Writes to bench/output/ (git-ignored); the model is reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { padBatch } from '../src-main/train/batches.js';
import { cloneWeights, initLora, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { writeAdapter } from '../src-main/train/peft.js';
import { createTrainStep } from '../src-main/train/step-engine.js';
import type { OptimizerConfig, OptimizerState } from '../src-main/train/training-step.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { LLAMA_125M } from './random-model.js';
import { findTorchPython, torchThreadEnv } from './watched-process.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const B = Number(process.env.BENCH_BATCH ?? 8);
const T = Number(process.env.BENCH_LEN ?? 256);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const LOSS = { method: 'rl' as const, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 };
const OPTIMIZER: OptimizerConfig = { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mb = (kb: number) => (kb / 1024).toFixed(0);

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const modelDir = path.join(OUT, 'llama-125m');
  if (!fs.existsSync(path.join(modelDir, 'model.safetensors'))) {
    console.error('writing a random Llama of ~125M parameters …');
    writeTinyModel(modelDir, LLAMA_125M);
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
  const t = Date.now();
  const step = await createTrainStep(ckpt, { lora: DEFAULT_LORA, loss: LOSS, optimizer: OPTIMIZER, device: 'cpu', threads: THREADS });
  const buildS = (Date.now() - t) / 1000;
  /** Wall seconds and this process's CPU seconds (less swayed by other jobs on a shared machine). */
  const timed = async <R>(f: () => Promise<R>): Promise<[R, number, number]> => {
    const t0 = Date.now(), c0 = process.cpuUsage();
    const r = await f();
    const c = process.cpuUsage(c0);
    return [r, (Date.now() - t0) / 1000, (c.user + c.system) / 1e6];
  };

  // The trainer's step: old := stopgrad(logp) inside the step's own run (no forward pass before
  // it, and for rl no forward session at all), rewards ±1 per row. Its warm-up runs before the
  // forward session exists, so the peak memory read then is the trainer's for rl.
  const inStep = { ...batch, oldFromPolicy: batch.responseMask, advantages: Float32Array.from(batch.responseMask, (m, i) => (m ? (Math.floor(i / T) % 2 ? -1 : 1) : 0)) };
  let state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
  // The step writes its update into the arrays it is given: the runs below go on from copies, so `weights` stays the initial adapter.
  let w = cloneWeights(weights);
  const [warm, warmS] = await timed(() => step.step(inStep, w, state));
  ({ weights: w, state } = warm);
  const inStepPeak = process.resourceUsage().maxRSS;

  // The former trainer step: a forward pass for old, then the step with old given. `old` here is
  // a little off the policy (so the ratio and the clip are exercised, identically in PyTorch).
  const [policy, forwardFirstS] = await timed(() => step.policyLogprobs(batch, weights));
  for (let i = 0; i < batch.oldLogprobs.length; i++) {
    if (!batch.responseMask[i]) continue;
    batch.oldLogprobs[i] = policy[i]! + 0.3 * (rand() - 0.5);
    batch.advantages[i] = inStep.advantages[i]!;
  }
  const empty = (): OptimizerState => ({ step: 0, m: new Map(), v: new Map() });
  const [first] = await timed(() => step.step(batch, cloneWeights(weights), empty())); // from the initial weights, for the cross-check

  // Both paths in turn, so load from other jobs falls on both alike.
  const wall = { inStep: [] as number[], forward: [] as number[], given: [] as number[] };
  const cpu = { inStep: [] as number[], forward: [] as number[], given: [] as number[] };
  const record = (k: keyof typeof wall, s: number, c: number) => (wall[k].push(s), cpu[k].push(c));
  for (let i = 0; i < REPEATS; i++) {
    const [r, s, cs] = await timed(() => step.step(inStep, w, state));
    ({ weights: w, state } = r);
    record('inStep', s, cs);
    const [, fs, fc] = await timed(() => step.policyLogprobs(batch, weights));
    record('forward', fs, fc);
    const start = cloneWeights(weights);
    const [, gs, gc] = await timed(() => step.step(batch, start, empty()));
    record('given', gs, gc);
  }
  await step.close();
  const ortStep = median(wall.inStep);
  const before = median(wall.forward) + median(wall.given);
  const cpuNow = median(cpu.inStep), cpuBefore = median(cpu.forward) + median(cpu.given);
  const ortPeak = process.resourceUsage().maxRSS;
  console.log(`onnxruntime (${step.executionProvider} EP, optimizer on the ${step.placement}): graph + session ${buildS.toFixed(1)} s; warm-up step ${warmS.toFixed(2)} s; ` +
    `medians of ${REPEATS}, wall (CPU) seconds`);
  console.log(`  trainer step, old in the step (forward + backward + AdamW, one run): ${ortStep.toFixed(2)} s (${cpuNow.toFixed(1)} s) ` +
    `= ${((B * T) / ortStep).toFixed(0)} tokens/s; peak RSS ${mb(inStepPeak)} MB (training session only)`);
  console.log(`  before, old from a forward pass first: forward ${median(wall.forward).toFixed(2)} s (${median(cpu.forward).toFixed(1)} s; first ${forwardFirstS.toFixed(1)} s, session start) + ` +
    `step with old given ${median(wall.given).toFixed(2)} s (${median(cpu.given).toFixed(1)} s) = ${before.toFixed(2)} s (${cpuBefore.toFixed(1)} s); ` +
    `peak RSS ${mb(ortPeak)} MB (with the forward session)`);
  console.log(`  in-step old saves ${(100 * (1 - ortStep / before)).toFixed(0)}% of the wall time, ${(100 * (1 - cpuNow / cpuBefore)).toFixed(0)}% of the CPU time`);
  console.log(`  first step (old given): loss ${first.metrics.loss.toFixed(6)}, grad norm ${first.metrics.gradNorm.toFixed(6)}, clipfrac ${first.metrics.clipfrac.toFixed(4)}`);

  const python = findTorchPython();
  if (!python) {
    console.log('pytorch: not importable here (make .python/ with bash scripts/python-env.sh for the comparison)');
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
  const env = torchThreadEnv(THREADS);
  const r = spawnSync(python, [path.resolve('bench/train_torch.py'), file], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`train_torch.py failed: ${r.stderr}`);
  const torch = JSON.parse(r.stdout) as { torch: string; threads: number; first_loss: number; first_grad_norm: number; step_s: number; step_cpu_s: number; peak_rss_mb: number };
  console.log(`pytorch ${torch.torch} (${torch.threads} threads): training step ${torch.step_s.toFixed(2)} s (${torch.step_cpu_s.toFixed(1)} s CPU) median of ${REPEATS}; peak RSS ${torch.peak_rss_mb.toFixed(0)} MB`);
  console.log(`  first step: loss ${torch.first_loss.toFixed(6)}, grad norm ${torch.first_grad_norm.toFixed(6)}`);
  console.log(`load average at end ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`cross-check: |Δloss| ${Math.abs(torch.first_loss - first.metrics.loss).toExponential(2)}, ` +
    `grad norm relative difference ${(Math.abs(torch.first_grad_norm - first.metrics.gradNorm) / torch.first_grad_norm).toExponential(2)}`);
  console.log(`ratio: onnxruntime trainer step / pytorch step = ${(ortStep / torch.step_s).toFixed(2)}, with old given ${(median(wall.given) / torch.step_s).toFixed(2)} ` +
    `(below 1: onnxruntime is faster; CPU ${(cpuNow / torch.step_cpu_s).toFixed(2)}); peak memory ratio ${(inStepPeak / 1024 / torch.peak_rss_mb).toFixed(2)} (trainer step), ${(ortPeak / 1024 / torch.peak_rss_mb).toFixed(2)} (with the forward session)`);
}

await main();
