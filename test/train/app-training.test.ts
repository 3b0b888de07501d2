// The app's Fine-tune flow on the real trainer: TrainingService (src-main/api) → the trainer
// in its worker → progress and status events; cancel keeps a checkpoint, resume finishes the
// run without repeating steps, and the adapter folder is reported.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import type { ApiEvents, TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import { TrainingService } from '../../src-main/api/training-service.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
/**
 * Enough steps that the cancel, asked for at the first step's event, lands before the end even
 * on a loaded machine (a step of the demo model takes milliseconds; the cancel crosses a thread).
 */
const STEPS = 60;

describe('the app training service on the real trainer', () => {
  it('start → progress → cancel → resume → finished, with the EP and the adapter folder', async () => {
    const { ws, dir } = await tempWorkspace();
    const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
    await ws.importExport(fakeExport('s.jsonl', [
      story('a', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
      story('b', 'The dog ran to the park.', 'No, write about a cat.'),
    ]));
    ws.setLabel('openai:a', 1, { reward: 1 });
    ws.setLabel('openai:b', 1, { reward: -1 });
    const events = new EventHub();
    const statuses: TrainRunInfo[] = [];
    const progress: ApiEvents['train.progress'][] = [];
    const evals: ApiEvents['train.eval'][] = [];
    let cancelAfterFirst: (() => void) | undefined;
    let settle: ((info: TrainRunInfo) => void) | undefined;
    events.subscribe((name, payload) => {
      if (name === 'train.progress') {
        progress.push(payload as ApiEvents['train.progress']);
        cancelAfterFirst?.();
        cancelAfterFirst = undefined;
      }
      if (name === 'train.eval') evals.push(payload as ApiEvents['train.eval']);
      if (name === 'train.status') {
        const info = payload as TrainRunInfo;
        statuses.push(info);
        if (['finished', 'cancelled', 'failed'].includes(info.status)) settle?.(info);
      }
    });
    const service = new TrainingService(events, () => ws);
    expect((await service.availability()).available).toBe(true);
    const outDir = path.join(dir, 'adapter');
    const config: TrainConfig = {
      modelDir: MODEL, outDir, method: 'rl', steps: STEPS, batchSize: 2, lr: 1e-3, optimizer: 'adamw', loraR: 4, loraAlpha: 8,
      targets: ['q', 'v'], device: 'cpu', seed: 0, checkpointEvery: 0,
    };
    const done = () => new Promise<TrainRunInfo>((resolve) => (settle = resolve));
    let ended = done();
    const { runId } = await service.start(config);
    cancelAfterFirst = () => service.cancel(runId);
    const cancelled = await ended;
    expect(cancelled).toMatchObject({ status: 'cancelled', executionProvider: 'cpu', error: null });
    const stepsBefore = progress.length;
    expect(stepsBefore).toBeGreaterThan(0);
    expect(stepsBefore).toBeLessThan(STEPS);
    expect(statuses.some((s) => s.phase?.startsWith('checkpoint at step'))).toBe(true);

    ended = done();
    await service.resume(runId);
    const finished = await ended;
    expect(finished).toMatchObject({ status: 'finished', adapterDir: outDir, error: null });
    expect(service.metrics(runId).map((p) => p.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    expect(progress.at(-1)).toMatchObject({ runId, step: STEPS, total_steps: STEPS, teacher_student_gap: null });
    expect(fs.existsSync(path.join(outDir, 'adapter_model.safetensors'))).toBe(true);
    // One of the two sessions is held out (docs/design.md §Evaluation): it is evaluated, at the
    // start, as the run goes and at the end, and never trained on.
    expect(evals.length).toBeGreaterThan(2);
    expect(evals[0]).toMatchObject({ runId, step: 0, split: { sessions: 1, samples: 1 }, margin_delta: { mean: null } });
    expect(service.evaluations(runId).map((e) => e.step)).toEqual([...new Set(evals.map((e) => e.step))]);
    expect(fs.existsSync(path.join(outDir, 'eval.json'))).toBe(true);
    // The resumed log states the split once, as it was when the run resumed.
    const logLines = fs.readFileSync(path.join(outDir, 'trainer_log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(logLines.filter((l) => l.type === 'held_out')).toEqual([{ type: 'held_out', sessions: 1, samples: 1 }]);
    ws.close();
  });

  it('refuses to start a run that would learn nothing, or one into a folder that holds a run, with a message for the page', async () => {
    const { ws, dir } = await tempWorkspace();
    const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
    await ws.importExport(fakeExport('s.jsonl', [story('a', 'Tom had a red car.', 'Hmm.'), story('b', 'The dog ran to the park.', 'Ok.')]));
    trainOnEverySession(ws);
    const service = new TrainingService(new EventHub(), () => ws);
    const config: TrainConfig = {
      modelDir: MODEL, outDir: path.join(dir, 'adapter'), method: 'rl', steps: 1, batchSize: 2, lr: 1e-3, optimizer: 'adamw', loraR: 2, loraAlpha: 4,
      targets: ['q'], device: 'cpu', seed: 0, checkpointEvery: 0,
    };
    const refused = (c: TrainConfig) => service.start(c).then(() => null, (err: Error) => [err.name, err.message]);
    expect(await refused(config)).toEqual(['UserError', 'rl needs samples labelled ±1: 0 of 2 are; label some in the annotator or run the judge']);
    expect((await service.state()).runs).toEqual([]);
    expect(fs.existsSync(config.outDir)).toBe(false);

    ws.setLabel('openai:a', 1, { reward: 1 });
    const used = path.join(dir, 'used');
    fs.mkdirSync(used);
    fs.writeFileSync(path.join(used, 'trainer_log.jsonl'), '');
    expect(await refused({ ...config, outDir: used })).toEqual([
      'UserError', `The output folder ${used} already holds a training run; choose another folder (a run listed here continues with its Resume button).`,
    ]);
    expect((await service.state()).runs).toEqual([]);
    ws.close();
  });
});
