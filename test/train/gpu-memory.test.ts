// The CUDA GPU's memory in the memory check (src-main/model/gpu-memory.ts, src-shared/memory-verdict.ts,
// docs/design.md §Memory estimate):
// - nvidia-smi's answer parsed from real-format lines (several cards, "[N/A]", error text), the
//   card CUDA_VISIBLE_DEVICES makes device 0, and the reader: null without nvidia-smi (for real:
//   a PATH without it), and a card's memory from an executable `nvidia-smi` script put on PATH.
//   That script stands in for the hardware, which this build machine lacks; it prints what
//   nvidia-smi prints for the query;
// - the verdict with a known GPU: fits; does not fit, refused naming the GPU; `auto` off with
//   room, on without; the micro-batch chosen by the GPU's room; unknown GPU (or another device):
//   exactly the host-only verdict; the GPU part against the one measured CUDA peak;
// - the decided recomputation reaches the step: `hindsight train --device cuda` and the app's
//   training service, with the stand-in nvidia-smi, build the training graph with or without it
//   (the `compiling` status names it). Without the CUDA provider (this machine) the run then
//   stops at the session, after that status; with it (a GPU machine), it trains.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CUDA_CONTEXT_BYTES, chooseMicroBatch, cudaBytes, memoryVerdict, type GpuMemory, type HostMemory } from '../../src-shared/memory-verdict.js';
import { estimateTrainMemory, type MemoryRun, type ModelShape } from '../../src-shared/train-memory.js';
import { LORA_TARGETS } from '../../src-shared/training.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { cudaDeviceZero, gpuMemory, parseGpuQuery } from '../../src-main/model/gpu-memory.js';
import { stepPlan } from '../../src-main/train/memory-check.js';
import { TrainingService } from '../../src-main/api/training-service.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-gpu-memory-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const GiB = 2 ** 30, MiB = 2 ** 20;
const QWEN3_06B: ModelShape = { hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, vocabSize: 151_936, tieWordEmbeddings: true, maxPositionEmbeddings: 40_960 };
const host = (availableGiB: number): HostMemory => ({ totalBytes: 128 * GiB, availableBytes: availableGiB * GiB, source: 'MemAvailable', budgetBytes: null });
const card = (name: string, totalGiB: number, freeGiB: number): GpuMemory => ({ name, totalBytes: totalGiB * GiB, freeBytes: freeGiB * GiB });
const H200 = card('NVIDIA H200', 140, 139), RTX_4090 = card('NVIDIA GeForce RTX 4090', 24, 23);
/** The docs/benchmarks.md "On a GPU" training row: the 0.6B shape, 1 × 2,048, LoRA r16 on every target, AdamW. */
const run: MemoryRun = { maxLength: 2048, batchSize: 1, loraR: 16, targets: LORA_TARGETS, quantize: 'none', recompute: 'auto', optimizer: 'adamw', teacher: false, device: 'cuda', precision: 'fp32' };

describe("nvidia-smi's answer", () => {
  it('reads each card of --query-gpu=name,memory.total,memory.free (MiB); leaves out lines that are not a card', () => {
    expect(parseGpuQuery('NVIDIA H200, 143771, 143252\n')).toEqual([{ name: 'NVIDIA H200', totalBytes: 143771 * MiB, freeBytes: 143252 * MiB }]);
    expect(parseGpuQuery('NVIDIA GeForce RTX 4090, 24564, 23820\r\nTesla T4, 15360, 15101\r\n').map((c) => c.name)).toEqual(['NVIDIA GeForce RTX 4090', 'Tesla T4']);
    // A card whose memory it cannot read, between two it can; error text; nothing.
    expect(parseGpuQuery('NVIDIA A100-SXM4-40GB, 40960, 40337\nNVIDIA A100-SXM4-40GB, [N/A], [N/A]\nNVIDIA L4, 23034, [Not Supported]\nTesla T4, 15360, 15101\n').map((c) => c.name))
      .toEqual(['NVIDIA A100-SXM4-40GB', 'Tesla T4']);
    expect(parseGpuQuery("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")).toEqual([]);
    expect(parseGpuQuery('No devices were found\n')).toEqual([]);
    expect(parseGpuQuery('')).toEqual([]);
    expect(parseGpuQuery('12, 34\n, 1, 2\nA card, 1.5, 2\n')).toEqual([]);
  });

  it("reads the card that is CUDA's device 0: the first of CUDA_VISIBLE_DEVICES; none when it hides them all", () => {
    expect(cudaDeviceZero(undefined)).toBe('0');
    expect(cudaDeviceZero('1,0')).toBe('1');
    expect(cudaDeviceZero(' 2 ')).toBe('2');
    expect(cudaDeviceZero('GPU-8f6c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b,1')).toBe('GPU-8f6c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b');
    for (const hidden of ['', '-1', 'none', 'MIG-2e6c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b']) expect(cudaDeviceZero(hidden), hidden).toBeNull();
  });
});

