// Resume of an on-policy run stopped in the middle of a step's rollouts (docs/design.md
// §On-policy training): no finished episode is lost or generated again, and no update is
// repeated: the resumed run's episodes, log steps and final adapter equal an uninterrupted
// run's. Once with a stop after a given number of episodes (in-thread, at episode
// granularity), once with a real process killed with SIGKILL once episodes.jsonl has grown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Episode } from '../../src-shared/rollout.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { trainOnPolicy } from '../../src-main/onpolicy/onpolicy-trainer.js';
import type { OnPolicyTrainerOptions } from '../../src-main/onpolicy/options.js';
import { readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { loadCheckpoint } from '../../src-main/train/run-checkpoint.js';
import { readLog, type StepLog } from '../../src-main/train/trainer-log.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { runCli } from '../helpers/cli.js';
import { waitUntil } from '../helpers/deadlines.js';
import { MODEL, writeTasks } from './helpers.js';

let tmp: string;
let tasks: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-resume-'));
  tasks = writeTasks(path.join(tmp, 'tasks.jsonl'), [
    { messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: 'Lily' },
    { messages: [{ role: 'user', content: 'Once upon a time' }], answer_regex: 'dog' },
    { messages: [{ role: 'user', content: 'What did the cat do?' }], answer_regex: 'cat' },
    { messages: [{ role: 'user', content: 'Where is the ball?' }], answer_regex: 'park' },
  ]);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const K = 3;
const PER_STEP = 2 * K;
const options = (out: string): OnPolicyTrainerOptions => ({
  modelDir: MODEL, outDir: path.join(tmp, out), method: 'rl', advantage: 'grpo', steps: 3, lr: 5e-3, loraR: 4, loraAlpha: 8, seed: 7, saveEvery: 1,
  onPolicy: { taskFile: tasks, rollouts: K, contextsPerStep: 2, maxTokens: 20 },
});

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);
const episodesOf = (dir: string) => readEpisodes(path.join(dir, 'episodes.jsonl')).episodes;
const withoutTime = (e: Episode) => ({ ...e, summary: { ...e.summary, seconds: 0 } });
const withoutTiming = (l: StepLog) => ({ ...l, tokens_per_s: 0, elapsed_s: 0, eta_s: 0 });

/**
 * `actual` equals `expected` but for numbers, which agree within `tolerance` (relative past 1).
 * A resumed step may batch its missing episodes with other prompts than the whole run did, and
 * a batch pads and sums in another order: the same tokens, log-probs apart by float rounding
 * (docs/design.md §Batched generation, Seeds).
 */
function expectAlmostEqual(actual: unknown, expected: unknown, where: string, tolerance = 1e-5): void {
  if (typeof expected === 'number' && typeof actual === 'number') {
    expect(Math.abs(actual - expected), where).toBeLessThanOrEqual(tolerance * Math.max(1, Math.abs(expected)));
  } else if (expected && typeof expected === 'object' && actual && typeof actual === 'object') {
    expect(Object.keys(actual).sort(), where).toEqual(Object.keys(expected).sort());
    for (const [key, value] of Object.entries(expected)) expectAlmostEqual((actual as Record<string, unknown>)[key], value, `${where}.${key}`, tolerance);
  } else {
    expect(actual, where).toEqual(expected);
  }
}

/** The resumed run equals the straight one: the same episodes (each once), the same steps, the same adapter. */
function expectSameRun(straight: string, resumed: string): void {
  const a = episodesOf(straight), b = episodesOf(resumed);
  expect(b).toHaveLength(a.length);
  const byId = new Map(b.map((e) => [e.id, e]));
  for (const e of a) {
    const mine = byId.get(e.id)!;
    expect(mine.tokens.inputIds, e.id).toEqual(e.tokens.inputIds);
    expectAlmostEqual(withoutTime(mine), withoutTime(e), e.id);
  }
  expectAlmostEqual(readLog(path.join(resumed, 'trainer_log.jsonl')).map(withoutTiming), readLog(path.join(straight, 'trainer_log.jsonl')).map(withoutTiming), 'trainer_log');
  const config = Checkpoint.open(MODEL).config;
  expect(loadCheckpoint(resumed, config).optimizer.step).toBe(loadCheckpoint(straight, config).optimizer.step);
  const wa = readAdapter(straight, config).weights, wb = readAdapter(resumed, config).weights;
  for (const [key, v] of wa) {
    const w = wb.get(key)!;
    let worst = 0;
    v.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - w[i]!))));
    expect(worst, key).toBeLessThan(1e-6);
  }
}

