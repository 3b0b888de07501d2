// Every file a training run writes is readable by its owner only (0600), as the database and
// the capture log are: the rows, contexts and episodes are chat text, and the weights, value
// head, optimizer moments and settings come from it (README "Privacy").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { trainOnPolicy } from '../../src-main/onpolicy/onpolicy-trainer.js';
import { train } from '../../src-main/train/trainer.js';
import { MODEL, writeTasks } from '../onpolicy/helpers.js';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-private-files-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Every file under `dir` with its permission bits, as 'path: 0oNNN'. */
function modes(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()
    .filter((f) => fs.statSync(path.join(dir, f)).isFile())
    .map((f) => `${f}: 0o${(fs.statSync(path.join(dir, f)).mode & 0o777).toString(8)}`);
}

const privately = (files: string[]) => files.map((f) => f.replace(/0o\d+$/, '0o600'));

describe('the files of a run', () => {
  it('an offline run with a value head: dataset, log, adapter, checkpoints', async () => {
    const data = path.join(tmp, 'data.jsonl');
    fs.writeFileSync(data, JSON.stringify({ input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 90], response_start: 9, reward: 1 }) + '\n');
    const out = path.join(tmp, 'offline');
    await train({ modelDir: MODEL, outDir: out, dataFile: data, method: 'rl', advantage: 'gae', steps: 1, batchSize: 1, loraR: 2, loraAlpha: 4, targets: ['q'] });
    const files = modes(out);
    expect(files.some((f) => f.startsWith('dataset.jsonl'))).toBe(true);
    expect(files.some((f) => f.includes('value_head.safetensors'))).toBe(true);
    expect(files).toEqual(privately(files));
  });

  it('an on-policy run: contexts, episodes, log, adapter, checkpoints', async () => {
    const tasks = writeTasks(path.join(tmp, 'tasks.jsonl'), [{ messages: [{ role: 'user', content: 'Once upon a time' }], answer_regex: 'dog' }]);
    const out = path.join(tmp, 'onpolicy');
    await trainOnPolicy({ modelDir: MODEL, outDir: out, method: 'rl', advantage: 'gae', steps: 1, loraR: 2, loraAlpha: 4, onPolicy: { taskFile: tasks, rollouts: 2, maxTokens: 8 } });
    const files = modes(out);
    expect(files.some((f) => f.startsWith('contexts.jsonl'))).toBe(true);
    expect(files.some((f) => f.startsWith('episodes.jsonl'))).toBe(true);
    expect(files).toEqual(privately(files));
  });
});
