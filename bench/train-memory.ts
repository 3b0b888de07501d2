/**
 * `npm run bench:train-memory` — the training step's memory (docs/design.md §Memory) on a
 * random Qwen3-shaped model with the real vocabulary (151,936 tokens, tied embeddings) but
 * small layers (hidden 384, 6 layers, 6 / 2 heads, head_dim 64, intermediate 1024: 68M
 * parameters, 58M of them the embedding), so a 2-core machine runs it in minutes. LoRA r=16 on
 * all seven targets, AdamW, batch 1 × T with the second half the response.
 *
 * Every configuration runs in its own child process, one after another in this run, so each
 * peak RSS is its own; times are medians of BENCH_REPEATS steps after a warm-up step, wall
 * seconds with the process's CPU seconds beside them (steadier on a shared machine).
 *
 *   loss     the LM head and loss: every position through an unchunked head (what the step did
 *            before: a [T, V] log-softmax and its gradient), response positions only
 *            (unchunked), and chunked (several chunk sizes at one length)
 *   recompute  per-layer recomputation off / on at several lengths
 *   sessions the training step, the teacher (base forward) session and a generate session all
 *            alive: each with its own weights, and reading one shared mapped file; RSS and
 *            PSS (the mapped pages split between the sessions mapping them), decode speed
 *   prepack  ONNX Runtime's prepacking of matmul weights on and off, alternated in one process:
 *            CPU time of a step and of decoding
 *   quantize QLoRA: the Qwen3-0.6B shape at 1 × 2,048 with a none / int8 / int4 base, and one step
 *            and a checkpoint of the Qwen3-8B shape in int4 (BENCH_8B=int4,int8; BENCH_8B_LENGTH, BENCH_8B_LAYERS,
 *            BENCH_QLORA_LENGTH, BENCH_QLORA_REPEATS, BENCH_QLORA_SHAPES=0.6b,8b in that order)
 *
 * Options (env): BENCH_THREADS (2), BENCH_REPEATS (3), BENCH_PARTS (loss,recompute,sessions; also prepack, quantize),
 * BENCH_LENGTHS (512,1024,2048). Writes to bench/output/ (git-ignored); the model is reused.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { writeTinyModel } from '../tools/tiny-models.js';
import { runChild, type ChildRequest, type ChildResult } from './train-memory-child.js';
import { ensureRandomModel } from './random-model.js';
import { parameterCount, QWEN3_8B } from './quantized-model.js';

const OUT = path.resolve('bench/output');
const MODEL = path.join(OUT, 'qwen3-shape-68m');
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const PARTS = (process.env.BENCH_PARTS ?? 'loss,recompute,sessions').split(',');
const LENGTHS = (process.env.BENCH_LENGTHS ?? '512,1024,2048').split(',').map(Number);

function child(request: Omit<ChildRequest, 'model' | 'threads' | 'repeats'> & { repeats?: number; model?: string }): ChildResult {
  const full: ChildRequest = { model: MODEL, threads: THREADS, repeats: REPEATS, ...request };
  const r = spawnSync(process.execPath, [...process.execArgv, path.resolve('bench/train-memory.ts'), '--child', JSON.stringify(full)], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`child ${JSON.stringify(request)} failed: ${r.stderr.slice(-2000)}`);
  return JSON.parse(line) as ChildResult;
}

const gb = (mb: number) => `${(mb / 1024).toFixed(2)} GB`;
const secs = (r: ChildResult) => `${r.wallS.toFixed(2)} s (${r.cpuS.toFixed(2)} s CPU)`;

function lossPart(): void {
  console.log('\n## Loss part: peak RSS, step time');
  for (const T of LENGTHS) {
    const before = child({ kind: 'step', seqLen: T, vocabChunk: 0, everyPosition: true });
    const gathered = child({ kind: 'step', seqLen: T, vocabChunk: 0 });
    const chunked = child({ kind: 'step', seqLen: T });
    console.log(`1 × ${T}: every position, unchunked ${gb(before.peakMb)} ${secs(before)} | response only, unchunked ${gb(gathered.peakMb)} ${secs(gathered)} | ` +
      `response only, chunked ${gb(chunked.peakMb)} ${secs(chunked)} | peak ratio chunked / before ${(chunked.peakMb / before.peakMb).toFixed(2)}, CPU ratio ${(chunked.cpuS / before.cpuS).toFixed(2)}`);
  }
  const T = LENGTHS.at(-1)!;
  const sizes = [2048, 8192, 32768].map((vocabChunk) => [vocabChunk, child({ kind: 'step', seqLen: T, vocabChunk })] as const);
  console.log(`chunk size at 1 × ${T}: ` + sizes.map(([c, r]) => `${c}: ${gb(r.peakMb)} ${secs(r)}`).join(' | '));
}

function recomputePart(): void {
  console.log('\n## Recomputation: peak RSS, step time');
  for (const T of [256, ...LENGTHS]) {
    const off = child({ kind: 'step', seqLen: T, recompute: false });
    const on = child({ kind: 'step', seqLen: T, recompute: true });
    console.log(`1 × ${T}: off ${gb(off.peakMb)} ${secs(off)} | on ${gb(on.peakMb)} ${secs(on)} | ` +
      `peak −${(off.peakMb - on.peakMb).toFixed(0)} MB (${(on.peakMb / off.peakMb).toFixed(2)}×), CPU ${(on.cpuS / off.cpuS).toFixed(2)}×`);
  }
}

function sessionsPart(): void {
  console.log('\n## One copy of the weights: training step + teacher + generate session alive (1 × 512 step, 32 decoded tokens)');
  const cases: [string, ChildRequest['sessions']][] = [
    ['each session its own copy (before)', { share: false, stepPrepack: true, generatePrepack: true }],
    ['one shared mapped file, step without prepacking, generate prepacked', { share: true, stepPrepack: false, generatePrepack: true }],
    ['one shared mapped file, nothing prepacked', { share: true, stepPrepack: false, generatePrepack: false }],
  ];
  const results = cases.map(([label, sessions]) => [label, child({ kind: 'sessions', seqLen: 512, sessions })] as const);
  for (const [label, r] of results) {
    console.log(`${label}: RSS ${gb(r.rssMb!)}, PSS ${gb(r.pssMb!)}, peak ${gb(r.peakMb)}; step ${secs(r)}; decode ${r.decodeMs!.toFixed(1)} ms/token (${r.decodeCpuMs!.toFixed(1)} ms CPU)`);
  }
  const base = results[0]![1];
  for (const [label, r] of results.slice(1)) console.log(`  ${label}: PSS ${(r.pssMb! / base.pssMb!).toFixed(2)}× before, step CPU ${(r.cpuS / base.cpuS).toFixed(2)}×, decode CPU ${(r.decodeCpuMs! / base.decodeCpuMs!).toFixed(2)}×`);
}

function prepackPart(): void {
  const T = 1024;
  const r = child({ kind: 'prepack', seqLen: T, repeats: Math.max(REPEATS, 5) }).prepack!;
  console.log(`\n## Prepacking on / off, alternated in one process (1 × ${T} step, 32 decoded tokens), CPU medians`);
  console.log(`step ${r.stepCpuS[0].toFixed(2)} / ${r.stepCpuS[1].toFixed(2)} s (off ÷ on ${(r.stepCpuS[1] / r.stepCpuS[0]).toFixed(2)}); ` +
    `decode ${r.decodeCpuMs[0].toFixed(1)} / ${r.decodeCpuMs[1].toFixed(1)} ms per token (off ÷ on ${(r.decodeCpuMs[1] / r.decodeCpuMs[0]).toFixed(2)})`);
}

/**
 * QLoRA (docs/design.md §QLoRA): the Qwen3-0.6B shape at 1 × 2,048 with the base none / int8 /
 * int4, side by side (recomputation on, as --recompute auto has it at this length); then the
 * Qwen3-8B shape written straight into its quantised blocks (./quantized-model.ts), one full
 * step and a checkpoint, for each of BENCH_8B (default int4).
 */
