// The Training page's run options. Its Precision (TrainConfig.precision, docs/design.md §Precision) over the
// HTTP API the page calls: a value that is no precision is refused in one line naming the
// field; fp16 reaches the training step (its first gradient is not the fp32 run's), the run's
// record and its checkpointed settings; and `hindsight train --resume` keeps a run's precision.
// The page's Recomputation (TrainConfig.recompute) likewise: refused in one line when it is no
// mode, recorded in the run and its checkpoint when chosen, 'auto' when not.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import type { TrainConfig, TrainProgress, TrainRunInfo } from '../../src-shared/contract.js';
import { api, tinyTrainRun, trainToEnd } from '../helpers/api.js';
import { runCli } from '../helpers/cli.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');

let server: ServeHandle;
let dir: string;
let dbPath: string;

const call = <T = any>(name: string, input: unknown = {}): Promise<T> => api<T>(server, name, input);

/** A two-step rl run of the demo model into `outDir` (under the test's folder). */
const tinyRun = (outDir: string, changes: Partial<TrainConfig> = {}) => tinyTrainRun(MODEL, path.join(dir, outDir), changes);
const runToEnd = (config: TrainConfig) => trainToEnd(server, config);

/** The settings a run's latest checkpoint holds (src-main/train/run-checkpoint.ts trainer_state.json). */
function checkpointedSettings(outDir: string): { precision: string | null; recompute: string; device: string } {
  const latest = JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', 'latest.json'), 'utf8')) as { dir: string };
  return JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', latest.dir, 'trainer_state.json'), 'utf8')).settings;
}

beforeAll(async () => {
  const made = await tempWorkspace();
  ({ dir, dbPath } = made);
  const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
  await made.ws.importExport(fakeExport('s.jsonl', [
    story('a', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
    story('b', 'The dog ran to the park.', 'No, write about a cat.'),
  ]));
  trainOnEverySession(made.ws);
  made.ws.setLabel('openai:a', 1, { reward: 1 });
  made.ws.setLabel('openai:b', 1, { reward: -1 });
  made.ws.close();
  server = await serveApp({ dbPath, port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
});

describe('the Training page\'s Precision', () => {
  it('refuses a value that is no precision in one line naming the field, before any run is listed', async () => {
    const refused = call('trainStart', { ...tinyRun('bf16'), precision: 'bf16' });
    await expect(refused).rejects.toThrow(/^trainStart: invalid input: precision must be one of "fp32", "fp16", got "bf16"$/);
    expect(fs.existsSync(path.join(dir, 'bf16'))).toBe(false);
    expect((await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs).toEqual([]);
  });

  it('fp16 reaches the step, the run\'s record and its checkpoint; absent, the run records the device\'s default (null)', async () => {
    const fp32 = await runToEnd(tinyRun('fp32', { precision: 'fp32' }));
    const fp16 = await runToEnd(tinyRun('fp16', { precision: 'fp16' }));
    const plain = await runToEnd(tinyRun('default'));
    expect([fp32.status, fp16.status, plain.status]).toEqual(['finished', 'finished', 'finished']);
    const listed = (await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs;
    expect(listed.map((r) => r.config.precision)).toEqual(['fp32', 'fp16', undefined]);
    expect(checkpointedSettings(fp32.config.outDir).precision).toBe('fp32');
    expect(checkpointedSettings(fp16.config.outDir).precision).toBe('fp16');
    expect(checkpointedSettings(plain.config.outDir).precision).toBeNull();
    // The same rows and seed: the half-precision projections move the first gradient, a little.
    const firstNorm = async (run: TrainRunInfo) => (await call<{ progress: TrainProgress[] }>('trainMetrics', { runId: run.runId })).progress[0]!.grad_norm;
    const [n32, n16, nDefault] = [await firstNorm(fp32), await firstNorm(fp16), await firstNorm(plain)];
    expect(n16).not.toBe(n32);
    expect(Math.abs(n16 - n32) / n32).toBeLessThan(2e-2);
    expect(nDefault).toBe(n32); // fp32 is the CPU's default
  });

  it('hindsight train --resume keeps the run\'s precision, and a resume may ask for another', async () => {
    const out = path.join(dir, 'cli-fp16');
    const first = await runCli('train', '--model', MODEL, '--db', dbPath, '--out', out, '--method', 'rl', '--steps', '1', '--lora-r', '2', '--precision', 'fp16', '--json');
    expect(first.code, first.stderr).toBe(0);
    expect(checkpointedSettings(out).precision).toBe('fp16');
    const resumed = await runCli('train', '--resume', out, '--steps', '2', '--json');
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(checkpointedSettings(out).precision).toBe('fp16');
    const changed = await runCli('train', '--resume', out, '--steps', '3', '--precision', 'fp32', '--json');
    expect(changed.code, changed.stderr).toBe(0);
    expect(checkpointedSettings(out).precision).toBe('fp32');
  });
});

describe('the Training page\'s Recomputation', () => {
  it('refuses a value that is no mode in one line naming the field, and starts no run', async () => {
    const before = (await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs.length;
    const refused = call('trainStart', { ...tinyRun('sometimes'), recompute: 'sometimes' });
    await expect(refused).rejects.toThrow(/^trainStart: invalid input: recompute must be one of "auto", "on", "off", got "sometimes"$/);
    expect(fs.existsSync(path.join(dir, 'sometimes'))).toBe(false);
    expect((await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs).toHaveLength(before);
  });

  it('off reaches the run\'s record and its checkpoint; absent, the run records none and its checkpoint auto', async () => {
    const off = await runToEnd(tinyRun('recompute-off', { recompute: 'off' }));
    const plain = await runToEnd(tinyRun('recompute-default'));
    expect([off.status, plain.status]).toEqual(['finished', 'finished']);
    expect([off.config.recompute, plain.config.recompute]).toEqual(['off', undefined]);
    expect(checkpointedSettings(off.config.outDir).recompute).toBe('off');
    expect(checkpointedSettings(plain.config.outDir).recompute).toBe('auto');
  });
});
