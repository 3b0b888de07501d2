/**
 * The profile summary bench/gpu.ts prints under BENCH_PROFILE=1 (bench/ort-profile.ts): on
 * the traces ONNX Runtime writes for a real training step on the CPU (a tiny model, three
 * steps, profiling turned on by HINDSIGHT_ORT_PROFILE as the bench's children have it), the
 * window of one step keeps that step's runs and nodes only; and on a trace written here, the
 * Memcpy nodes and the time split come out as counted by hand. WebGPU's kernels timed on the
 * GPU go to their runs by count: by hand, and on a real WebGPU session where an adapter answers
 * (Mesa's lavapipe on the build machines).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { epochMs, formatProfile, profileFiles, profileStartMs, summariseProfiles, type ProfileWindow } from '../../bench/ort-profile.js';
import { createSession, ort, profileFolder } from '../../src-main/model/ort-session.js';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import type { OptimizerState } from '../../src-main/train/training-step.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { adamw, LORA, lossConfig, tinyBatch } from '../train/step-helpers.js';
import { withEnv } from '../helpers/env.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Runs `work` with HINDSIGHT_ORT_PROFILE set to `folder`, as the benches' children have it (sessions read it when created). */
const withProfileFolder = <T>(folder: string, work: () => Promise<T>): Promise<T> => withEnv('HINDSIGHT_ORT_PROFILE', folder, work);

describe('profileFolder (SessionConfig.profile)', () => {
  it('is the option, else HINDSIGHT_ORT_PROFILE, and false or neither is off', () => {
    const before = process.env.HINDSIGHT_ORT_PROFILE;
    try {
      delete process.env.HINDSIGHT_ORT_PROFILE;
      expect(profileFolder()).toBeUndefined();
      expect(profileFolder('rel/dir')).toBe(path.resolve('rel/dir'));
      process.env.HINDSIGHT_ORT_PROFILE = tmp;
      expect(profileFolder()).toBe(tmp);
      expect(profileFolder(false)).toBeUndefined();
    } finally {
      if (before === undefined) delete process.env.HINDSIGHT_ORT_PROFILE;
      else process.env.HINDSIGHT_ORT_PROFILE = before;
    }
  });
});

describe('a real training step profiled on the CPU', () => {
  it('writes one trace per session at release, anchored at its start, and a step\'s window keeps that step alone', async () => {
    const folder = path.join(tmp, 'step');
    const model = writeTinyModel(path.join(tmp, 'model'), { family: 'qwen3', tie: true }).dir;
    const ckpt = Checkpoint.open(model);
    const windows: ProfileWindow[] = [];
    let created: ProfileWindow = { startMs: 0, endMs: 0 };
    await withProfileFolder(folder, async () => {
      const t0 = epochMs();
      const step = await createTrainStep(ckpt, { lora: LORA, loss: lossConfig('rl'), optimizer: adamw(1e-3), device: 'cpu', threads: 1 });
      created = { startMs: t0, endMs: epochMs() };
      const batch = tinyBatch('rl', ckpt.config.vocabSize, 3, 32);
      let weights = initLora(loraSpecs(ckpt.config, LORA.targets), LORA.r, 1);
      let state: OptimizerState = { step: 0, m: new Map(), v: new Map() };
      for (let i = 0; i < 3; i++) {
        const startMs = epochMs();
        ({ weights, state } = await step.step(batch, weights, state));
        windows.push({ startMs, endMs: epochMs() });
      }
      // ONNX Runtime opens the file when the session starts and writes it when the session is released.
      expect(profileFiles(folder).map((f) => fs.statSync(f).size)).toEqual([0]);
      await step.close();
    });
    const files = profileFiles(folder);
    expect(files).toHaveLength(1); // the step's one session (no forward or teacher pass was asked for)
    const start = profileStartMs(files[0]!)!;
    expect(start).toBeGreaterThanOrEqual(Math.floor(created.startMs));
    expect(start).toBeLessThanOrEqual(created.endMs);

    const whole = await summariseProfiles(folder);
    const last = await summariseProfiles(folder, windows[2]);
    expect(whole.runs).toBe(3);
    expect(last.runs).toBe(1);
    expect(last.wallMs).toBeCloseTo(windows[2]!.endMs - windows[2]!.startMs, 6);
    expect(last.kernelMs).toBeGreaterThan(0);
    expect(last.kernelMs).toBeLessThanOrEqual(last.runMs);
    expect(last.runMs).toBeLessThanOrEqual(last.wallMs + 2); // the anchor is to the millisecond
    expect(last.kernelMs).toBeLessThan(whole.kernelMs);
    expect(last.byProvider.map((g) => g.key)).toEqual(['CPU']);
    expect(last.byOp.map((g) => g.key)).toContain('MatMul');
    expect(last.byOp.reduce((s, g) => s + g.ms, 0)).toBeCloseTo(last.kernelMs, 6);
    expect(last.byOp.reduce((s, g) => s + g.nodes, 0) * 3).toBe(whole.byOp.reduce((s, g) => s + g.nodes, 0));
    expect(last.copies.nodes).toBe(0);

    expect(last.bySession.map((g) => [g.key, g.nodes])).toEqual([['lora_train', 1]]);
    const text = formatProfile('cpu step', last, 5);
    expect(text).toContain('1 session runs in 1 trace file(s)');
    expect(text).toContain(`- by session: lora_train 1 run, ${last.runMs.toFixed(1)} ms`);
    expect(text.split('\n').filter((l) => /^\| \w+ \| CPU \| \d+ \|/.test(l))).toHaveLength(5);
    expect(text).not.toContain('CUDA_LAUNCH_BLOCKING'); // the GPU note is for GPU providers only
  });
});

