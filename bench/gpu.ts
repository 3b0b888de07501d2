/**
 * `npm run bench:gpu` — Hindsight on GPU execution providers, each in fp32 and in mixed precision
 * (fp16 projections), beside Hindsight on the CPU and PyTorch on the GPU, in one run, on the
 * Qwen3-0.6B shape (random weights, bench/random-model.ts):
 *
 *   score     4 × 512 tokens (log-probs of the second halves): time, and the largest |Δ log-prob|
 *             of each run against the table's first row (Hindsight on the CPU, where it runs)
 *   train     one LoRA step (r16, all seven targets, AdamW, rl loss, recomputation off),
 *             1 × BENCH_TRAIN_LEN tokens with the reply the second half: time, and the first
 *             step's loss and gradient norm on each; each GPU also with the optimizer update on
 *             the host instead of in the graph (its default there, OPTIMIZER_PLACEMENT)
 *   generate  greedy decode of BENCH_NEW_TOKENS after a prompt of each of BENCH_PROMPT_LENS
 *             tokens: tokens/s, and whether the tokens are the CPU's; each GPU also the other
 *             way it can decode (WebGPU: the cache in host memory instead of on the GPU; CUDA:
 *             token by token, the whole cache sent every token, instead of in chunks)
 *
 * Every measurement runs in a process of its own (bench/real-shapes-child.ts,
 * bench/train-memory-child.ts, bench/model_torch.py, bench/train_torch.py), one after another;
 * each time is the median of BENCH_REPEATS runs after a warm-up, CPU seconds beside wall.
 *
 * Where nvidia-smi answers, every side also reports the GPU's peak memory over its process's
 * life, polled every 100 ms (the rows run one at a time, so the card's use above the idle
 * baseline is that process's, its CUDA context included, for PyTorch as for ONNX Runtime).
 *
 * Options (env): BENCH_DEVICES (webgpu; a list, e.g. cuda,webgpu: cuda once `npm run setup:gpu`
 * installed its provider), BENCH_PRECISIONS (fp32,fp16: each GPU row in each), BENCH_CPU_PARTS
 * (score,train,generate: the parts that also run on the CPU, for the same machine's figure),
 * BENCH_TORCH_DEVICE (cuda; none leaves PyTorch out), BENCH_PARTS (score,train,generate),
 * BENCH_THREADS (every core: the CPU side's threads), BENCH_REPEATS (3), BENCH_TRAIN_LEN (2048),
 * BENCH_NEW_TOKENS (128), BENCH_PROMPT_LENS (32; e.g. 32,2048), BENCH_MODEL (another checkpoint folder instead of the random 0.6B shape).
 * The model goes to bench/output/ (git-ignored).
 *
 * BENCH_PROFILE=1 turns on ONNX Runtime's profiler in every Hindsight row's process
 * (HINDSIGHT_ORT_PROFILE, one trace per session in bench/output/gpu-profile/<part>-<device>-
 * <precision>/) and prints, under each part's table, where that row's last timed repetition
 * went (bench/ort-profile.ts): time in node kernels, in session runs outside them and outside
 * runs, by execution provider and by op type (top 15), each as a share of the repetition's
 * wall time, and the Memcpy nodes between providers; PyTorch's training row adds one step under
 * torch.profiler after its timed ones (its ops' own GPU time). The profiler slows the rows it records,
 * so a profiled run's timings are not the table's figures. On CUDA a node's time is its launch
 * on the host unless CUDA_LAUNCH_BLOCKING=1 is set as well (bench/ort-profile.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { keepCudaFp32Exact } from '../src-main/model/cuda-env.js';
import { PRECISIONS, defaultPrecision, type Precision } from '../src-shared/training.js';
import { OPTIMIZER_PLACEMENT, type OptimizerPlacement } from '../src-main/train/step-options.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { holdsTensorsOnDevice, type Device } from '../src-main/model/ort-session.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { DEFAULT_LORA } from '../src-main/train/lora.js';
import { ensureRandomModel } from './random-model.js';
import type { RealChildRequest, RealChildResult, Timed } from './real-shapes-child.js';
import { torchTrainRequest, type ChildRequest as StepRequest, type ChildResult as StepResult } from './train-memory-child.js';
import { findTorchPython, parseLast, runWatched, torchThreadEnv } from './watched-process.js';
import { formatProfile, summariseProfiles, type ProfileWindow } from './ort-profile.js';

const OUT = path.resolve('bench/output');
const DEVICES = (process.env.BENCH_DEVICES ?? process.env.BENCH_DEVICE ?? 'webgpu').split(',') as Device[];
const GPU_PRECISIONS = (process.env.BENCH_PRECISIONS ?? PRECISIONS.join(',')).split(',') as Precision[];
const CPU_PARTS = (process.env.BENCH_CPU_PARTS ?? 'score,train,generate').split(',');
const TORCH_DEVICE = process.env.BENCH_TORCH_DEVICE ?? 'cuda';
const PARTS = (process.env.BENCH_PARTS ?? 'score,train,generate').split(',');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const TRAIN_LEN = Number(process.env.BENCH_TRAIN_LEN ?? 2048);
const NEW_TOKENS = Number(process.env.BENCH_NEW_TOKENS ?? 128);
const PROMPT_LENS = (process.env.BENCH_PROMPT_LENS ?? '32').split(',').map(Number);
const MEMORY_LIMIT_MB = 64 * 1024;
const PROFILE = process.env.BENCH_PROFILE === '1';
const PROFILE_DIR = path.join(OUT, 'gpu-profile');

const f = (x: number, d = 2) => x.toFixed(d);
const secs = (t: Timed) => `${f(t.wallS)} s / ${f(t.cpuS, 1)} s CPU`;
const gb = (mb: number) => `${f(mb / 1024)} GB`;

/** nvidia-smi's query of the memory in use on each card, in MiB, a number a line. */
const MEMORY_QUERY = ['--query-gpu=memory.used', '--format=csv,noheader,nounits'];

