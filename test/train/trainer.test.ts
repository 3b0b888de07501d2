// The trainer's guarantees with the real training step on stories260K: resume and cancel
// continue bit-for-bit, an exported adapter loads back as it is (--init-adapter) and scores
// as the trained weights do, a non-finite step stops the run naming the step and keeps the
// last good checkpoint, and combine trains on ±1 and hinted rows together.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { enhancedContext } from '../../src-main/pipeline/hint-context.js';
import { padBatch } from '../../src-main/train/batches.js';
import { findCheckpoint, loadCheckpoint, readCheckpointState } from '../../src-main/train/run-checkpoint.js';
import { ADAPTER_WEIGHTS } from '../../src-main/train/peft-read.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32 } from '../../src-main/model/safetensors.js';
import { readLog, type StepLog } from '../../src-main/train/trainer-log.js';
import { scoreWithAdapter } from '../../src-main/train/merge.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { train, type TrainerOptions } from '../../src-main/train/trainer.js';

const MODEL = path.resolve('resources/models/stories260K');
let tmp: string;
let dataFile: string;
let rows: { inputIds: number[]; responseStart: number }[];

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-trainer-'));
  const tok = ChatTokenizer.load(MODEL);
  const ctx = [{ role: 'user', content: 'Tell me a story.' }];
  const line = (reply: string, reward: number, hint?: string) => {
    const s = tok.encodeResponse(ctx, reply);
    const out: Record<string, unknown> = { input_ids: s.inputIds, response_start: s.responseStart, reward };
    if (hint) {
      const t = tok.encodeResponse(enhancedContext(ctx, hint), reply);
      Object.assign(out, { teacher_input_ids: t.inputIds, teacher_response_start: t.responseStart });
    }
    return out;
  };
  const lines = [
    line(' Once upon a time, there was a little girl named Lily.', 1),
    line(' The dog ran to the park and played with a ball.', -1),
    line(' Ben was a little boy. Ben liked to play.', 0, 'Use the name Ben.'),
    line(' Sue had a red ball.', -1, 'The girl is called Sue and she has a red ball.'),
    line(' Lily went to the park with her mom.', 1),
  ];
  dataFile = path.join(tmp, 'data.jsonl');
  fs.writeFileSync(dataFile, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  rows = lines.map((l) => ({ inputIds: l.input_ids as number[], responseStart: l.response_start as number }));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const base = (out: string, extra: Partial<TrainerOptions> = {}): TrainerOptions => ({
  modelDir: MODEL, outDir: path.join(tmp, out), dataFile, method: 'combine', batchSize: 2, lr: 2e-3, seed: 3, loraR: 4, loraAlpha: 8, ...extra,
});
const bytes = (file: string) => fs.readFileSync(file);
const withoutTiming = (l: StepLog) => ({ ...l, tokens_per_s: 0, elapsed_s: 0, eta_s: 0 });

describe('trainer', () => {
  it('cancel after 2 steps, then resume to 4, is bit-for-bit the same as 4 steps in one go', async () => {
    const straight = await train(base('straight', { steps: 4, saveEvery: 2 }));
    expect(straight).toMatchObject({ status: 'finished', steps: 4, rows: 5 });

    let seen = 0;
    const cancelled = await train(base('split', { steps: 4 }), {
      onEvent: (e) => e.type === 'step' && seen++,
      shouldStop: () => seen >= 2,
    });
    expect(cancelled).toMatchObject({ status: 'cancelled', steps: 2 });
    expect(findCheckpoint(path.join(tmp, 'split'))).toMatch(/step-000002$/);

    const resumed = await train({ modelDir: MODEL, outDir: path.join(tmp, 'split'), method: 'combine', resume: path.join(tmp, 'split') });
    expect(resumed).toMatchObject({ status: 'finished', steps: 4, totalSteps: 4 });
    for (const f of ['adapter_model.safetensors', 'adapter_config.json']) {
      expect(bytes(path.join(tmp, 'split', f)).equals(bytes(path.join(tmp, 'straight', f)))).toBe(true);
    }
    const config = Checkpoint.open(MODEL).config;
    const a = loadCheckpoint(path.join(tmp, 'straight'), config), b = loadCheckpoint(path.join(tmp, 'split'), config);
    expect(a.optimizer.step).toBe(4);
    expect(b.optimizer.step).toBe(4);
    for (const [k, m] of a.optimizer.m) {
      expect(Buffer.from(b.optimizer.m.get(k)!.buffer).equals(Buffer.from(m.buffer))).toBe(true);
      expect(Buffer.from(b.optimizer.v.get(k)!.buffer).equals(Buffer.from(a.optimizer.v.get(k)!.buffer))).toBe(true);
    }
    expect(readLog(path.join(tmp, 'split', 'trainer_log.jsonl')).map(withoutTiming))
      .toEqual(readLog(path.join(tmp, 'straight', 'trainer_log.jsonl')).map(withoutTiming));
    // The adapter moved: B is no longer zero.
    expect([...a.weights].some(([k, w]) => k.endsWith('lora_B.weight') && w.some((x) => x !== 0))).toBe(true);
  });

  it('a kill right after the last checkpoint: resume finishes the run (adapter, merge) without a step more', async () => {
    const done = await train(base('killed-at-end', { steps: 2, merge: true }));
    const dir = path.join(tmp, 'killed-at-end');
    const adapter = bytes(path.join(dir, 'adapter_model.safetensors'));
    // What a kill between the final checkpoint and the export leaves: the checkpoint only.
    for (const f of ['adapter_model.safetensors', 'adapter_config.json']) fs.rmSync(path.join(dir, f));
    fs.rmSync(done.mergedDir!, { recursive: true });
    const log = readLog(path.join(dir, 'trainer_log.jsonl'));
    const resumed = await train({ modelDir: MODEL, outDir: dir, method: 'combine', resume: dir });
    expect(resumed).toMatchObject({ status: 'finished', steps: 2, totalSteps: 2 });
    expect(bytes(path.join(dir, 'adapter_model.safetensors')).equals(adapter)).toBe(true);
    expect(fs.existsSync(path.join(dir, 'merged', 'config.json'))).toBe(true);
    expect(readLog(path.join(dir, 'trainer_log.jsonl')).map(withoutTiming)).toEqual(log.map(withoutTiming));
    // Asking for fewer steps than were done is still refused, naming what to ask for.
    await expect(train({ modelDir: MODEL, outDir: dir, method: 'combine', resume: dir, steps: 1 })).rejects.toThrow(/has done 2 steps already/);
  });

  it('an exported adapter loads back as it is (--init-adapter) and scores as the trained weights do', async () => {
    const first = await train(base('first', { steps: 2 }));
    const config = Checkpoint.open(MODEL).config;
    const exported = readAdapter(first.adapterDir, config);
    const trained = loadCheckpoint(first.adapterDir, config);
    for (const [k, w] of trained.weights) expect(Buffer.from(exported.weights.get(k)!.buffer).equals(Buffer.from(w.buffer))).toBe(true);

    // --init-adapter: the new run's step-0 checkpoint holds exactly the adapter's tensors.
    let initial: Buffer | undefined;
    await train(base('second', { steps: 1, initAdapter: first.adapterDir, loraR: undefined, loraAlpha: undefined }), {
      onEvent: (e) => {
        if (e.type !== 'status' || e.phase !== 'training') return;
        const dir = findCheckpoint(path.join(tmp, 'second'));
        expect(dir).toMatch(/step-000000$/);
        initial = bytes(path.join(dir, 'adapter_model.safetensors'));
      },
    });
    expect(initial!.equals(bytes(path.join(first.adapterDir, 'adapter_model.safetensors')))).toBe(true);
    await expect(train(base('third', { steps: 1, initAdapter: first.adapterDir, loraR: 8 })))
      .rejects.toThrow(/--init-adapter .* has r 4, but 8 was asked for/);

    // Scores: the training step's policy with the exported weights, and the independent unmerged-LoRA graph.
    const step = await createTrainStep(MODEL, {
      lora: exported.lora, device: 'cpu',
      loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
      optimizer: { kind: 'sgd', lr: 1, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
    });
    const batch = padBatch(rows);
    const fromExport = await step.policyLogprobs(batch, exported.weights);
    const fromTraining = await step.policyLogprobs(batch, trained.weights);
    const baseLp = await step.baseLogprobs(batch);
    await step.close();
    expect(Buffer.from(fromExport.buffer).equals(Buffer.from(fromTraining.buffer))).toBe(true);
    const viaHook = await scoreWithAdapter(MODEL, first.adapterDir, rows);
    let maxDiff = 0, moved = 0;
    rows.forEach((r, b) => viaHook[b]!.forEach((x, i) => {
      const t = b * batch.seqLen + r.responseStart + i;
      maxDiff = Math.max(maxDiff, Math.abs(x - fromExport[t]!));
      moved = Math.max(moved, Math.abs(fromExport[t]! - baseLp[t]!));
    }));
    expect(maxDiff).toBeLessThan(1e-4);
    expect(moved).toBeGreaterThan(1e-2);
  });

  it('a non-finite step stops the run, names the step, and keeps the last good checkpoint', async () => {
    const out = path.join(tmp, 'blowup');
    // The learning rate stops at 1 (src-shared/training.ts TRAIN_BOUNDS): w_opd = w_rl = 1e30 make the advantages, and so the update, 1e30 times larger.
    await expect(train(base('blowup', { steps: 5, saveEvery: 1, lr: 1, wOpd: 1e30, wRl: 1e30, optimizer: 'sgd', maxGradNorm: 0 })))
      .rejects.toThrow(/^training stopped at step (\d): (the loss is NaN|the loss is -?Infinity|the gradient norm is (NaN|Infinity)|the update made .* non-finite) \(lr 1\); the last good checkpoint \(step \d\) is kept in /);
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    const kept = findCheckpoint(out);
    const saved = readCheckpointState(out);
    expect(kept).toMatch(new RegExp(`step-${String(log.length).padStart(6, '0')}$`));
    expect(saved.state.step).toBe(log.length);
    // Its weights are finite, read raw: the adapter reader refuses them for use, since an update
    // this large (advantages of 1e30) is one the model cannot compute finitely (peft-read.ts).
    for (const entry of readSafetensorsHeader(path.join(saved.dir, ADAPTER_WEIGHTS)).tensors) {
      expect(toFloat32(readTensorBytes(entry), entry.dtype, entry.name).every(Number.isFinite)).toBe(true);
    }
    expect(log.every((l) => Number.isFinite(l.loss))).toBe(true);
    expect(fs.existsSync(path.join(out, 'adapter_config.json'))).toBe(false); // no final export of a broken run
  });

  it('the non-finite stop names the checkpoint on disk, the last one saved, not the step before', async () => {
    const out = path.join(tmp, 'blowup-sparse');
    // Advantages of 1e30 leave step 1 finite (its weights start at B = 0) and break a later one; only step 0 is saved before the end.
    const err = await train(base('blowup-sparse', { steps: 5, saveEvery: 0, lr: 1, wOpd: 1e30, wRl: 1e30, optimizer: 'sgd', maxGradNorm: 0 })).catch((e: Error) => e);
    const m = /^training stopped at step (\d): .*; the last good checkpoint \(step (\d)\) is kept in (\S+)$/.exec((err as Error).message);
    expect(m, (err as Error).message).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(1);
    expect(Number(m![2])).toBe(0);
    expect(m![3]).toBe(findCheckpoint(out));
    expect(loadCheckpoint(out, Checkpoint.open(MODEL).config).state.step).toBe(0);
  });

  it('the k3 KL penalty against the base runs, and --merge writes a loadable merged model', async () => {
    const plain = await train(base('nokl', { steps: 2 }));
    const kl = await train(base('kl', { steps: 2, klBeta: 0.5, merge: true }));
    const [a, b] = [readLog(plain.logFile), readLog(kl.logFile)];
    expect(b[0]!.loss).toBe(a[0]!.loss); // at step 1 the policy is the base (B = 0): k3 = 0
    expect(b[1]!.loss).toBeGreaterThan(a[1]!.loss); // same weights after step 1 (k3's gradient is 0 there), then + β·k3 > 0
    expect(Number.isFinite(b[1]!.loss)).toBe(true);
    const merged = Checkpoint.open(kl.mergedDir!);
    expect(merged.config.numLayers).toBe(Checkpoint.open(MODEL).config.numLayers);
    expect(fs.existsSync(path.join(kl.mergedDir!, 'tokenizer.json'))).toBe(true);
  });

  it('says why there is nothing to train on', async () => {
    const empty = path.join(tmp, 'zeros.jsonl');
    fs.writeFileSync(empty, JSON.stringify({ input_ids: [1, 2, 3], response_start: 1, reward: 0 }) + '\n');
    await expect(train(base('none', { dataFile: empty, method: 'rl' })))
      .rejects.toThrow(/nothing to train on with method rl in .*zeros\.jsonl \(left out: 1 × reward 0\)/);
  });
});
