// trainStart's optional `onPolicy` settings over the HTTP API (docs/design.md §On-policy
// settings): every field validated and named when wrong, a task file that must exist, and the
// settings reaching the trainer, which in this build refuses them in one line (the run is
// listed as failed with that reason, as the Training page shows it).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { defaultOnPolicySettings } from '../../src-shared/on-policy-api.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { waitUntil } from '../helpers/deadlines.js';
import { DEMO_MODEL, runInfo } from '../helpers/episodes.js';

let server: ServeHandle;
let dir: string;

async function call<T = any>(name: string, input: unknown = {}): Promise<T> {
  const res = await fetch(`${server.url}api/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
    body: JSON.stringify(input),
  });
  const body = await res.json();
  if (!body.ok) throw new Error(`${name}: ${body.error.message}`);
  return body.value as T;
}

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
      [{ ...d, rollouts: 0 }, /onPolicy\.rollouts must be ≥ 1/],
      [{ ...d, ppoEpochs: 1.5 }, /onPolicy\.ppoEpochs must be an integer/],
      [{ ...d, advantage: 'ppo' }, /onPolicy\.advantage must be one of "reward", "grpo", "gae"/],
      [{ ...d, grpoStd: 'yes' }, /onPolicy\.grpoStd must be true or false/],
      [{ ...d, normalizeAdvantages: 1 }, /onPolicy\.normalizeAdvantages must be true or false/],
      [{ ...d, contextsPerStep: 5000 }, /onPolicy\.contextsPerStep must be ≤ 4096/],
      [{ ...d, maxTurns: -1 }, /onPolicy\.maxTurns must be ≥ 1/],
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

  it('hands the settings to the trainer, which says in one line that this build has no on-policy training', async () => {
    // An empty database: a task file brings its own contexts, so nothing-to-train does not apply.
    const taskFile = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(taskFile, JSON.stringify({ messages: [{ role: 'user', content: 'What is 2+2?' }], answer: '4' }) + '\n');
    const onPolicy = { ...defaultOnPolicySettings(), advantage: 'grpo', grpoStd: true, rollouts: 3, taskFile };
    const { runId } = await call<{ runId: string }>('trainStart', config(onPolicy, 'onpolicy-run'));
    const run = await waitUntil('the on-policy run to fail', async () => {
      const { runs } = await call<{ runs: TrainRunInfo[] }>('trainStatus');
      return runs.find((r) => r.runId === runId && r.status === 'failed');
    });
    expect(run.error).toBe('on-policy training is not available in this build');
    expect(run.config.onPolicy).toEqual(onPolicy);
  });

  it('without a task file, trains on the database, so an empty one is refused as before', async () => {
    await expect(call('trainStart', config(defaultOnPolicySettings(), 'no-data'))).rejects.toThrow(/nothing to train on: the database has no samples yet/);
  });
});