/** The GPU's memory in use now (MiB), summed over its cards; undefined without nvidia-smi. */
function gpuMemoryMb(): number | undefined {
  const r = spawnSync('nvidia-smi', MEMORY_QUERY, { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  return r.stdout.trim().split('\n').reduce((sum, line) => sum + Number(line), 0);
}

/**
 * Runs `work` while polling the GPU's memory every 100 ms (nvidia-smi in the background, so
 * the event loop stays free): the peak above the baseline before it started, in MiB.
 */
async function withGpuPeak<T>(work: () => Promise<T>): Promise<{ result: T; gpuPeakMb?: number }> {
  const baseline = gpuMemoryMb();
  if (baseline === undefined) return { result: await work() };
  const poll = spawn('nvidia-smi', [...MEMORY_QUERY, '-lms', '100'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let peak = baseline;
  poll.stdout.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line.trim()) peak = Math.max(peak, Number(line));
  });
  try {
    return { result: await work(), gpuPeakMb: peak - baseline };
  } finally {
    poll.kill();
  }
}

/** The profile summaries of the part being run (BENCH_PROFILE), printed under its table. */
const profiles: string[] = [];

/**
 * A Hindsight child's result (with the GPU's peak), or the error it ended with (a GPU that
 * cannot run it is a finding, not a crash). Under BENCH_PROFILE its sessions write their
 * traces to a folder of the row's own, and the summary of its last timed run joins `profiles`.
 */
async function hindsightChild<T extends { lastRun?: ProfileWindow }>(args: string[], what: string, row: string): Promise<(T & { gpuPeakMb?: number }) | Error> {
  const traces = path.join(PROFILE_DIR, row);
  if (PROFILE) fs.rmSync(traces, { recursive: true, force: true });
  const env = PROFILE ? { ...process.env, HINDSIGHT_ORT_PROFILE: traces } : process.env;
  const { result: w, gpuPeakMb } = await withGpuPeak(() => runWatched(process.execPath, [...process.execArgv, ...args], env, MEMORY_LIMIT_MB));
  try {
    const r = parseLast<T>(w, what);
    if (PROFILE) profiles.push(formatProfile(`${what}, its last timed run (${traces})`, await summariseProfiles(traces, r.lastRun)));
    return { ...r, gpuPeakMb };
  } catch (err) {
    return err as Error;
  }
}

/** A row's folder of traces and its profile's title: the part and its side (sideLabel). */
const rowName = (part: string, r: Partial<Side>) => `${part}-${r.device ?? 'cpu'}-${r.precision ?? 'default'}${r.decodeCacheOnDevice === false ? '-host-cache' : ''}${r.decodeInGraph === false ? '-token-by-token' : ''}${r.placement === 'host' ? '-host-update' : ''}`;
const rowTitle = (part: string, r: Partial<Side>) => `${part}: ${sideLabel({ device: r.device ?? 'cpu', precision: r.precision ?? 'fp32', decodeCacheOnDevice: r.decodeCacheOnDevice, decodeInGraph: r.decodeInGraph, placement: r.placement })}`;

const hindsight = (request: RealChildRequest) =>
  hindsightChild<RealChildResult>([path.resolve('bench/real-shapes-child.ts'), JSON.stringify(request)], rowTitle(request.kind, request), rowName(request.kind, request));

const hindsightStep = (request: StepRequest) =>
  hindsightChild<StepResult>([path.resolve('bench/train-memory.ts'), '--child', JSON.stringify(request)], rowTitle('train', request), rowName('train', request));

/** Prints the part's profile summaries (BENCH_PROFILE) under its table. */
function printProfiles(): void {
  for (const p of profiles.splice(0)) console.log(p);
}

/** One Hindsight side of a table: a device, and on a GPU its precision. */
interface Side { device: Device; precision: Precision; decodeCacheOnDevice?: boolean; decodeInGraph?: boolean; placement?: OptimizerPlacement }
/**
 * The other way a GPU can decode, beside its default (docs/design.md §Devices): WebGPU with the
 * cache in host memory, CUDA token by token (its cache sent to the GPU every token).
 */
const otherDecodePath = (device: Device): Partial<Side> | undefined =>
  holdsTensorsOnDevice(device) ? { decodeCacheOnDevice: false } : device === 'cuda' ? { decodeInGraph: false } : undefined;
/**
 * The CPU (fp32) when `part` runs there, then each GPU in each precision; for generate, each
 * precision again the other way; for train, the device's default precision again with the
 * optimizer update on the host.
 */
const sides = (part: string): Side[] => [
  ...(CPU_PARTS.includes(part) ? [{ device: 'cpu' as Device, precision: 'fp32' as Precision }] : []),
  ...DEVICES.flatMap((device) => [
    ...GPU_PRECISIONS.flatMap((precision) => [
      { device, precision },
      ...(part === 'generate' && otherDecodePath(device) ? [{ device, precision, ...otherDecodePath(device) }] : []),
    ]),
    ...(part === 'train' && OPTIMIZER_PLACEMENT[device] === 'graph' ? [{ device, precision: defaultPrecision(device), placement: 'host' as const }] : []),
  ]),
];
const sideLabel = ({ device, precision, decodeCacheOnDevice, decodeInGraph, placement }: Side) =>
  device === 'cpu' ? `Hindsight, cpu (${THREADS} threads)`
  : `Hindsight, ${device}, ${precision}${decodeCacheOnDevice === false ? ', decode cache in host memory' : ''}${decodeInGraph === false ? ', token by token' : ''}${placement === 'host' ? ', optimizer on the host' : ''}`;
const gpuMem = (r: { gpuPeakMb?: number }) => (r.gpuPeakMb === undefined ? '—' : gb(r.gpuPeakMb));

/** PyTorch's JSON result on TORCH_DEVICE, or undefined when it is left out or fails (said on stderr). */
async function torch(script: string, request: Record<string, unknown>): Promise<Record<string, any> | undefined> {
  if (TORCH_DEVICE === 'none') return undefined;
  const python = findTorchPython(TORCH_DEVICE === 'cuda' ? 'cuda' : 'cpu');
  if (!python) return void console.error(`no Python whose PyTorch runs on ${TORCH_DEVICE}: its rows are left out`);
  const file = path.join(OUT, `gpu-${script.replace('.py', '')}-request.json`);
  fs.writeFileSync(file, JSON.stringify({ ...request, device: TORCH_DEVICE, threads: THREADS }));
  const env = torchThreadEnv(THREADS);
  try {
    const { result, gpuPeakMb } = await withGpuPeak(() => runWatched(python, [path.resolve('bench', script), file], env, MEMORY_LIMIT_MB));
    return { ...parseLast<Record<string, any>>(result, script), gpuPeakMb };
  } catch (err) {
    return void console.error((err as Error).message);
  }
}

/** A table cell for a result that may be an error. */
const failed = (r: unknown): r is Error => r instanceof Error;
/** The child's error line (its Error's own, not the source line Node quotes above it). */
const reason = (e: Error) => e.message.split('\n').find((l) => /^\w*Error\b.*: /.test(l))?.trim() ?? e.message.split('\n')[0]!;

function maxAbsDiff(a: number[][], b: number[][]): number {
  let worst = 0;
  a.forEach((row, i) => row.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - b[i]![j]!)))));
  return worst;
}

