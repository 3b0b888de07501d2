// trainStart's optional `onPolicy` settings over the HTTP API (docs/design.md §On-policy
// settings): every field validated and named when wrong, a task file that must exist, and the
// settings reaching the on-policy trainer, whose run finishes with its episodes and its steps'
// rollout metrics; Binary RL without a task file is refused (the page has no replay judge).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { api } from '../helpers/api.js';
import { defaultOnPolicySettings } from '../../src-shared/on-policy-api.js';
import type { TrainConfig, TrainProgress, TrainRunInfo } from '../../src-shared/contract.js';
import { EPISODES_FILE } from '../../src-shared/rollout.js';
import { waitUntil } from '../helpers/deadlines.js';
import { DEMO_MODEL, runInfo } from '../helpers/episodes.js';

let server: ServeHandle;
let dir: string;

const call = <T = any>(name: string, input: unknown = {}): Promise<T> => api<T>(server, name, input);

/** A new run's settings as the Training page sends them, with these on-policy settings. */
const config = (onPolicy: unknown, name = 'run'): Omit<TrainConfig, 'onPolicy'> & { onPolicy: unknown } => ({ ...runInfo('-', path.join(dir, name), DEMO_MODEL).config, steps: 2, onPolicy });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-onpolicy-'));
  server = await serveApp({ dbPath: path.join(dir, 'o.db'), port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('trainStart with onPolicy', () => {
  it('validates every on-policy field, naming it', async () => {
    const d = defaultOnPolicySettings();
    const cases: [unknown, RegExp][] = [
      [{ ...d, rollouts: 0 }, /onPolicy\.rollouts must be an integer ≥ 1 and ≤ 256, got 0/],
      [{ ...d, ppoEpochs: 1.5 }, /onPolicy\.ppoEpochs must be an integer/],
      [{ ...d, advantage: 'ppo' }, /onPolicy\.advantage must be one of "reward", "grpo", "gae"/],
      [{ ...d, grpoStd: 'yes' }, /onPolicy\.grpoStd must be true or false/],
      [{ ...d, normalizeAdvantages: 1 }, /onPolicy\.normalizeAdvantages must be true or false/],
      [{ ...d, contextsPerStep: 5000 }, /onPolicy\.contextsPerStep must be an integer ≥ 1 and ≤ 4096, got 5000/],
      [{ ...d, maxTurns: -1 }, /onPolicy\.maxTurns must be an integer ≥ 1 and ≤ 100, got -1/],
      [{ ...d, maxTokens: 'many' }, /onPolicy\.maxTokens must be a finite number/],
      [{ ...d, taskFile: 7 }, /onPolicy\.taskFile must be a string/],
      [{ ...d, taskFile: '' }, /onPolicy\.taskFile must not be empty/],
      [{ ...d, temperature: 0.7 }, /onPolicy\.temperature is not a known field/],
      [{ rollouts: 4 }, /onPolicy\.ppoEpochs is required/],
      ['on', /onPolicy must be an object/],
    ];
    for (const [onPolicy, error] of cases) await expect(call('trainStart', config(onPolicy)), JSON.stringify(onPolicy)).rejects.toThrow(error);
  });

  it('refuses a task file that does not exist, or is a folder', async () => {
    await expect(call('trainStart', config({ ...defaultOnPolicySettings(), taskFile: path.join(dir, 'none.jsonl') }))).rejects.toThrow(/The task file .*none\.jsonl does not exist/);
    await expect(call('trainStart', config({ ...defaultOnPolicySettings(), taskFile: dir }))).rejects.toThrow(/is not a file/);
  });

  it('runs an on-policy fine-tune from a task file: its episodes in the run folder, its steps with the rollout metrics', async () => {
    // An empty database: a task file brings its own contexts, so nothing-to-train does not apply.
    const taskFile = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(taskFile, JSON.stringify({ messages: [{ role: 'user', content: 'What is 2+2?' }], answer: '4' }) + '\n');
    const onPolicy = { ...defaultOnPolicySettings(), advantage: 'grpo', grpoStd: true, rollouts: 3, maxTokens: 24, taskFile };
    const { runId } = await call<{ runId: string }>('trainStart', config(onPolicy, 'onpolicy-run'));
    const run = await waitUntil('the on-policy run to end', async () => {
      const { runs } = await call<{ runs: TrainRunInfo[] }>('trainStatus');
      return runs.find((r) => r.runId === runId && r.status !== 'running');
    });
    expect(run.error).toBeNull();
    expect(run.status).toBe('finished');
    expect(run.config.onPolicy).toEqual(onPolicy);
    const lines = fs.readFileSync(path.join(dir, 'onpolicy-run', EPISODES_FILE), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((e) => e.id)).toEqual(['tasks.jsonl:1#0@0', 'tasks.jsonl:1#1@0', 'tasks.jsonl:1#2@0', 'tasks.jsonl:1#0@1', 'tasks.jsonl:1#1@1', 'tasks.jsonl:1#2@1']);
    expect(lines.every((e) => e.rewardSource === 'task')).toBe(true);
    const { progress } = await call<{ progress: TrainProgress[] }>('trainMetrics', { runId });
    expect(progress.map((p) => p.step)).toEqual([1, 2]);
    for (const p of progress) {
      expect(p).toMatchObject({ episodes: 3, episode_reward_mean: expect.any(Number) });
      expect(p.drift).toBeLessThan(1e-3);
    }
  });

  it('refuses on-policy Binary RL without a task file: the page has no replay judge', async () => {
    await expect(call('trainStart', { ...config(defaultOnPolicySettings(), 'rl-run'), method: 'rl' })).rejects.toThrow(/On-policy Binary RL needs rewards for the rollouts: give a Task file/);
  });

  it('refuses the combinations the trainer refuses, in the page\'s words, before a run is listed', async () => {
    const taskFile = path.join(dir, 'opd-tasks.jsonl');
    fs.writeFileSync(taskFile, JSON.stringify({ messages: [{ role: 'user', content: 'What is 2+2?' }], answer: '4' }) + '\n');
    const before = (await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs.length;
    const opd = (onPolicy: object, name: string) => call('trainStart', { ...config({ ...defaultOnPolicySettings(), ...onPolicy }, name), method: 'opd' });
    for (const advantage of ['grpo', 'gae'] as const) {
      const refused = opd({ advantage }, `opd-${advantage}`);
      await expect(refused).rejects.toThrow(new RegExp(`^trainStart: The ${advantage.toUpperCase()} advantage estimator replaces the reward, which On-policy distillation does not use: choose Reward as the Advantage estimator, or Binary RL or Combined as the Method\\.$`));
      await expect(refused).rejects.not.toThrow(/--/);
    }
    const withTasks = opd({ taskFile }, 'opd-tasks');
    await expect(withTasks).rejects.toThrow(/^trainStart: On-policy distillation learns from hints, and a task file has none: clear the Task file field .* or choose Binary RL or Combined as the Method/);
    await expect(withTasks).rejects.not.toThrow(/--/);
    expect((await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs).toHaveLength(before);
    expect(fs.existsSync(path.join(dir, 'opd-tasks'))).toBe(false);
  });

  it('without a task file, trains on the database, so an empty one is refused as before', async () => {
    await expect(call('trainStart', config(defaultOnPolicySettings(), 'no-data'))).rejects.toThrow(/nothing to train on: the database has no samples yet/);
  });

  it('without a task file, an OPD run generates from the hinted samples (none held out) and scores each rollout by the teacher', async () => {
    await call('loadSampleData');
    await call('judgeRun', { backend: 'heuristic', hints: true });
    const onPolicy = { ...defaultOnPolicySettings(), rollouts: 2, contextsPerStep: 3, maxTokens: 16 };
    const { runId } = await call<{ runId: string }>('trainStart', { ...config(onPolicy, 'opd-run'), method: 'opd', steps: 2 });
    const run = await waitUntil('the OPD run to end', async () => {
      const { runs } = await call<{ runs: TrainRunInfo[] }>('trainStatus');
      return runs.find((r) => r.runId === runId && r.status !== 'running');
    });
    expect(run.error).toBeNull();
    const episodes = fs.readFileSync(path.join(dir, 'opd-run', EPISODES_FILE), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(episodes).toHaveLength(2 * 3 * 2);
    const heldOut = new Set((await call<{ listed: { id: string; heldOut: boolean }[] }>('split')).listed.filter((s) => s.heldOut).map((s) => s.id));
    expect(heldOut.size).toBeGreaterThan(0);
    for (const e of episodes) {
      expect(heldOut.has(e.contextId.split('/')[0])).toBe(false);
      if (e.tokens.logprobs.length) expect(e).toMatchObject({ rewardSource: 'opd', teacherGap: expect.any(Array) });
    }
  });
});