describe('a trace with copies between providers (written here)', () => {
  it('counts the Memcpy nodes and splits the window into kernels, runs and the rest', async () => {
    const folder = path.join(tmp, 'gpu');
    fs.mkdirSync(folder);
    const event = (cat: string, name: string, ts: number, dur: number, args: Record<string, string> = {}) => JSON.stringify({ cat, pid: 1, tid: 1, dur, ts, ph: 'X', name, args });
    const node = (op: string, provider: string, ts: number, dur: number) => event('Node', `${op}_${ts}_kernel_time`, ts, dur, { op_name: op, provider: `${provider}ExecutionProvider` });
    // Run 1 (a warm-up, outside the window) at 1,000 µs; run 2 at 10,000 µs: 4 ms, 3 ms of it in nodes.
    const events = [
      event('Session', 'session_initialization', 0, 900),
      node('MatMul', 'CUDA', 1_100, 500), event('Session', 'model_run', 1_000, 2_000),
      node('MemcpyFromHost', 'CUDA', 10_100, 200), node('MatMul', 'CUDA', 10_400, 1_500), node('MatMul', 'CUDA', 11_950, 500),
      node('Shape', 'CPU', 12_500, 100), node('MemcpyToHost', 'CUDA', 12_700, 700), event('Session', 'model_run', 10_000, 4_000),
    ];
    const file = path.join(folder, 'train-1-0-0_2026-11-27_07-05-09_7.json');
    fs.writeFileSync(file, `[\n${events.join(',\n')}\n]\n`);
    const start = new Date(2026, 10, 27, 7, 5, 9, 7).getTime();
    expect(profileStartMs(file)).toBe(start);
    const s = await summariseProfiles(folder, { startMs: start + 9, endMs: start + 15 });
    expect(s).toMatchObject({ wallMs: 6, files: 1, runs: 1, runMs: 4, kernelMs: 3, copies: { nodes: 2, ms: 0.9, byOp: { MemcpyFromHost: 1, MemcpyToHost: 1 } } });
    expect(s.bySession).toEqual([{ key: 'train', nodes: 1, ms: 4 }]);
    expect(s.byOp[0]).toEqual({ key: 'MatMul', nodes: 2, ms: 2, providers: ['CUDA'] });
    expect(s.byProvider).toEqual([{ key: 'CUDA', nodes: 4, ms: 2.9 }, { key: 'CPU', nodes: 1, ms: 0.1 }]);
    const text = formatProfile('cuda step', s);
    expect(text).toContain('in node kernels 3.0 ms (50.0%); in runs outside kernels 1.0 ms (16.7%); outside runs (JavaScript: feeds, outputs, the host\'s optimizer) 2.0 ms (33.3%)');
    expect(text).toContain('2 Memcpy nodes (MemcpyFromHost 1, MemcpyToHost 1), 0.9 ms (15.0%)');
    expect(text).toContain('CUDA_LAUNCH_BLOCKING=1');
    expect((await summariseProfiles(folder)).runs).toBe(2); // no window: every run
  });
});

