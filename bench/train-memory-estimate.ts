/**
 * `npx tsx bench/train-memory-estimate.ts` — the memory estimate (src-shared/train-memory.ts)
 * against the peak memory of real training steps: each case in a process of its own, one step
 * after a warm-up step (two steps, as bench/train-memory.ts measures), printed side by side
 * with the estimate and its error. The peak is the peak RSS with the weight file's pages
 * counted once ({@link peakMemoryMb}): a case with the teacher pass has two sessions mapping
 * the same file, and RSS counts its pages once per mapping. The cases are one row of 256 to
 * 4,096 tokens with recomputation on and off, batch sizes above 1, the teacher's forward pass,
 * int8 and int4 bases, on the same 68M Qwen3 shape (the real 151,936-token vocabulary, small
 * layers); BENCH_MODEL runs them on another checkpoint. test/train/train-memory.test.ts holds the
 * estimate to these figures and to bench/train-memory.ts's Qwen3-0.6B and 8B ones.
 *
 * Each weight file is built by a throwaway step first: the first run of a model (or of a
 * --quantize choice) writes its weights into the graph cache, which peaks higher (measured at
 * this shape: +220 MB fp32, +340 MB int4; docs/design.md §Memory estimate).
 *
 * Options (env): BENCH_THREADS (2), BENCH_CASES (a comma-separated subset of the case names),
 * BENCH_MODEL (a checkpoint folder instead of the 68M shape; the estimate reads its config.json).
 * `--child JSON` runs one case and prints {"peakMb", "maxRssMb"} (the test uses it for a small case).
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { seededRandom } from '../src-main/model/sampling.js';
import { padBatch } from '../src-main/train/batches.js';
import { initLora, loraSpecs, DEFAULT_LORA } from '../src-main/train/lora.js';
import { createTrainStep } from '../src-main/train/step-engine.js';
import { modelShape } from '../src-main/model/host-memory.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import type { OptimizerState } from '../src-main/train/training-step.js';
import { estimateTrainMemory, type ModelShape } from '../src-shared/train-memory.js';
import { LORA_TARGETS, type Quantize } from '../src-shared/training.js';
import { writeTinyModel } from '../tools/tiny-models.js';

export interface EstimateCase {
  model: string;
  batch: number;
  length: number;
  recompute: boolean;
  quantize?: Quantize;
  /** Run the base's forward pass (the teacher, the KL reference, the held-out evaluation) before the steps. */
  teacher?: boolean;
  threads?: number;
}

/** What a case measured, in MiB: the peak ({@link peakMemoryMb}) and the peak RSS as the OS reports it. */
export interface CaseMemory {
  peakMb: number;
  maxRssMb: number;
}

/** One case in this process, after a warm-up step and a measured one. */
export async function measureCase(q: EstimateCase): Promise<CaseMemory> {
  const ckpt = Checkpoint.open(q.model);
  const step = await createTrainStep(ckpt, {
    lora: DEFAULT_LORA, loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
    optimizer: { kind: 'adamw', lr: 1e-4, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
    device: 'cpu', threads: q.threads ?? 2, recompute: q.recompute, maxLength: q.length, quantize: q.quantize,
  });
  const rand = seededRandom(11);
  const rows = Array.from({ length: q.batch }, () => ({ inputIds: Array.from({ length: q.length }, () => Math.floor(rand() * ckpt.config.vocabSize)), responseStart: q.length / 2 }));
  const padded = padBatch(rows);
  const batch = { ...padded, oldFromPolicy: padded.responseMask, advantages: Float32Array.from(padded.responseMask) };
  let weights = initLora(loraSpecs(ckpt.config, DEFAULT_LORA.targets), DEFAULT_LORA.r, 1);
  let state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
  if (q.teacher) await step.baseLogprobs(batch);
  for (let i = 0; i < 2; i++) ({ weights, state } = await step.step(batch, weights, state));
  const memory = { peakMb: peakMemoryMb(), maxRssMb: process.resourceUsage().maxRSS / 1024 };
  await step.close();
  return memory;
}

/**
 * This process's peak RSS in MiB, less the pages of files it maps more than once at the same
 * offset (read now, from /proc/self/smaps; 0 elsewhere than Linux). Each ONNX Runtime session
 * maps the shared weight file itself (every initializer its own mapping, src-main/model/weight-file.ts),
 * and RSS counts a page once per mapping: with the step's session and the teacher's forward
 * session both alive, RSS shows the weights twice though memory holds them once (the second
 * mapping's pages are the first's: smaps lists them as Shared_Clean, with no Anonymous pages,
 * and PSS halves them). Those pages are resident from the teacher pass on, through the peak of
 * the steps after it, so the peak less them now is the peak of what the process holds
 * (docs/design.md §Memory estimate).
 */
export function peakMemoryMb(): number {
  return (process.resourceUsage().maxRSS - pagesMappedAgainKb()) / 1024;
}

/** KiB of file pages in a mapping beyond the first of the same file at the same offset (the largest counts). */
export function pagesMappedAgainKb(smaps = readSmaps()): number {
  const byPlace = new Map<string, number[]>();
  let place: string | undefined;
  for (const line of smaps.split('\n')) {
    // "start-end perms offset dev inode path": inode 0 is anonymous memory.
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ ([0-9a-f]+) (\S+) (\d+)/.exec(line);
    if (head) {
      place = head[3] === '0' ? undefined : `${head[2]} ${head[3]} ${head[1]}`;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && place) byPlace.set(place, [...(byPlace.get(place) ?? []), Number(rss[1])]);
  }
  let again = 0;
  for (const sizes of byPlace.values()) again += sizes.reduce((a, b) => a + b, 0) - Math.max(...sizes);
  return again;
}

function readSmaps(): string {
  try {
    return fs.readFileSync('/proc/self/smaps', 'utf8');
  } catch {
    return ''; // not Linux: RSS as it is
  }
}

/** Runs a case in a child process (its own peak) and returns its peak in MiB ({@link peakMemoryMb}). */
export function measureInChild(q: EstimateCase, env: NodeJS.ProcessEnv = process.env): number {
  return caseInChild(q, env).peakMb;
}

function caseInChild(q: EstimateCase, env: NodeJS.ProcessEnv = process.env): CaseMemory {
  const script = path.resolve(import.meta.dirname, 'train-memory-estimate.ts');
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, '--child', JSON.stringify(q)], { encoding: 'utf8', env, maxBuffer: 1 << 24 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`case ${JSON.stringify(q)} failed: ${r.stderr.slice(-2000)}`);
  return JSON.parse(line) as CaseMemory;
}

