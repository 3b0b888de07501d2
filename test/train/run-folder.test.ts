// A run's output folder and its options, on the real trainer with stories260K:
// - a folder that holds a run is never written over silently: a new run there is refused,
//   --overwrite starts over (the old run gone), --resume continues, even a run killed
//   before its first step (only the step-0 checkpoint on disk);
// - a resumed run keeps every option it was started with (checkpoint interval, merge, the
//   loss and optimizer numbers) unless the caller gives one again; options that fix the data
//   order or the weights' shape cannot change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findCheckpoint, readCheckpointState } from '../../src-main/train/run-checkpoint.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { train, type RunSettings, type TrainerEvent, type TrainerOptions } from '../../src-main/train/trainer.js';

const MODEL = path.resolve('resources/models/stories260K');
let tmp: string;
let dataFile: string;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-run-folder-'));
  dataFile = path.join(tmp, 'data.jsonl');
  fs.writeFileSync(dataFile, [
    { input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 90, 250, 263, 93], response_start: 11, reward: 1 },
    { input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 45, 112, 350], response_start: 11, reward: -1 },
  ].map((l) => JSON.stringify(l)).join('\n') + '\n');
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const base = (out: string, extra: Partial<TrainerOptions> = {}): TrainerOptions => ({
  modelDir: MODEL, outDir: path.join(tmp, out), dataFile, method: 'rl', batchSize: 1, lr: 1e-3, loraR: 2, loraAlpha: 4, targets: ['q'], ...extra,
});

/** Runs and records the steps at which a checkpoint was written. */
async function trainRecording(options: TrainerOptions, stopAfter = Infinity) {
  const checkpoints: number[] = [];
  let steps = 0;
  const result = await train(options, {
    onEvent: (e: TrainerEvent) => {
      if (e.type === 'step') steps++;
      const m = e.type === 'status' && e.phase === 'saving' ? /checkpoint at step (\d+)/.exec(e.message) : null;
      if (m) checkpoints.push(Number(m[1]));
    },
    shouldStop: () => steps >= stopAfter,
  });
  return { result, checkpoints };
}

describe('the output folder of a run', () => {
  it('refuses a folder that holds a run; --overwrite starts over, removing the old run', async () => {
    const out = path.join(tmp, 'used');
    await train(base('used', { steps: 2 }));
    fs.writeFileSync(path.join(out, 'notes-from-the-old-run.txt'), 'old');
    const before = fs.readFileSync(path.join(out, 'adapter_model.safetensors'));
    await expect(train(base('used', { steps: 1 }))).rejects.toThrow(
      /^\S*used already holds a training run: continue it with --resume \S*used, or start over with --overwrite \(the old run is removed\)$/,
    );
    expect(fs.readFileSync(path.join(out, 'adapter_model.safetensors')).equals(before)).toBe(true); // untouched
    const again = await train(base('used', { steps: 1, overwrite: true }));
    expect(again).toMatchObject({ status: 'finished', steps: 1, totalSteps: 1 });
    expect(fs.existsSync(path.join(out, 'notes-from-the-old-run.txt'))).toBe(false);
    expect(readLog(path.join(out, 'trainer_log.jsonl')).map((l) => l.step)).toEqual([1]);
    expect(fs.readdirSync(tmp).filter((n) => n.includes('removing'))).toEqual([]);
    await expect(train(base('used', { resume: out, overwrite: true }))).rejects.toThrow(/--overwrite would remove the run in .* that --resume continues/);
  });

  it('a run killed before its first step: a rerun is refused in one line, --resume continues from step 0', async () => {
    const out = path.join(tmp, 'killed');
    // What a kill -9 before step 1 leaves: the rows, an empty log and the step-0 checkpoint.
    await train(base('killed', { steps: 3 }), { shouldStop: () => true });
    for (const f of ['adapter_model.safetensors', 'adapter_config.json']) fs.rmSync(path.join(out, f));
    expect(findCheckpoint(out)).toMatch(/step-000000$/);
    await expect(train(base('killed', { steps: 3 }))).rejects.toThrow(/killed already holds a training run: continue it with --resume/);
    const resumed = await train({ outDir: out, resume: out });
    expect(resumed).toMatchObject({ status: 'finished', steps: 3, totalSteps: 3 });
    expect(readLog(path.join(out, 'trainer_log.jsonl')).map((l) => l.step)).toEqual([1, 2, 3]);
  });

  it('a folder with the rows but no checkpoint yet cannot be resumed; it says to start over', async () => {
    const out = path.join(tmp, 'no-checkpoint');
    fs.mkdirSync(out);
    fs.copyFileSync(dataFile, path.join(out, 'dataset.jsonl'));
    await expect(train({ outDir: out, resume: out })).rejects.toThrow(/holds no checkpoint to resume from .*start it over with --overwrite/);
    expect((await train(base('no-checkpoint', { steps: 1, overwrite: true }))).status).toBe('finished');
  });
});

describe('resume keeps the options of the run', () => {
  it('--save-every, --merge and the loss and optimizer numbers carry over; a given option wins', async () => {
    const out = path.join(tmp, 'kept');
    const first = await trainRecording(base('kept', { steps: 6, saveEvery: 2, merge: true, klBeta: 0.25, lr: 2e-3, maxGradNorm: 0.5 }), 2);
    expect(first.result).toMatchObject({ status: 'cancelled', steps: 2 });
    const started = readCheckpointState<RunSettings>(out).state.settings;

    const resumed = await trainRecording({ outDir: out, resume: out }, 2);
    expect(resumed.result).toMatchObject({ status: 'cancelled', steps: 4 });
    expect(resumed.checkpoints).toEqual([4]); // every 2 steps as started, not the default 10
    expect(resumed.result.mergedDir).toBe(path.join(out, 'merged'));
    expect(readCheckpointState<RunSettings>(out).state.settings).toEqual(started);

    // Given again, an option wins, and the checkpoint remembers it for the next resume.
    const changed = await trainRecording({ outDir: out, resume: out, saveEvery: 1, lr: 1e-3 });
    expect(changed.result).toMatchObject({ status: 'finished', steps: 6 });
    expect(changed.checkpoints).toEqual([5, 6]);
    expect(readCheckpointState<RunSettings>(out).state.settings).toEqual({ ...started, saveEvery: 1, optimizer: { ...started.optimizer, lr: 1e-3 } });
  });

  it('refuses to change what fixes the data order or the weights, and accepts the same value', async () => {
    const out = path.join(tmp, 'fixed');
    await trainRecording(base('fixed', { steps: 3 }), 1);
    await expect(train({ outDir: out, resume: out, loraR: 8 })).rejects.toThrow(/a resumed run keeps its LoRA rank \(2\), so 8 cannot be asked for/);
    await expect(train({ outDir: out, resume: out, method: 'combine' })).rejects.toThrow(/keeps its method \("rl"\)/);
    await expect(train({ outDir: out, resume: out, batchSize: 2 })).rejects.toThrow(/keeps its batch size \(1\)/);
    expect((await train({ outDir: out, resume: out, loraR: 2, method: 'rl', targets: ['q'] })).steps).toBe(3);
  });
});
