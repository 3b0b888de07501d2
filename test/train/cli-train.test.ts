// `hindsight train` end to end: the trainer in its worker thread, on the database's labelled
// samples and on --data lines, with the EP reported; bad input gets one-line errors.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { conv, fakeExport, tempDir, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = path.join(ROOT, 'resources/models/stories260K');
const run = promisify(execFile);

describe('hindsight train', () => {
  it('trains on the database (combine) in a worker and reports the EP in stderr, the log and --json', async () => {
    const { ws, dbPath, dir } = await tempWorkspace();
    const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
    await ws.importExport(fakeExport('s.jsonl', [
      story('a', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
      story('b', 'The dog ran to the park.', 'No, write about a cat.'),
      story('c', 'Tom had a red car.', 'Hmm.'),
    ]));
    trainOnEverySession(ws);
    ws.setLabel('openai:a', 1, { reward: 1 });
    ws.setLabel('openai:b', 1, { reward: -1, hint: 'Write about a cat, not a dog.' });
    ws.setLabel('openai:c', 1, { reward: 0 }); // all-zero session: kept by the at-least-one rule
    ws.close();
    const out = path.join(dir, 'adapter');
    const r = await cli('train', '--db', dbPath, '--model', MODEL, '--out', out, '--method', 'combine', '--steps', '2', '--lora-r', '4',
      '--targets', 'q,v,down', '--lr', '1e-3', '--recompute', 'on', '--json');
    expect(r.stderr).toMatch(/execution provider: cpu/);
    expect(r.stderr).toMatch(/step 2\/2 loss/);
    expect(r.code).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ status: 'finished', steps: 2, total_steps: 2, execution_provider: 'cpu', rows: 3, adapter_dir: out });
    expect(result.last.teacher_student_gap).toEqual(expect.any(Number));
    const adapter = readAdapter(out, Checkpoint.open(MODEL).config);
    expect(adapter.lora).toEqual({ r: 4, alpha: 32, targets: ['q', 'v', 'down'] });
    expect(readLog(path.join(out, 'trainer_log.jsonl')).map((l) => [l.step, l.execution_provider])).toEqual([[1, 'cpu'], [2, 'cpu']]);
    const dataset = fs.readFileSync(path.join(out, 'dataset.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(dataset.map((d) => [d.reward, 'teacher_input_ids' in d, d.kept ?? false])).toEqual([[1, false, false], [-1, true, false], [0, false, true]]);
  });

  it('bad input: usage errors exit 2, data errors exit 1 naming the file and line', async () => {
    const dir = tempDir();
    const bad = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(bad, '{"input_ids":[1,2,3],"response_start":1,"reward":1}\n{"input_ids":[1,2,3],"response_start":3,"reward":1}\n');
    let r = await cli('train', '--model', MODEL, '--out', path.join(dir, 'o'), '--data', bad);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^hindsight train: .*bad\.jsonl:2: response_start must be an integer in \[1, 2\]/m);
    expect(r.stderr.trim().split('\n')).toHaveLength(4); // the memory estimate, loading, tokenising, then the one-line error
    r = await cli('train', '--model', MODEL, '--out', path.join(dir, 'o'), '--data', bad, '--method', 'ppo');
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/--method must be rl, opd or combine/)]);
    r = await cli('train', '--model', MODEL, '--out', path.join(dir, 'o'), '--data', bad, '--recompute', 'sometimes');
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/--recompute must be auto, on or off/)]);
    r = await cli('train', '--model', MODEL, '--out', path.join(dir, 'o'), '--targets', 'q,lm_head');
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/unknown LoRA target 'lm_head'/)]);
    r = await cli('train', '--model', MODEL);
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/--model and --out are required/)]);
    r = await cli('train', '--model', path.join(dir, 'nomodel'), '--out', path.join(dir, 'o'), '--data', bad);
    expect([r.code, r.stderr]).toEqual([1, expect.stringMatching(/model folder not found: .*nomodel/)]);
  });

  it('refuses to train on nothing: one line naming what the method needs and what the database has; nothing written', async () => {
    const { ws, dbPath, dir } = await tempWorkspace();
    const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
    await ws.importExport(fakeExport('s.jsonl', [
      story('a', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
      story('b', 'The dog ran to the park.', 'No, write about a cat.'),
      story('c', 'Tom had a red car.', 'Hmm.'),
    ]));
    trainOnEverySession(ws);
    ws.setLabel('openai:b', 1, { hint: 'Write about a cat, not a dog.' });
    ws.close();
    const out = path.join(dir, 'adapter');
    let r = await cli('train', '--db', dbPath, '--model', MODEL, '--out', out);
    expect([r.code, r.stderr]).toEqual([1, 'hindsight train: rl needs samples labelled ±1: 0 of 3 are; label some in the annotator, or use opd/combine with the 1 hinted sample\n']);
    expect(fs.existsSync(out)).toBe(false);
    // The hinted sample is signal for opd: that run trains.
    r = await cli('train', '--db', dbPath, '--model', MODEL, '--out', out, '--method', 'opd', '--steps', '1', '--lora-r', '2', '--targets', 'q', '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ status: 'finished', rows: 3 }); // the hinted sample, and one kept sample per other session
  });

  it('a used --out folder needs --resume or --overwrite; every refusal is one line, never a stack trace', async () => {
    const dir = tempDir();
    const data = path.join(dir, 'd.jsonl');
    fs.writeFileSync(data, JSON.stringify({ input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 90, 250, 263, 93], response_start: 11, reward: 1 }) + '\n');
    const out = path.join(dir, 'out');
    const small = ['--model', MODEL, '--data', data, '--lora-r', '2', '--targets', 'q', '--batch-size', '1'];
    expect((await cli('train', ...small, '--out', out, '--steps', '1', '--save-every', '1')).code).toBe(0);
    let r = await cli('train', ...small, '--out', out, '--steps', '1');
    expect([r.code, r.stderr]).toEqual([1, `hindsight train: ${out} already holds a training run: continue it with --resume ${out}, or start over with --overwrite (the old run is removed)\n`]);
    r = await cli('train', ...small, '--out', out, '--steps', '2', '--save-every', '2', '--overwrite', '--json');
    expect([r.code, r.json().steps]).toEqual([0, 2]);
    expect(readLog(path.join(out, 'trainer_log.jsonl')).map((l) => l.step)).toEqual([1, 2]);
    // --resume alone continues in the run's folder, with its model and its options: a
    // checkpoint every 2 steps, as the run was started.
    r = await cli('train', '--resume', out, '--steps', '5', '--json');
    expect([r.code, r.json().steps]).toEqual([0, 5]);
    expect(r.stderr.match(/checkpoint at step \d+/g)).toEqual(['checkpoint at step 4', 'checkpoint at step 5']);
    const file = path.join(dir, 'a-file');
    fs.writeFileSync(file, 'x');
    for (const args of [
      ['--model', MODEL, '--data', data, '--out', file],
      ['--resume', out, '--overwrite'],
      ['--resume', path.join(dir, 'nothing-here')],
      ['--resume', out, '--lora-r', '8'],
    ]) {
      r = await cli('train', ...args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    }
  });

  it('runs as a real process with --data and resumes with --resume', async () => {
    const dir = tempDir();
    const data = path.join(dir, 'd.jsonl');
    fs.writeFileSync(data, [
      { input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 90, 250, 263, 93], response_start: 11, reward: 1 },
      { input_ids: [1, 403, 407, 261, 195, 289, 13, 13, 79, 221, 299, 45, 112, 350], response_start: 11, reward: -1 },
    ].map((l) => JSON.stringify(l)).join('\n'));
    const out = path.join(dir, 'out');
    const env = { ...process.env, npm_config_loglevel: 'error' };
    const first = await run('node', ['bin/hindsight.mjs', 'train', '--model', MODEL, '--out', out, '--data', data, '--steps', '1', '--batch-size', '1', '--json'], { cwd: ROOT, env });
    expect(JSON.parse(first.stdout)).toMatchObject({ status: 'finished', steps: 1, execution_provider: 'cpu' });
    const second = await run('node', ['bin/hindsight.mjs', 'train', '--model', MODEL, '--out', out, '--resume', out, '--steps', '3', '--json'], { cwd: ROOT, env });
    expect(JSON.parse(second.stdout)).toMatchObject({ status: 'finished', steps: 3, total_steps: 3 });
    expect(readLog(path.join(out, 'trainer_log.jsonl')).map((l) => l.step)).toEqual([1, 2, 3]);
  });
});
