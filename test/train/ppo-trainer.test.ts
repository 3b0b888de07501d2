// The trainer with the advantage estimators and PPO epochs (docs/design.md §Advantage
// estimators) on stories260K through `--data`: a gae run writes its value head beside the
// adapter and in every checkpoint, and cancel + resume continues it bit for bit, value head
// and minibatch order included; the log carries drift, value loss and explained variance; a
// resume keeps the estimator; grpo without groups is refused; the CLI takes the flags.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { findCheckpoint, loadCheckpoint } from '../../src-main/train/run-checkpoint.js';
import { readLog, type StepLog } from '../../src-main/train/trainer-log.js';
import { train, type TrainerOptions } from '../../src-main/train/trainer.js';
import { VALUE_HEAD_FILE, VALUE_HEAD_WEIGHT } from '../../src-main/train/value-head.js';
import { runCli as cli } from '../helpers/cli.js';

const MODEL = path.resolve('resources/models/stories260K');
let tmp: string;
let dataFile: string;
let lines: Record<string, unknown>[];

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-ppo-trainer-'));
  const tok = ChatTokenizer.load(MODEL);
  const ctx = [{ role: 'user', content: 'Tell me a story.' }];
  const line = (reply: string, reward: number, group: string, extra: Record<string, unknown> = {}) => {
    const s = tok.encodeResponse(ctx, reply);
    return { input_ids: s.inputIds, response_start: s.responseStart, reward, group, ...extra };
  };
  lines = [
    line(' Once upon a time, there was a little girl named Lily.', 1, 'a'),
    line(' The dog ran to the park and played with a ball.', -1, 'a'),
    line(' Ben was a little boy. Ben liked to play.', 0.5, 'b'),
    line(' Lily went to the park with her mom.', 0, 'b'),
  ];
  // One row with token rewards, one with a masked token and rollout log-probs.
  const n1 = (lines[1]!.input_ids as number[]).length;
  lines[1]!.rewards = [{ at: n1 - 3, r: 0.5 }, { at: n1 - 1, r: -1.5 }];
  const r2 = (lines[2]!.input_ids as number[]).length - (lines[2]!.response_start as number);
  lines[2]!.response_mask = Array.from({ length: r2 }, (_, i) => (i === 1 ? 0 : 1));
  lines[2]!.old_logprobs = Array.from({ length: r2 }, () => -3);
  dataFile = path.join(tmp, 'data.jsonl');
  fs.writeFileSync(dataFile, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const gaeRun = (out: string, extra: Partial<TrainerOptions> = {}): TrainerOptions => ({
  modelDir: MODEL, outDir: path.join(tmp, out), dataFile, method: 'rl', batchSize: 2, lr: 2e-3, seed: 3, loraR: 4, loraAlpha: 8,
  advantage: 'gae', ppoEpochs: 2, minibatch: 1, gamma: 0.99, lambda: 0.9, ...extra,
});
const bytes = (file: string) => fs.readFileSync(file);
const withoutTiming = (l: StepLog) => ({ ...l, tokens_per_s: 0, elapsed_s: 0, eta_s: 0 });

describe('trainer with PPO epochs and the gae estimator', () => {
  it('cancel after 2 steps, then resume to 4, is bit-for-bit the same as 4 steps in one go, the value head included', async () => {
    const straight = await train(gaeRun('straight', { steps: 4, saveEvery: 2 }));
    expect(straight).toMatchObject({ status: 'finished', steps: 4, rows: 4 });
    let seen = 0;
    const cancelled = await train(gaeRun('split', { steps: 4 }), { onEvent: (e) => e.type === 'step' && seen++, shouldStop: () => seen >= 2 });
    expect(cancelled).toMatchObject({ status: 'cancelled', steps: 2 });
    const split = path.join(tmp, 'split');
    expect(fs.existsSync(path.join(findCheckpoint(split), VALUE_HEAD_FILE))).toBe(true);
    const resumed = await train({ resume: split });
    expect(resumed).toMatchObject({ status: 'finished', steps: 4 });

    for (const f of ['adapter_model.safetensors', VALUE_HEAD_FILE]) {
      expect(bytes(path.join(split, f)).equals(bytes(path.join(tmp, 'straight', f))), f).toBe(true);
    }
    const config = Checkpoint.open(MODEL).config;
    const a = loadCheckpoint(path.join(tmp, 'straight'), config), b = loadCheckpoint(split, config);
    // Two epochs of two one-row minibatches per step.
    expect(a.optimizer.step).toBe(16);
    expect(b.optimizer.step).toBe(16);
    expect(a.valueHead!.get(VALUE_HEAD_WEIGHT)!.some((x) => x !== 0)).toBe(true);
    for (const [k, v] of a.valueHead!) expect(Buffer.from(b.valueHead!.get(k)!.buffer).equals(Buffer.from(v.buffer))).toBe(true);
    for (const key of a.optimizer.m.keys()) {
      expect(Buffer.from(b.optimizer.m.get(key)!.buffer).equals(Buffer.from(a.optimizer.m.get(key)!.buffer)), key).toBe(true);
    }
    expect(a.optimizer.m.has(VALUE_HEAD_WEIGHT)).toBe(true);

    const log = readLog(path.join(split, 'trainer_log.jsonl'));
    expect(log.map(withoutTiming)).toEqual(readLog(path.join(tmp, 'straight', 'trainer_log.jsonl')).map(withoutTiming));
    for (const l of log) {
      expect(l.value_loss).toBeGreaterThan(0);
      expect(Number.isFinite(l.explained_variance)).toBe(true);
    }
    // Only the row with old_logprobs gives a drift.
    expect(log.some((l) => l.drift !== undefined && l.drift > 0)).toBe(true);
    expect(log.some((l) => l.drift === undefined)).toBe(true);
    // dataset.jsonl holds the estimator fields as the file gave them.
    const dataset = fs.readFileSync(path.join(split, 'dataset.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(dataset.map((l) => [l.group, l.rewards, l.response_mask])).toEqual(lines.map((l) => [l.group, l.rewards, l.response_mask]));
  });

  it('a resume keeps its estimator; the run settings keep the PPO options', async () => {
    const out = path.join(tmp, 'keep');
    await train(gaeRun('keep', { steps: 1 }));
    await expect(train({ resume: out, advantage: 'grpo', steps: 2 })).rejects.toThrow('a resumed run keeps its advantage estimator ("gae"), so "grpo" cannot be asked for; drop the option, or start a new run');
    const state = JSON.parse(fs.readFileSync(path.join(findCheckpoint(out), 'trainer_state.json'), 'utf8'));
    expect(state.settings.ppo).toEqual({ advantage: 'gae', grpoStd: false, normalizeAdvantages: false, ppoEpochs: 2, minibatch: 1, gamma: 0.99, lambda: 0.9, valueClip: 0.2, valueCoef: 0.5 });
    const more = await train({ resume: out, steps: 2, ppoEpochs: 1 });
    expect(more).toMatchObject({ status: 'finished', steps: 2 });
    expect(loadCheckpoint(out, Checkpoint.open(MODEL).config).optimizer.step).toBe(4 + 2); // 2 epochs × 2, then 1 × 2
  });

  it('grpo refuses rows without a group, in one line that names the file; opd refuses grpo and gae', async () => {
    const noGroups = path.join(tmp, 'nogroups.jsonl');
    fs.writeFileSync(noGroups, lines.map((l) => JSON.stringify({ ...l, group: undefined })).join('\n') + '\n');
    const run = { ...gaeRun('grpo'), dataFile: noGroups, advantage: 'grpo' as const };
    await expect(train(run)).rejects.toThrow(new RegExp(`^${noGroups}: --advantage grpo needs a "group" on every row \\(the rows of one context\\): 4 of 4 have none, the first ${noGroups}:1$`));
    expect(fs.existsSync(path.join(tmp, 'grpo'))).toBe(false);
    await expect(train({ ...gaeRun('opd'), method: 'opd' })).rejects.toThrow('--advantage gae replaces the reward, which opd does not use; use --method rl or combine');
  });

  it('the CLI takes the PPO flags, and refuses an unknown estimator as bad usage', async () => {
    const out = path.join(tmp, 'cli');
    const r = await cli('train', '--model', MODEL, '--out', out, '--data', dataFile, '--method', 'rl', '--lora-r', '2', '--targets', 'q,v',
      '--batch-size', '4', '--advantage', 'grpo', '--grpo-std', '--normalize-advantages', '--ppo-epochs', '2', '--minibatch', '2', '--json');
    expect(r.stderr).toMatch(/step 1\/1 loss \S+ .*clip \S+ drift \S+ \|g\|/);
    expect(r.code).toBe(0);
    expect(r.json().last).toMatchObject({ step: 1 });
    expect(fs.existsSync(path.join(out, VALUE_HEAD_FILE))).toBe(false);
    const state = JSON.parse(fs.readFileSync(path.join(findCheckpoint(out), 'trainer_state.json'), 'utf8'));
    expect(state.settings.ppo).toMatchObject({ advantage: 'grpo', grpoStd: true, normalizeAdvantages: true, ppoEpochs: 2, minibatch: 2 });
    const bad = await cli('train', '--model', MODEL, '--out', path.join(tmp, 'bad'), '--data', dataFile, '--advantage', 'ppo');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--advantage must be reward, grpo, gae, got 'ppo'");
  });
});