describe.skipIf(process.platform === 'win32')('the GPU reader', () => {
  /** A folder holding an executable `nvidia-smi` (a shell script standing in for the real one) that runs `body`. */
  function fakeSmi(name: string, body: string): string {
    const dir = path.join(root, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'nvidia-smi'), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    return dir;
  }

  it('null without nvidia-smi: a PATH that has none', async () => {
    const empty = path.join(root, 'no-smi');
    fs.mkdirSync(empty, { recursive: true });
    expect(await gpuMemory({ PATH: empty })).toBeNull();
  });

  it("the card's memory from nvidia-smi, asked for device 0 of CUDA_VISIBLE_DEVICES; null when it fails, prints garbage or hangs", async () => {
    const args = path.join(root, 'args.txt');
    const one = fakeSmi('smi-one', `echo "$@" > '${args}'\necho 'NVIDIA GeForce RTX 4090, 24564, 23820'`);
    expect(await gpuMemory({ PATH: one })).toEqual({ name: 'NVIDIA GeForce RTX 4090', totalBytes: 24564 * MiB, freeBytes: 23820 * MiB });
    expect(fs.readFileSync(args, 'utf8').trim()).toBe('--id=0 --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits');
    await gpuMemory({ PATH: one, CUDA_VISIBLE_DEVICES: '3,1' });
    expect(fs.readFileSync(args, 'utf8')).toMatch(/^--id=3 /);
    fs.rmSync(args);
    expect(await gpuMemory({ PATH: one, CUDA_VISIBLE_DEVICES: '-1' })).toBeNull();
    expect(fs.existsSync(args)).toBe(false); // not asked at all
    expect(await gpuMemory({ PATH: fakeSmi('smi-failed', "echo 'No devices were found'; exit 6") })).toBeNull();
    expect(await gpuMemory({ PATH: fakeSmi('smi-garbage', "echo 'NVIDIA H200, [N/A], [N/A]'") })).toBeNull();
    const t0 = Date.now();
    expect(await gpuMemory({ PATH: fakeSmi('smi-hangs', 'exec /bin/sleep 30') })).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1900); // its 2 s timeout, not a failure to start
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('the verdict with a known GPU', () => {
  it("the GPU part: the weights in each session, LoRA, activations and the CUDA context; over the one measured CUDA peak, by less than a fifth", () => {
    for (const [precision, measuredGiB] of [['fp32', 18.7], ['fp16', 18.9]] as const) {
      const off = { ...run, recompute: 'off' as const, precision, tokenizer: false };
      const e = estimateTrainMemory(QWEN3_06B, off);
      expect(cudaBytes(e, off)).toBe(e.weights + e.lora + e.activations + e.logits + CUDA_CONTEXT_BYTES);
      // nvidia-smi's peak above idle on an H200 (docs/benchmarks.md "On a GPU": MiB / 1,024, printed as GB).
      const over = cudaBytes(e, off) / (measuredGiB * GiB) - 1;
      expect(over, precision).toBeGreaterThan(0);
      expect(over, precision).toBeLessThan(0.2);
      // The teacher's forward session holds the weights again.
      const teacher = { ...off, teacher: true };
      const et = estimateTrainMemory(QWEN3_06B, teacher);
      expect(cudaBytes(et, teacher) - cudaBytes(e, off)).toBeCloseTo(e.weights + et.teacher, 0);
    }
  });

  it('fits a card with room: recomputation off under auto, said in the summary, which names the card', () => {
    const v = memoryVerdict(QWEN3_06B, run, host(64), 'cli', H200);
    expect(v).toMatchObject({ fits: true, refusal: null, microBatch: 1, recompute: false, autoRecomputeOff: true });
    expect(v.estimate.recompute).toBe(false);
    expect(v.gpu).toEqual({ bytes: cudaBytes(v.estimate, { ...run, microBatch: 1 }), memory: H200 });
    expect(v.summary).toMatch(/^about [\d.]+ GB in the host's memory and 2\d\.\d GB on the GPU \(fp32 weights 2\.2 GB, .* at 1 × 2,048 tokens on the GPU, runtime \d+ MB, CUDA context 512 MB\); this machine has 64\.0 GB available of 128 GB, the GPU \(NVIDIA H200\) 139 GB free of 140 GB; --recompute auto leaves recomputation off: the GPU has room without it$/);
    expect(memoryVerdict(QWEN3_06B, run, host(64), 'app', H200).summary).toMatch(/; Recomputation Auto leaves recomputation off: the GPU has room without it$/);
    // Asked for, recomputation stays as asked; short rows have none under auto anyway.
    expect(memoryVerdict(QWEN3_06B, { ...run, recompute: 'on' }, host(64), 'cli', H200)).toMatchObject({ recompute: true, autoRecomputeOff: false });
    expect(memoryVerdict(QWEN3_06B, { ...run, maxLength: 512 }, host(64), 'cli', H200)).toMatchObject({ recompute: false, autoRecomputeOff: false });
    expect(memoryVerdict(QWEN3_06B, { ...run, maxLength: 512 }, host(64), 'cli', H200).summary).not.toContain('leaves recomputation off');
  });

  it('auto keeps the length rule where the run does not fit the card without recomputation', () => {
    const v = memoryVerdict(QWEN3_06B, run, host(64), 'cli', card('NVIDIA GeForce RTX 3070', 8, 7.5));
    expect(cudaBytes(estimateTrainMemory(QWEN3_06B, { ...run, recompute: 'off' }), run)).toBeGreaterThan(7.5 * GiB);
    expect(v).toMatchObject({ fits: true, recompute: true, autoRecomputeOff: false });
    expect(v.summary).not.toContain('leaves recomputation off');
    // A micro-batch asked for is what must fit without it: 4 rows do not fit the H200 less 80 GB, 1 does.
    const busy = card('NVIDIA H200', 140, 59);
    expect(memoryVerdict(QWEN3_06B, { ...run, batchSize: 4 }, host(64), 'cli', busy)).toMatchObject({ recompute: true });
    expect(memoryVerdict(QWEN3_06B, { ...run, batchSize: 4, microBatch: 1 }, host(64), 'cli', busy)).toMatchObject({ recompute: false, microBatch: 1 });
  });

  it('does not fit: refused naming the GPU, its free memory and what would fit on it', () => {
    const small = card('NVIDIA GeForce GTX 1650', 4, 3.5);
    const v = memoryVerdict(QWEN3_06B, run, host(64), 'cli', small);
    expect(v.fits).toBe(false);
    expect(v.refusal).toMatch(/^This run needs about [\d.]+ GB on the GPU \(NVIDIA GeForce GTX 1650\) even with one row of 2,048 tokens at a time, but the GPU has 3\.5 GB free of 4\.0 GB: try --quantize int4 \(about [\d.]+ GB on the GPU\)( or --max-length [\d,]+ \(about [\d.]+ GB on the GPU\))?, or --ignore-memory to start anyway\.$/);
    expect(v.gpu!.bytes).toBeGreaterThan(3.5 * GiB);
    for (const s of v.suggestions) {
      expect(s.memory).toBe('gpu');
      const at = { ...run, ...s, microBatch: 1 };
      expect(cudaBytes(estimateTrainMemory(QWEN3_06B, at), at)).toBe(s.bytes);
      expect(s.bytes).toBeLessThanOrEqual(3.5 * GiB);
    }
    expect(memoryVerdict(QWEN3_06B, run, host(64), 'app', small).refusal).toMatch(/on the GPU \(NVIDIA GeForce GTX 1650\) .*: try Quantize int4 \(about [\d.]+ GB on the GPU\).*, or tick Start anyway\.$/);
    // Both memories short: both named, the GPU first; only the host's: said as without a GPU.
    expect(memoryVerdict(QWEN3_06B, run, host(1), 'cli', small).refusal).toMatch(/^This run needs about [\d.]+ GB on the GPU \(NVIDIA GeForce GTX 1650\) and [\d.]+ GB in the host's memory even with one row of 2,048 tokens at a time, but the GPU has 3\.5 GB free of 4\.0 GB and this machine has 1\.0 GB available of 128 GB: /);
    expect(memoryVerdict(QWEN3_06B, run, host(1), 'cli', H200).refusal).toMatch(/^This run needs about [\d.]+ GB even with one row of 2,048 tokens at a time, but this machine has 1\.0 GB available of 128 GB: /);
  });

  it("chooses the micro-batch by the GPU's room when it is the smaller", () => {
    const batch: MemoryRun = { ...run, batchSize: 16 };
    expect(memoryVerdict(QWEN3_06B, batch, host(120), 'cli').microBatch).toBe(16); // the host alone
    const v = memoryVerdict(QWEN3_06B, batch, host(120), 'cli', RTX_4090);
    expect(v).toMatchObject({ fits: true, recompute: true });
    expect(v.microBatch).toBeLessThan(16);
    expect(v.microBatch).toBe(chooseMicroBatch(QWEN3_06B, batch, 120 * GiB, RTX_4090.freeBytes));
    const gpuAt = (rows: number) => cudaBytes(estimateTrainMemory(QWEN3_06B, { ...batch, microBatch: rows }), batch);
    expect(gpuAt(v.microBatch)).toBeLessThanOrEqual(RTX_4090.freeBytes);
    expect(gpuAt(Math.ceil(16 / (Math.ceil(16 / v.microBatch) - 1)))).toBeGreaterThan(RTX_4090.freeBytes);
    expect(v.summary).toMatch(new RegExp(`at ${v.microBatch} × 2,048 tokens a pass \\(batch 16 as \\d+ micro-batches`));
    // A --micro-batch that the host holds but the card does not: the one that fits the card.
    const asked = memoryVerdict(QWEN3_06B, { ...batch, microBatch: 16 }, host(120), 'cli', RTX_4090);
    expect(asked.refusal).toMatch(new RegExp(`on the GPU \\(NVIDIA GeForce RTX 4090\\) even with 16 rows of 2,048 tokens a pass \\(--micro-batch 16\\), but the GPU has 23\\.0 GB free of 24\\.0 GB: try --micro-batch ${v.microBatch} \\(about [\\d.]+ GB on the GPU\\)`));
  });

  it('an unknown GPU, or a run on another device, is checked as before: the host alone, the length rule', () => {
    const plain = memoryVerdict(QWEN3_06B, run, host(64), 'cli');
    expect(memoryVerdict(QWEN3_06B, run, host(64), 'cli', null)).toEqual(plain);
    expect(plain).toMatchObject({ recompute: true, autoRecomputeOff: false, gpu: null });
    expect(plain.summary).toMatch(/^about [\d.]+ GB, [\d.]+ GB of it in the host's memory \(.* with recomputation on the GPU, runtime \d+ MB\); this machine has 64\.0 GB available of 128 GB$/);
    for (const device of ['cpu', 'webgpu'] as const) {
      const other = { ...run, device };
      expect(memoryVerdict(QWEN3_06B, other, host(64), 'cli', card('tiny', 1, 0.1))).toEqual(memoryVerdict(QWEN3_06B, other, host(64), 'cli'));
    }
    expect(stepPlan(plain)).toEqual({ microBatch: 1, recomputeActivations: true });
  });
});

describe.skipIf(process.platform === 'win32')('the decided recomputation reaches the step', () => {
  const model = path.join(root, 'model');
  const data = path.join(root, 'rows.jsonl');
  /** A tiny model that takes 2,048 tokens, where `auto` recomputes by the length rule. */
  const prepare = () => {
    if (fs.existsSync(model)) return;
    writeTinyModel(model, { family: 'qwen3', tie: true, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, intermediateSize: 128, vocabSize: 300, std: 0.02, seed: 1, maxPositions: 4096 });
    const rows = Array.from({ length: 2 }, (_, i) => JSON.stringify({ input_ids: [1, 2, 3, 4, 5, 6 + i, 7, 8], response_start: 4, reward: i % 2 ? 1 : -1 }));
    fs.writeFileSync(data, rows.join('\n') + '\n');
  };
  /** Runs `body` with PATH led by a stand-in nvidia-smi that reports one card with `freeMiB` free. */
  async function withCard<T>(freeMiB: number, body: () => Promise<T>): Promise<T> {
    const dir = path.join(root, `card-${freeMiB}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'nvidia-smi'), `#!/bin/sh\necho 'NVIDIA Test Card, 16384, ${freeMiB}'\n`, { mode: 0o755 });
    const before = { PATH: process.env.PATH, CUDA_VISIBLE_DEVICES: process.env.CUDA_VISIBLE_DEVICES };
    process.env.PATH = `${dir}${path.delimiter}${before.PATH}`;
    delete process.env.CUDA_VISIBLE_DEVICES;
    try {
      return await body();
    } finally {
      process.env.PATH = before.PATH;
      if (before.CUDA_VISIBLE_DEVICES !== undefined) process.env.CUDA_VISIBLE_DEVICES = before.CUDA_VISIBLE_DEVICES;
    }
  }

  it('hindsight train --device cuda: off on a card with room, on (the length rule) on one without', { timeout: 300_000 }, async () => {
    prepare();
    const args = (out: string) => ['train', '--model', model, '--out', path.join(root, out), '--data', data, '--steps', '1', '--batch-size', '2', '--max-length', '2048', '--device', 'cuda'];
    const roomy = await withCard(16000, () => runCli(...args('roomy')));
    expect(roomy.stderr).toMatch(/^memory: about \d+ MB in the host's memory and \d+ MB on the GPU \(.*\); this machine has .*, the GPU \(NVIDIA Test Card\) 15\.6 GB free of 16\.0 GB; --recompute auto leaves recomputation off: the GPU has room without it$/m);
    expect(roomy.stderr).toMatch(/^building the training graph$/m);
    // 100 MB free: not even the CUDA context fits; started anyway, the length rule applies.
    const tight = await withCard(100, () => runCli(...args('tight')));
    expect(tight.code).not.toBe(0);
    expect(tight.stderr.trim()).toMatch(/^hindsight train: This run needs about \d+ MB on the GPU \(NVIDIA Test Card\) even with one row of 2,048 tokens at a time, but the GPU has 100 MB free of 16\.0 GB: .*--ignore-memory to start anyway\.$/);
    const forced = await withCard(100, () => runCli(...args('forced'), '--ignore-memory'));
    expect(forced.stderr).toMatch(/^building the training graph \(micro-batches of 1 row, recomputing activations\)$/m);
  });

  it("the app's training service: the same choice, handed to the trainer", { timeout: 300_000 }, async () => {
    prepare();
    const { ws, dir } = await tempWorkspace();
    const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
    await ws.importExport(fakeExport('s.jsonl', [story('a', 'Once upon a time.', 'Perfect, thanks!'), story('b', 'The dog ran.', 'No.')]));
    ws.setLabel('openai:a', 1, { reward: 1 });
    ws.setLabel('openai:b', 1, { reward: -1 });
    const events = new EventHub();
    const phases: string[] = [];
    let settle: (() => void) | undefined;
    events.subscribe((name, payload) => {
      if (name !== 'train.status') return;
      const info = payload as TrainRunInfo;
      if (info.phase) phases.push(info.phase);
      if (['finished', 'cancelled', 'failed'].includes(info.status)) settle?.();
    });
    const service = new TrainingService(events, () => ws);
    const config = (out: string): TrainConfig => ({
      modelDir: model, outDir: path.join(dir, out), method: 'rl', steps: 1, batchSize: 2, lr: 1e-3, optimizer: 'adamw', loraR: 4, loraAlpha: 8,
      targets: ['q', 'v'], device: 'cuda', seed: 0, checkpointEvery: 0, maxLength: 2048,
    });
    for (const [freeMiB, phase] of [[16000, 'building the training graph'], [100, 'building the training graph (micro-batches of 1 row, recomputing activations)']] as const) {
      const ended = new Promise<void>((resolve) => (settle = resolve));
      await withCard(freeMiB, () => service.start({ ...config(`run-${freeMiB}`), ignoreMemory: true }));
      await ended;
      expect(phases).toContain(phase);
      phases.length = 0;
    }
    ws.close();
  });
});