describe('WebGPU\'s kernels timed on the GPU', () => {
  it('go to the runs by count (a trace written here): the window\'s run\'s kernels, a name no run count divides left out', async () => {
    const folder = path.join(tmp, 'webgpu-hand');
    fs.mkdirSync(folder);
    const event = (cat: string, name: string, ts: number, dur: number, args: Record<string, string> = {}) => JSON.stringify({ cat, pid: 1, tid: 1, dur, ts, ph: 'X', name, args });
    const kernel = (name: string, ts: number, dur: number) => event('Api', name, ts, dur, { shapes: 'inputs[0] = {2,3} outputs[0] = {2,3} ', cache_key: 'x' });
    // Two runs; the GPU's clock starts at its first kernel. Run 2's kernels: 700 + 300 + 200 µs.
    const events = [
      event('Session', 'model_run', 1_000, 2_000), event('Session', 'model_run', 10_000, 4_000),
      kernel('n_MatMul_1&MatMul&MatMulPacked', 5_000, 700), kernel('n_MatMul_1&MatMul&MatMulPacked', 0, 400),
      kernel('n_Add_2&Add&Add', 100, 50), kernel('n_Add_2&Add&Add', 5_800, 300),
      kernel('n_Mul_3&Mul&Mul', 150, 60), kernel('n_Mul_3&Mul&Mul', 220, 70), kernel('n_Mul_3&Mul&Mul', 6_200, 100), kernel('n_Mul_3&Mul&Mul', 6_400, 100),
      kernel('n_Odd_4&Odd&Odd', 300, 999), kernel('n_Odd_4&Odd&Odd', 400, 999), kernel('n_Odd_4&Odd&Odd', 6_600, 999),
    ];
    const file = path.join(folder, 'train-1-0-0_2026-11-27_07-05-09_7.json');
    fs.writeFileSync(file, `[\n${events.join(',\n')}\n]\n`);
    const start = new Date(2026, 10, 27, 7, 5, 9, 7).getTime();
    const s = await summariseProfiles(folder, { startMs: start + 9, endMs: start + 15 });
    expect(s.gpu).toMatchObject({ kernels: 4, ms: 1.2 });
    expect(s.gpu.byOp).toEqual([{ key: 'MatMul', nodes: 1, ms: 0.7 }, { key: 'Add', nodes: 1, ms: 0.3 }, { key: 'Mul', nodes: 2, ms: 0.2 }]);
    expect(s.gpu.byProgram.map((g) => g.key)).toEqual(['MatMulPacked', 'Add', 'Mul']);
    expect(s.gpu.byShape[0]!.key).toBe('MatMulPacked: inputs[0] = {2,3} outputs[0] = {2,3}');
    const text = formatProfile('webgpu step', s);
    expect(text).toContain('- on the GPU\'s own clock (WebGPU\'s timestamps): 4 kernels, 1.2 ms (20.0% of wall)');
    expect(text).toContain('| MatMulPacked | 1 | 0.7 ms | 58.3% |');
    expect((await summariseProfiles(folder)).gpu.kernels).toBe(8); // no window: both runs, the odd name still out
  });

  it('show a real WebGPU training step reading nothing back to the host mid-run: int4, recomputation and vocabulary chunks wait on dims, not data', async () => {
    // ../../src-main/graph/ops/shape.ts zeroAfter: with Size, WebGPU copied each anchor to the
    // host (a MemcpyToHost and a wait for the GPU's queue) to learn a number it never read.
    const folder = path.join(tmp, 'webgpu-step');
    const model = writeTinyModel(path.join(tmp, 'model-webgpu'), { family: 'qwen3', tie: true }).dir;
    const ckpt = Checkpoint.open(model);
    const made = await withProfileFolder(folder, () => createTrainStep(ckpt, {
      lora: LORA, loss: lossConfig('combine'), optimizer: adamw(1e-3), device: 'webgpu', quantize: 'int4', recompute: true, vocabChunk: 64,
    }).catch((err: Error) => err));
    if (made instanceof Error) {
      console.info(`ort-profile: no WebGPU adapter here, so the step's copies are not checked: ${made.message}`);
      return;
    }
    const weights = initLora(loraSpecs(ckpt.config, LORA.targets), LORA.r, 1);
    await made.step(tinyBatch('combine', ckpt.config.vocabSize, 3, 32), weights, { step: 0, m: new Map(), v: new Map() });
    await made.close();
    const s = await summariseProfiles(folder);
    expect(s.runs).toBe(1);
    expect(s.byProvider.find((g) => g.key === 'WebGpu')?.nodes).toBeGreaterThan(100);
    expect(s.copies.byOp.MemcpyToHost ?? 0).toBe(0);
  });

  it('are in a real WebGPU session\'s trace, where an adapter answers', async () => {
    const folder = path.join(tmp, 'webgpu-real');
    const b = new GraphBuilder('webgpu_probe');
    // Big enough that a run lasts milliseconds: the trace's anchor is to the millisecond, and a run is kept by its middle.
    const x = b.input('x', 'float32', [512, 512]);
    b.output(b.identityAs(b.add(b.matmul(x, b.transpose(x, [1, 0])), b.scalar(1)), 'y'));
    const made = await createSession(b.graph, { device: 'webgpu', profile: folder }).catch((err: Error) => err);
    if (made instanceof Error) {
      console.info(`ort-profile: no WebGPU adapter here, so only the trace written by hand is checked: ${made.message}`);
      return;
    }
    const windows: ProfileWindow[] = [];
    const feeds = { x: new ort.Tensor('float32', Float32Array.from({ length: 512 * 512 }, (_, i) => (i % 97) / 97), [512, 512]) };
    for (let i = 0; i < 3; i++) {
      const startMs = epochMs();
      await made.session.run(feeds);
      windows.push({ startMs, endMs: epochMs() });
    }
    await made.session.release();
    const whole = await summariseProfiles(folder), last = await summariseProfiles(folder, windows[2]);
    if (whole.gpu.kernels === 0) {
      console.info('ort-profile: this WebGPU adapter has no timestamp queries, so its trace holds no GPU kernel times');
      return;
    }
    expect(last.runs).toBe(1);
    expect(whole.gpu.kernels).toBe(3 * last.gpu.kernels);
    expect(last.gpu.byOp.map((g) => g.key)).toEqual(expect.arrayContaining(['MatMul', 'Add']));
    expect(last.gpu.ms).toBeGreaterThan(0);
  });
});