const medianTimed = (runs: { wall_s: number; cpu_s: number }[]): Timed => {
  const sorted = [...runs].sort((x, y) => x.wall_s - y.wall_s);
  const m = sorted[Math.floor(sorted.length / 2)]!;
  return { wallS: m.wall_s, cpuS: m.cpu_s };
};

const randomIds = (n: number, vocab: number, seed: number) => {
  const rand = seededRandom(seed);
  return Array.from({ length: n }, () => 3 + Math.floor(rand() * (vocab - 10)));
};

async function scorePart(model: string): Promise<void> {
  const vocab = Checkpoint.open(model).config.vocabSize;
  const rows = [0, 1, 2, 3].map((k) => ({ inputIds: randomIds(512, vocab, 13 + k), responseStart: 256 }));
  console.log(`\n## Score: 4 × 512 tokens, median of ${REPEATS}`);
  console.log('| | time (wall / CPU) | tokens/s | max \\|Δ log-prob\\| vs the first row | GPU memory peak |');
  console.log('|---|---|---|---|---|');
  const tokens = 4 * 512;
  let base: number[][] | undefined;
  for (const side of sides('score')) {
    const r = await hindsight({ kind: 'score', model, threads: THREADS, quantize: 'none', rows, repeats: REPEATS, ...side });
    if (failed(r)) { console.log(`| ${sideLabel(side)} | failed: ${reason(r)} | | | |`); continue; }
    base ??= r.logprobs!;
    console.log(`| ${sideLabel(side)} | ${secs(r.run!)} | ${f(tokens / r.run!.wallS, 0)} | ${f(maxAbsDiff(r.logprobs!, base), 6)} | ${gpuMem(r)} |`);
  }
  const t = await torch('model_torch.py', { model, rows: rows.map((r) => ({ input_ids: r.inputIds, response_start: r.responseStart })), score_repeats: REPEATS, warm_up_whole_batch: true });
  if (t) {
    const run = medianTimed(t.score_runs);
    console.log(`| PyTorch ${t.torch}, ${t.device}, fp32 | ${secs(run)} | ${f(tokens / run.wallS, 0)} | ${base ? f(maxAbsDiff(t.logprobs, base), 6) : '—'} | ${gpuMem(t)} |`);
  }
}

