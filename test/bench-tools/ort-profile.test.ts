/**
 * The profile summary bench/gpu.ts prints under BENCH_PROFILE=1 (bench/ort-profile.ts): on
 * the traces ONNX Runtime writes for a real training step on the CPU (a tiny model, three
 * steps, profiling turned on by HINDSIGHT_ORT_PROFILE as the bench's children have it), the
 * window of one step keeps that step's runs and nodes only; and on a trace written here, the
 * Memcpy nodes and the time split come out as counted by hand.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { epochMs, formatProfile, profileFiles, profileStartMs, summariseProfiles, type ProfileWindow } from '../../bench/ort-profile.js';
import { profileFolder } from '../../src-main/model/ort-session.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import type { OptimizerState } from '../../src-main/train/training-step.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { adamw, LORA, lossConfig, tinyBatch } from '../train/step-helpers.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

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
    const before = process.env.HINDSIGHT_ORT_PROFILE;
    process.env.HINDSIGHT_ORT_PROFILE = folder;
    const windows: ProfileWindow[] = [];
    let created: ProfileWindow;
    try {
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
    } finally {
      if (before === undefined) delete process.env.HINDSIGHT_ORT_PROFILE;
      else process.env.HINDSIGHT_ORT_PROFILE = before;
    }
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