describe('resume after a stop in the middle of the rollouts', () => {
  let straight: string;
  beforeAll(async () => {
    straight = options('straight').outDir!;
    await trainOnPolicy(options('straight'));
  });

  it('loses no finished episode, generates none twice, and repeats no update', async () => {
    const split = options('split');
    const file = path.join(split.outDir!, 'episodes.jsonl');
    // Stop when step 2 has written two of its six episodes.
    const stopAt = PER_STEP + 2;
    const stopped = await trainOnPolicy(split, { shouldStop: () => lines(file) >= stopAt });
    expect(stopped).toMatchObject({ status: 'cancelled', steps: 1 });
    const before = episodesOf(split.outDir!);
    expect(before).toHaveLength(stopAt);
    expect(before.filter((e) => e.step === 1)).toHaveLength(2);

    let generated = 0;
    const resumed = await trainOnPolicy({ resume: split.outDir!, onPolicy: {} }, {
      onEvent: (e) => void (e.type === 'step' && e.log.step === 2 && (generated = lines(file) - stopAt)),
    });
    expect(resumed).toMatchObject({ status: 'finished', steps: 3, episodes: 3 * PER_STEP });
    // Step 2 generated only the four episodes it lacked; the two it had are in the file once.
    expect(generated).toBe(PER_STEP - 2);
    expect(episodesOf(split.outDir!).slice(0, stopAt)).toEqual(before);
    expectSameRun(straight, split.outDir!);
  });

  it('a kill right after the last checkpoint: resume finishes the run (its adapter) with no step or episode more', async () => {
    const ended = path.join(tmp, 'ended');
    fs.cpSync(straight, ended, { recursive: true });
    for (const f of ['adapter_model.safetensors', 'adapter_config.json']) fs.rmSync(path.join(ended, f));
    const resumed = await trainOnPolicy({ resume: ended, onPolicy: {} });
    expect(resumed).toMatchObject({ status: 'finished', steps: 3, totalSteps: 3 });
    expect(fs.readFileSync(path.join(ended, 'adapter_model.safetensors')).equals(fs.readFileSync(path.join(straight, 'adapter_model.safetensors')))).toBe(true);
    expect(lines(path.join(ended, 'episodes.jsonl'))).toBe(lines(path.join(straight, 'episodes.jsonl')));
  });

  it('a killed process (SIGKILL once episodes.jsonl has grown) resumes from the CLI to the same run', async () => {
    const out = path.join(tmp, 'killed');
    const file = path.join(out, 'episodes.jsonl');
    const args = ['train', '--on-policy', '--model', MODEL, '--out', out, '--method', 'rl', '--advantage', 'grpo', '--steps', '3', '--lr', '5e-3',
      '--lora-r', '4', '--lora-alpha', '8', '--seed', '7', '--save-every', '1', '--tasks', tasks, '--rollouts', String(K), '--contexts-per-step', '2', '--max-tokens', '20'];
    const child = spawn(process.execPath, [path.resolve('bin/hindsight.mjs'), ...args], { stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await waitUntil('the run to write episodes of its second step', () => lines(file) > PER_STEP + 1 || child.exitCode !== null, undefined, 5);
    expect(child.exitCode, 'the run was still going when killed').toBeNull();
    child.kill('SIGKILL');
    await exited;
    const r = await runCli('train', '--resume', out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/finished: 3\/3 steps/);
    expectSameRun(options('straight').outDir!, out);
  });
});