/** The estimate for a case, in MiB (a bare step: no tokenizer loaded). */
export function estimateCase(shape: ModelShape, q: EstimateCase): number {
  return estimateTrainMemory(shape, {
    maxLength: q.length, batchSize: q.batch, loraR: DEFAULT_LORA.r, targets: LORA_TARGETS, quantize: q.quantize ?? 'none',
    recompute: q.recompute ? 'on' : 'off', optimizer: 'adamw', teacher: q.teacher ?? false, tokenizer: false,
  }).total / 2 ** 20;
}

const CASES: Record<string, Omit<EstimateCase, 'model'>> = {
  '1x256 on': { batch: 1, length: 256, recompute: true },
  '1x512 on': { batch: 1, length: 512, recompute: true },
  '1x1024 on': { batch: 1, length: 1024, recompute: true },
  '1x2048 on': { batch: 1, length: 2048, recompute: true },
  '2x512 on': { batch: 2, length: 512, recompute: true },
  '4x256 on': { batch: 4, length: 256, recompute: true },
  '4x1024 on': { batch: 4, length: 1024, recompute: true },
  '2x2048 on': { batch: 2, length: 2048, recompute: true },
  '1x4096 on': { batch: 1, length: 4096, recompute: true },
  '1x256 off': { batch: 1, length: 256, recompute: false },
  '1x512 off': { batch: 1, length: 512, recompute: false },
  '1x1024 off': { batch: 1, length: 1024, recompute: false },
  '1x2048 off': { batch: 1, length: 2048, recompute: false },
  '2x512 off': { batch: 2, length: 512, recompute: false },
  '1x1024 int8': { batch: 1, length: 1024, recompute: true, quantize: 'int8' },
  '1x1024 int4': { batch: 1, length: 1024, recompute: true, quantize: 'int4' },
  '1x256 teacher': { batch: 1, length: 256, recompute: true, teacher: true },
  '1x1024 teacher': { batch: 1, length: 1024, recompute: true, teacher: true },
  '4x512 teacher': { batch: 4, length: 512, recompute: true, teacher: true },
  '1x1024 int4 teacher': { batch: 1, length: 1024, recompute: true, quantize: 'int4', teacher: true },
};

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) {
    console.log(JSON.stringify(await measureCase(JSON.parse(process.argv[childAt + 1]!) as EstimateCase)));
    return;
  }
  const model = path.resolve(process.env.BENCH_MODEL ?? 'bench/output/qwen3-shape-68m');
  if (!process.env.BENCH_MODEL && !fs.existsSync(path.join(model, 'model.safetensors'))) {
    writeTinyModel(model, { family: 'qwen3', tie: true, hiddenSize: 384, numLayers: 6, numHeads: 6, numKvHeads: 2, headDim: 64, intermediateSize: 1024, vocabSize: 151936, std: 0.02, seed: 5 });
  }
  const threads = Number(process.env.BENCH_THREADS ?? 2);
  const only = process.env.BENCH_CASES?.split(',');
  const shape = modelShape(model);
  const cases = Object.entries(CASES).filter(([name]) => !only || only.includes(name));
  // Builds the weight files the cases read.
  for (const quantize of new Set(cases.map(([, c]) => c.quantize ?? 'none'))) measureInChild({ model, batch: 1, length: 64, recompute: true, quantize, threads });
  console.log('case                 peak RSS  measured  estimate  error');
  for (const [name, c] of cases) {
    const q = { ...c, model, threads };
    const { peakMb: measured, maxRssMb } = caseInChild(q), estimated = estimateCase(shape, q);
    console.log(`${name.padEnd(20)} ${maxRssMb.toFixed(0).padStart(6)} MB ${measured.toFixed(0).padStart(6)} MB ${estimated.toFixed(0).padStart(6)} MB ${(100 * (estimated / measured - 1)).toFixed(1).padStart(6)}%`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) await main();