async function trainPart(model: string): Promise<void> {
  const T = TRAIN_LEN;
  console.log(`\n## Training step: 1 × ${T} (reply ${T / 2}), LoRA r${DEFAULT_LORA.r} on ${DEFAULT_LORA.targets.length} targets, AdamW, recomputation off, median of ${REPEATS} after a warm-up`);
  console.log('| | step (wall / CPU) | first step: loss | gradient norm | peak RSS | GPU memory peak |');
  console.log('|---|---|---|---|---|---|');
  for (const side of sides('train')) {
    const r = await hindsightStep({ kind: 'step', model, threads: THREADS, repeats: REPEATS, seqLen: T, recompute: false, ...side });
    if (failed(r)) console.log(`| ${sideLabel(side)} | failed: ${reason(r)} | | | | |`);
    else console.log(`| ${sideLabel(side)} | ${secs(r)} | ${r.firstLoss} | ${r.firstGradNorm} | ${gb(r.peakMb)} | ${gpuMem(r)} |`);
  }
  const t = await torch('train_torch.py', { ...torchTrainRequest(model, T, path.join(OUT, 'gpu-adapter')), repeats: REPEATS, profile: PROFILE });
  if (t) console.log(`| PyTorch ${t.torch}, ${TORCH_DEVICE}, fp32 | ${secs({ wallS: t.step_s, cpuS: t.step_cpu_s })} | ${t.first_loss} | ${t.first_grad_norm} | ${gb(t.peak_rss_mb)} | ${gpuMem(t)} |`);
  if (t?.profile) profiles.push(torchProfile(`train: PyTorch ${t.torch}, ${TORCH_DEVICE}`, t.profile));
}

