// On-policy training moves the demo model (stories260K) the way its signal asks, learning from
// its own samples (docs/design.md §On-policy training):
// - OPD with a hint that names a character: the student, asked WITHOUT the hint, gives the
//   name more probability after the steps, and a name the hint did not give less;
// - RL with a task check (the story mentions Lily): the success rate over sampled replies rises;
// and on the way: the rollouts' log-probs are the training engine's own (drift < 1e-3), with
// two PPO epochs and a large learning rate the clip and the KL act, every episode is written
// with its reward source (and its teacher gap for OPD), every step line carries the new fields.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { trainOnPolicy, type OnPolicyResult } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { readLog, type StepLog } from '../../src-main/train/trainer-log.js';
import { MODEL, storySample, successRate, withAdapter, wordLogprob, writeTasks } from './helpers.js';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-learn-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const expectPpoActs = (log: StepLog[]) => {
  // A grpo step whose groups all got equal rewards trains nothing (issue 33 item 5): no tokens, no drift.
  for (const l of log) if (l.tokens > 0) expect(l.drift!, `step ${l.step}`).toBeLessThan(1e-3);
  expect(log.filter((l) => l.tokens > 0).length).toBeGreaterThan(0);
  // Two epochs against a fixed old at lr 1e-2: the second moves away from old.
  expect(log.some((l) => l.approx_kl > 1e-3 && l.clipfrac > 0)).toBe(true);
};

describe('on-policy OPD: a hint that names the dog', () => {
  let out: string;
  let result: OnPolicyResult;
  beforeAll(async () => {
    out = path.join(tmp, 'opd');
    result = await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'opd', steps: 5, lr: 1e-2, loraR: 4, loraAlpha: 8, seed: 1,
      samples: [storySample('s1', 'The story is about a dog named Tim.')],
      onPolicy: { rollouts: 8, contextsPerStep: 1, maxTokens: 32 },
    });
  });

  it('finishes, one log line per step with the PPO metrics and the episodes', () => {
    expect(result).toMatchObject({ status: 'finished', steps: 5, episodes: 40 });
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    expect(log.map((l) => l.step)).toEqual([1, 2, 3, 4, 5]);
    for (const l of log) {
      expect(l).toMatchObject({ episodes: 8, episode_reward_mean: null });
      expect(l.teacher_student_gap).toEqual(expect.any(Number));
    }
    expectPpoActs(log);
  });

  it('writes every episode with its teacher gap, one per generated token', () => {
    const { episodes } = readEpisodes(path.join(out, 'episodes.jsonl'));
    expect(episodes).toHaveLength(40);
    for (const e of episodes) {
      expect(e.rewardSource).toBe('opd');
      expect(e.reward).toBeNull();
      expect(e.teacherGap).toHaveLength(e.tokens.logprobs.length);
      expect(e.messages[0]).toEqual({ role: 'user', content: 'Tell me a story.' }); // the student never sees the hint
    }
    expect(new Set(episodes.map((e) => e.id)).size).toBe(40);
  });

  it('makes the name likelier without the hint, and another name less likely', async () => {
    const measure = async (engine: Parameters<Parameters<typeof withAdapter>[1]>[0]) => ({
      dog: await wordLogprob(engine, ' Once upon a time, there was a dog named', ' Tim'),
      girl: await wordLogprob(engine, ' One day, a girl named', ' Tim'),
      other: await wordLogprob(engine, ' Once upon a time, there was a dog named', ' Lily'),
    });
    const { base, adapted } = await withAdapter(out, measure);
    expect(adapted.dog - base.dog).toBeGreaterThan(0.5);
    expect(adapted.girl - base.girl).toBeGreaterThan(0.5);
    expect(adapted.other).toBeLessThan(base.other);
  });
});

describe('on-policy RL with a task check', () => {
  const mentionsLily = (reply: string) => /Lily/.test(reply);
  let out: string;
  beforeAll(async () => {
    out = path.join(tmp, 'rl');
    const tasks = writeTasks(path.join(tmp, 'lily.jsonl'), [{ messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: 'Lily' }]);
    await trainOnPolicy({
      modelDir: MODEL, outDir: out, method: 'rl', advantage: 'grpo', steps: 6, lr: 1e-2, loraR: 4, loraAlpha: 8, seed: 1,
      onPolicy: { taskFile: tasks, rollouts: 8, contextsPerStep: 1, maxTokens: 24 },
    });
  });

  it('raises the success rate of sampled replies', async () => {
    const { base, adapted } = await withAdapter(out, (engine) => successRate(engine, mentionsLily));
    expect(base).toBeLessThan(0.25);
    expect(adapted - base).toBeGreaterThan(0.3);
  });

  it('scores each episode by the task, and logs the episodes\' mean reward', () => {
    const { episodes } = readEpisodes(path.join(out, 'episodes.jsonl'));
    expect(episodes).toHaveLength(48);
    for (const e of episodes) {
      expect(e.rewardSource).toBe('task');
      expect(e.reward).toBe(mentionsLily(e.messages.at(-1)!.content) ? 1 : -1);
    }
    const log = readLog(path.join(out, 'trainer_log.jsonl'));
    log.forEach((l, i) => {
      const mine = episodes.filter((e) => e.step === i);
      expect(l.episodes).toBe(8);
      expect(l.episode_reward_mean).toBeCloseTo(mine.reduce((s, e) => s + e.reward!, 0) / 8, 12);
    });
    expect(log.at(-1)!.episode_reward_mean!).toBeGreaterThan(log[0]!.episode_reward_mean!);
    expectPpoActs(log);
  });
});
