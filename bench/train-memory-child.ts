/**
 * One configuration of bench/train-memory.ts, run in a process of its own so that its peak
 * RSS is its own.
 */
import fs from 'node:fs';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { padBatch } from '../src-main/train/batches.js';
import { initLora, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { writeAdapter } from '../src-main/train/peft.js';
import { createTrainStep } from '../src-main/train/step-engine.js';
import type { OptimizerPlacement } from '../src-main/train/step-options.js';
import type { OptimizerConfig, OptimizerState, StepBatch, StepMetrics } from '../src-main/train/training-step.js';
import type { Device } from '../src-main/model/ort-session.js';
import type { Precision, Quantize } from '../src-shared/training.js';
import { saveCheckpoint } from '../src-main/train/run-checkpoint.js';
import { QWEN3_8B, randomQuantizedSource } from './quantized-model.js';
import type { AttentionChunking } from '../src-main/model/attention.js';
import { epochMs, type ProfileWindow } from './ort-profile.js';

export interface ChildRequest {
  kind: 'step' | 'sessions' | 'prepack';
  model: string;
  threads: number;
  repeats: number;
  seqLen: number;
  vocabChunk?: number;
  recompute?: boolean;
  /** Train on every position (what the loss part cost when every position went through the head). */
  everyPosition?: boolean;
  /** ONNX Runtime's memory-pattern planning for the step (what DEFAULT_MEMORY_PATTERN was chosen by). */
  memoryPattern?: boolean;
  sessions?: { share: boolean; stepPrepack: boolean; generatePrepack: boolean };
  /** Where the step runs (default cpu; bench/gpu.ts asks for a GPU). */
  device?: Device;
  /** The base's arithmetic (default: the device's). */
  precision?: Precision;
  /** The frozen base quantised (QLoRA, docs/design.md §QLoRA); default none. */
  quantize?: Quantize;
  /** Instead of `model`: this shape written straight into `quantize`'s blocks (./quantized-model.ts), and a checkpoint written after the steps. */
  quantizedShape?: 'qwen3-8b';
  /** quantizedShape with only this many layers (a quick check of the bench itself). */
  quantizedLayers?: number;
  /** Where the checkpoint goes (quantizedShape). */
  checkpointDir?: string;
  /** When and how the step chunks attention (default the step's own, ATTENTION_CHUNKING). */
  attentionChunking?: AttentionChunking;
  /** Where the optimizer update runs (default the device's, OPTIMIZER_PLACEMENT). */
  placement?: OptimizerPlacement;
}

export interface ChildResult {
  peakMb: number;
  wallS: number;
  cpuS: number;
  rssMb?: number;
  pssMb?: number;
  decodeMs?: number;
  decodeCpuMs?: number;
  /** The warm-up step's loss and gradient norm (from the initial weights): the devices' agreement. */
  firstLoss?: number;
  firstGradNorm?: number;
  /** quantizedShape: seconds to write the checkpoint, and the first step's wall and CPU seconds (graph building included). */
  checkpointS?: number;
  firstStepS?: [number, number];
  /** RSS right after the step session was made (weights in, no step yet). */
  loadedMb?: number;
  /** kind 'prepack': CPU seconds per step and ms per decoded token, [prepacked, not prepacked]. */
  prepack?: { stepCpuS: [number, number]; decodeCpuMs: [number, number] };
  /** The last step's span (epoch ms): bench/gpu.ts's profile summary (BENCH_PROFILE) keeps that step alone. */
  lastRun?: ProfileWindow;
}

const LOSS = { method: 'rl' as const, epsLow: 0.2, epsHigh: 0.28, klBeta: 0 };
const OPTIMIZER: OptimizerConfig = { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Wall seconds and this process's CPU seconds. */
async function timed<R>(f: () => Promise<R>): Promise<[R, number, number]> {
  const t0 = performance.now(), c0 = process.cpuUsage();
  const r = await f();
  const c = process.cpuUsage(c0);
  return [r, (performance.now() - t0) / 1000, (c.user + c.system) / 1e6];
}

function memoryNow(): { rssMb: number; pssMb: number } {
  const kb = (text: string, key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? NaN);
  return {
    rssMb: kb(fs.readFileSync('/proc/self/status', 'utf8'), 'VmRSS') / 1024,
    pssMb: kb(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'), 'Pss') / 1024,
  };
}

function batchOf(vocab: number, T: number, everyPosition: boolean): StepBatch {
  const rand = seededRandom(11);
  const ids = Array.from({ length: T }, () => Math.floor(rand() * vocab));
  const batch = padBatch([{ inputIds: ids, responseStart: everyPosition ? 1 : T / 2 }]);
  return { ...batch, oldFromPolicy: batch.responseMask, advantages: Float32Array.from(batch.responseMask) };
}

/**
 * bench/train_torch.py's request for the step {@link runChild} times: its batch of T tokens and
 * its initial adapter, written to `adapterDir`. The caller adds threads, repeats and device.
 */
export function torchTrainRequest(model: string, T: number, adapterDir: string): Record<string, unknown> {
  const ckpt = Checkpoint.open(model);
  const specs = loraSpecs(ckpt.config, DEFAULT_LORA.targets);
  writeAdapter(adapterDir, { lora: DEFAULT_LORA, specs, weights: initLora(specs, DEFAULT_LORA.r, 1), baseModel: model });
  const batch = batchOf(ckpt.config.vocabSize, T, false);
  const row = (a: ArrayLike<number | bigint>) => [Array.from({ length: T }, (_, i) => Number(a[i]!))];
  return {
    model, adapter: adapterDir, lr: OPTIMIZER.lr, max_grad_norm: OPTIMIZER.maxGradNorm, eps_low: LOSS.epsLow, eps_high: LOSS.epsHigh, old_from_policy: true,
    batch: { input_ids: row(batch.inputIds), response_mask: row(batch.responseMask), old: row(batch.oldLogprobs), advantages: row(batch.advantages) },
  };
}

export async function runChild(q: ChildRequest): Promise<ChildResult> {
  if (q.kind === 'prepack') return comparePrepacking(q);
  const ckpt = q.quantizedShape ? randomQuantizedSource({ ...QWEN3_8B, numLayers: q.quantizedLayers ?? QWEN3_8B.numLayers }, q.quantize === 'int8' ? 'int8' : 'int4') : Checkpoint.open(q.model);
  const share = q.sessions?.share ?? true;
  const [step, loadS, loadCpu] = await timed(() => createTrainStep(ckpt, {
    lora: DEFAULT_LORA, loss: LOSS, optimizer: OPTIMIZER, device: q.device ?? 'cpu', threads: q.threads,
    vocabChunk: q.vocabChunk, recompute: q.recompute, shareWeights: share, prepack: q.sessions?.stepPrepack,
    memoryPattern: q.memoryPattern, maxLength: q.seqLen, precision: q.precision, quantize: q.quantize, attentionChunking: q.attentionChunking,
    placement: q.placement,
  }));
  const loadedMb = memoryNow().rssMb;
  const batch = batchOf(ckpt.config.vocabSize, q.seqLen, q.everyPosition ?? false);
  const specs = loraSpecs(ckpt.config, DEFAULT_LORA.targets);
  let weights = initLora(specs, DEFAULT_LORA.r, 1);
  let state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
  const wall: number[] = [], cpu: number[] = [];
  let first: StepMetrics | undefined;
  let firstStepS: [number, number] | undefined;
  let lastRun: ProfileWindow | undefined;
  for (let i = 0; i <= q.repeats; i++) {
    const startMs = epochMs();
    const [r, s, c] = await timed(() => step.step(batch, weights, state));
    lastRun = { startMs, endMs: epochMs() };
    ({ weights, state } = r);
    first ??= r.metrics;
    firstStepS ??= [s + loadS, c + loadCpu];
    if (i > 0 || q.repeats === 0) (wall.push(s), cpu.push(c)); // the first is the warm-up, unless it is the only step
  }
  const result: ChildResult = { peakMb: 0, wallS: median(wall), cpuS: median(cpu), firstLoss: first?.loss, firstGradNorm: first?.gradNorm, loadedMb, firstStepS, lastRun };
  if (q.checkpointDir) {
    const t0 = performance.now();
    const settings = { bench: 'train-memory', quantize: q.quantize, shape: q.quantizedShape ?? q.model };
    saveCheckpoint(q.checkpointDir, {
      state: { format: 1, step: 1, totalSteps: 1, settings, datasetSha256: '', savedAt: new Date().toISOString() },
      lora: DEFAULT_LORA, specs, weights, optimizer: state, baseModel: q.quantizedShape ?? q.model,
    });
    result.checkpointS = (performance.now() - t0) / 1000;
  }
  if (q.kind === 'sessions') {
    await step.baseLogprobs(batch); // the teacher / reference session
    const engine = ModelEngine.open(q.model, { threads: q.threads, shareWeights: share, prepack: q.sessions?.generatePrepack });
    const prompt = Array.from(batch.inputIds.subarray(0, 16), Number);
    await engine.generate(prompt, { maxNewTokens: 4, stopTokenIds: [] }); // warm-up
    const [out, s, c] = await timed(() => engine.generate(prompt, { maxNewTokens: 32, stopTokenIds: [] }));
    Object.assign(result, memoryNow(), { decodeMs: (1000 * s) / out.tokens.length, decodeCpuMs: (1000 * c) / out.tokens.length });
    await engine.close();
  }
  await step.close();
  result.peakMb = process.resourceUsage().maxRSS / 1024;
  return result;
}

/**
 * Prepacking on and off, alternated step by step in one process so that load from other jobs
 * falls on both alike: CPU seconds per training step and per decoded token.
 */
async function comparePrepacking(q: ChildRequest): Promise<ChildResult> {
  const ckpt = Checkpoint.open(q.model);
  const steps = await Promise.all([true, false].map((prepack) => createTrainStep(ckpt, { lora: DEFAULT_LORA, loss: LOSS, optimizer: OPTIMIZER, device: 'cpu', threads: q.threads, prepack })));
  const engines = [true, false].map((prepack) => ModelEngine.open(q.model, { threads: q.threads, prepack }));
  const batch = batchOf(ckpt.config.vocabSize, q.seqLen, false);
  const weights = initLora(loraSpecs(ckpt.config, DEFAULT_LORA.targets), DEFAULT_LORA.r, 1);
  const state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
  const prompt = Array.from(batch.inputIds.subarray(0, 16), Number);
  const stepCpu: number[][] = [[], []], decodeCpu: number[][] = [[], []];
  for (let i = 0; i <= q.repeats; i++) {
    for (const k of [0, 1]) {
      const [, , c] = await timed(() => steps[k]!.step(batch, weights, state));
      const [out, , d] = await timed(() => engines[k]!.generate(prompt, { maxNewTokens: 32, stopTokenIds: [] }));
      if (i > 0) (stepCpu[k]!.push(c), decodeCpu[k]!.push((1000 * d) / out.tokens.length)); // the first round warms up
    }
  }
  for (const s of steps) await s.close();
  for (const e of engines) await e.close();
  return {
    peakMb: process.resourceUsage().maxRSS / 1024, wallS: 0, cpuS: 0,
    prepack: { stepCpuS: [median(stepCpu[0]!), median(stepCpu[1]!)], decodeCpuMs: [median(decodeCpu[0]!), median(decodeCpu[1]!)] },
  };
}