/** bench/train_torch.py's profiled step (one more after the timed ones), as the Hindsight rows' summaries read. */
function torchProfile(title: string, p: { wall_ms: number; clock: string; total_ms: number; top: { op: string; calls: number; ms: number }[] }): string {
  const share = (x: number) => `${((100 * x) / p.wall_ms).toFixed(1)}%`;
  return [
    `\n### Profile: ${title}, one step under torch.profiler after the timed ones: ${f(p.wall_ms, 1)} ms`, '',
    `- the ops' own ${p.clock} time: ${f(p.total_ms, 1)} ms (${share(p.total_ms)} of the step's wall time)`, '',
    `| op (top ${p.top.length}) | calls | ${p.clock} time | share of wall |`, '|---|---|---|---|',
    ...p.top.map((o) => `| ${o.op} | ${o.calls} | ${f(o.ms, 1)} ms | ${share(o.ms)} |`),
  ].join('\n');
}

async function generatePart(model: string): Promise<void> {
  for (const length of PROMPT_LENS) await decodeTable(model, length);
}

async function decodeTable(model: string, promptLength: number): Promise<void> {
  const prompt = randomIds(promptLength, Checkpoint.open(model).config.vocabSize, 11);
  console.log(`\n## Decode: greedy, ${NEW_TOKENS} tokens after a ${promptLength}-token prompt (generate's wall time includes its prefill), median of ${REPEATS}`);
  console.log('| | load | generate (wall / CPU) | tokens/s | greedy tokens = the first row |');
  console.log('|---|---|---|---|---|');
  let base: number[] | undefined;
  const agree = (tokens: number[]) => (base ? `${tokens.filter((x, i) => x === base![i]).length}/${base.length}` : '—');
  for (const side of sides('generate')) {
    const r = await hindsight({ kind: 'generate', model, threads: THREADS, quantize: 'none', prompt, newTokens: NEW_TOKENS, repeats: REPEATS, ...side });
    if (failed(r)) { console.log(`| ${sideLabel(side)} | failed: ${reason(r)} | | | |`); continue; }
    base ??= r.tokens!;
    console.log(`| ${sideLabel(side)} | ${f(r.loadS!, 1)} s | ${secs(r.run!)} | ${f(NEW_TOKENS / r.run!.wallS, 1)} | ${agree(r.tokens!)} |`);
  }
  const t = await torch('model_torch.py', { model, prompt, new_tokens: NEW_TOKENS, generate_repeats: REPEATS });
  if (t) {
    const run = medianTimed(t.generate_runs);
    console.log(`| PyTorch ${t.torch}, ${t.device}, fp32, KV cache | ${f(t.load_s, 1)} s | ${secs(run)} | ${f(NEW_TOKENS / run.wallS, 1)} | ${agree(t.generated)} |`);
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  keepCudaFp32Exact(); // as the CLI and the app do, so fp32 on CUDA is fp32 (its children inherit it)
  console.log(`# bench:gpu — Hindsight on ${DEVICES.join(', ')} (${GPU_PRECISIONS.join(', ')}) beside the CPU (${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, ${THREADS} threads) and PyTorch on ${TORCH_DEVICE}; ${process.env.BENCH_MODEL ?? 'Qwen3-0.6B shape, random weights'}`);
  const model = process.env.BENCH_MODEL ?? ensureRandomModel(path.join(OUT, 'qwen3-0.6b'), 'qwen3-0.6b', 8);
  const parts: Record<string, (model: string) => Promise<void>> = { score: scorePart, train: trainPart, generate: generatePart };
  for (const part of PARTS) {
    if (!parts[part]) throw new Error(`BENCH_PARTS: unknown part '${part}' (${Object.keys(parts).join(', ')})`);
    await parts[part]!(model);
    printProfiles();
  }
}

await main();