function quantizePart(): void {
  const T = Number(process.env.BENCH_QLORA_LENGTH ?? 2048);
  const repeats = Number(process.env.BENCH_QLORA_REPEATS ?? 1);
  const shapes = (process.env.BENCH_QLORA_SHAPES ?? '0.6b,8b').split(',');
  for (const shape of shapes) (shape === '8b' ? eightB : smallShape)(T, repeats);
}

function smallShape(T: number, repeats: number): void {
  const small = ensureRandomModel(path.join(OUT, 'qwen3-0.6b'), 'qwen3-0.6b');
  console.log(`\n## QLoRA: Qwen3-0.6B shape, 1 × ${T}, recomputation on, ${repeats ? `median of ${repeats} step(s) after a warm-up` : 'one step'}`);
  const rows = (['none', 'int8', 'int4'] as const).map((quantize) => [quantize, child({ kind: 'step', model: small, seqLen: T, recompute: true, quantize, repeats })] as const);
  const base = rows[0]![1];
  for (const [quantize, r] of rows) {
    console.log(`${quantize}: peak ${gb(r.peakMb)} (${(r.peakMb / base.peakMb).toFixed(2)}× none), step ${secs(r)} (${(r.wallS / base.wallS).toFixed(2)}× wall, ${(r.cpuS / base.cpuS).toFixed(2)}× CPU); first loss ${r.firstLoss?.toFixed(6)}, |g| ${r.firstGradNorm?.toExponential(4)}`);
  }
}

