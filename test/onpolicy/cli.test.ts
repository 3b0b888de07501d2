// `hindsight train --on-policy` (docs/design.md §On-policy training): the refusals, each one
// line (rl with neither tasks nor a judge, opd on a task file, flags that need --on-policy or
// exclude each other), the help's on-policy section, and a run with its resume, which the CLI
// recognises as on-policy from the checkpoint and which keeps the run's rollout settings.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { runCli as cli } from '../helpers/cli.js';
import { MODEL, writeTasks } from './helpers.js';

let tmp: string;
let db: string;
let tasks: string;
beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-onpolicy-cli-'));
  db = path.join(tmp, 'h.db');
  expect((await cli('import', path.resolve('test/fixtures/openai-chat.jsonl'), '--db', db)).code).toBe(0);
  tasks = writeTasks(path.join(tmp, 'tasks.jsonl'), [
    { messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: 'Lily' },
    { messages: [{ role: 'user', content: 'Once upon a time' }], answer_regex: 'dog' },
  ]);
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const base = (out: string) => ['train', '--on-policy', '--model', MODEL, '--out', path.join(tmp, out), '--db', db];
const oneLine = (stderr: string) => stderr.trim().split('\n');

describe('train --on-policy refuses in one line', () => {
  it('rl with neither a task file nor a replay judge', async () => {
    const r = await cli(...base('rl'));
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/^hindsight train: on-policy rl needs a reward for each rollout: give --tasks FILE .* or a replay judge \(--judge-backend local\|openai\)/)]);
    expect(fs.existsSync(path.join(tmp, 'rl'))).toBe(false);
  });

  it('opd on a task file, which has no hints', async () => {
    const r = await cli(...base('opd'), '--method', 'opd', '--tasks', tasks);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toEqual([expect.stringMatching(/on-policy opd learns from hints, and a task file has none/)]);
  });

  it('bad usage: an on-policy flag without --on-policy, a task file beside a judge, --data', async () => {
    const stray = await cli('train', '--model', MODEL, '--out', path.join(tmp, 'x'), '--rollouts', '3', '--db', db);
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/--rollouts goes with --on-policy/);
    const both = await cli(...base('both'), '--tasks', tasks, '--judge-backend', 'openai', '--judge-model', 'm');
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give --tasks or --judge-backend, not both/);
    const data = await cli(...base('data'), '--data', tasks);
    expect(data.code).toBe(2);
    expect(data.stderr).toMatch(/--on-policy generates its own rollouts/);
  });
});

describe('train --help', () => {
  it('lists the on-policy flags with their defaults, and says where offline and on-policy defaults differ', async () => {
    const { stdout } = await cli('train', '--help');
    expect(stdout).toContain('on-policy training (docs/design.md §On-policy training):');
    for (const flag of ['--on-policy', '--rollouts K', '--contexts-per-step N', '--max-turns N', '--max-tokens N', '--tasks FILE', '--tools FILE', '--tool-url URL', '--temperature T', '--judge-backend local|openai', '--votes N']) {
      expect(stdout).toContain(flag);
    }
    expect(stdout).toMatch(/--ppo-epochs E[\s\S]*?\(default: 1; 2 with --on-policy\)/);
    expect(stdout).toMatch(/--steps N[\s\S]*?10 with\s+--on-policy/); // the help wraps at 100 columns
  });
});

describe('a run and its resume', () => {
  it('trains on its rollouts, prints them, and resumes as on-policy with its own settings', async () => {
    const out = path.join(tmp, 'run');
    const flags = ['--tasks', tasks, '--steps', '2', '--rollouts', '2', '--max-tokens', '12', '--lr', '1e-3', '--lora-r', '4', '--lora-alpha', '8'];
    const r = await cli(...base('run'), ...flags, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ status: 'finished', steps: 2, episodes: 8, episodes_file: path.join(out, 'episodes.jsonl') });
    expect(r.json().last).toMatchObject({ episodes: 4, step: 2 });
    expect(r.stderr).toMatch(/^step 1\/2 loss .* drift .* episodes 4 reward -?\d\.\d\d/m);
    expect(fs.existsSync(path.join(out, 'contexts.jsonl'))).toBe(true);

    const changed = await cli('train', '--resume', out, '--steps', '3', '--rollouts', '5');
    expect(changed.code).toBe(1);
    expect(oneLine(changed.stderr)).toEqual([expect.stringMatching(/keeps its rollouts per context \(2\), so 5 cannot be asked for/)]);
    const resumed = await cli('train', '--resume', out, '--steps', '3', '--json');
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.json()).toMatchObject({ status: 'finished', steps: 3, episodes: 12 });
    expect(readEpisodes(path.join(out, 'episodes.jsonl')).episodes.map((e) => e.step)).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
  });
});