function eightB(): void {
  for (const quantize of (process.env.BENCH_8B ?? 'int4').split(',').filter(Boolean) as ('int8' | 'int4')[]) {
    const T8 = Number(process.env.BENCH_8B_LENGTH ?? 2048);
    const dir = path.join(OUT, `qwen3-8b-${quantize}-checkpoint`);
    fs.rmSync(dir, { recursive: true, force: true });
    // BENCH_8B_LAYERS: the same shape with fewer layers (each layer's work, the tables, the head and the loss as at 36; docs/design.md §QLoRA).
    const layers = process.env.BENCH_8B_LAYERS ? Number(process.env.BENCH_8B_LAYERS) : undefined;
    const r = child({ kind: 'step', model: '', seqLen: T8, recompute: true, quantize, quantizedShape: 'qwen3-8b', quantizedLayers: layers, checkpointDir: dir, repeats: 0 });
    console.log(`Qwen3-8B shape${layers ? ` with ${layers} layers` : ''} (${(parameterCount({ ...QWEN3_8B, numLayers: layers ?? QWEN3_8B.numLayers }) / 1e9).toFixed(2)}B parameters), ${quantize} blocks, fp16 embedding and head, 1 × ${T8} (reply ${T8 / 2}), LoRA r16 all targets, AdamW: ` +
      `peak ${gb(r.peakMb)} (${gb(r.loadedMb!)} after loading); one step ${secs(r)}, ${r.firstStepS![0].toFixed(0)} s (${r.firstStepS![1].toFixed(0)} s CPU) with building the graph; checkpoint ${r.checkpointS!.toFixed(1)} s`);
  }
}

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) {
    console.log(JSON.stringify(await runChild(JSON.parse(process.argv[childAt + 1]!) as ChildRequest)));
    return;
  }
  fs.mkdirSync(OUT, { recursive: true });
  if (!fs.existsSync(path.join(MODEL, 'model.safetensors'))) {
    console.error('writing the random Qwen3-shaped model …');
    writeTinyModel(MODEL, { family: 'qwen3', tie: true, hiddenSize: 384, numLayers: 6, numHeads: 6, numKvHeads: 2, headDim: 64, intermediateSize: 1024, vocabSize: 151936, std: 0.02, seed: 5 });
  }
  console.log(`model: random Qwen3 shape, hidden 384, 6 layers, vocab 151,936 tied (68M parameters); LoRA r=16 all targets, AdamW; ${THREADS} threads; medians of ${REPEATS} steps`);
  if (PARTS.includes('loss')) lossPart();
  if (PARTS.includes('recompute')) recomputePart();
  if (PARTS.includes('sessions')) sessionsPart();
  if (PARTS.includes('prepack')) prepackPart();
  if (PARTS.includes('quantize')) quantizePart();
}

await main();
