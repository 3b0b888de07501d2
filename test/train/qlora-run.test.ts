// QLoRA runs on the real demo model (stories260K, a pretrained Llama), docs/design.md §QLoRA:
//   - an adapter trained on an int4 base, applied to the fp32 base (an independent LoRA path,
//     merge.ts scoreWithAdapter), moves the log-probs the way its labels ask;
//   - a run records --quantize in its checkpoints; cancelled after 2 steps and resumed to 4 it
//     is bit-for-bit the run of 4 steps in one go, as an fp32 run is;
//   - --merge adds the adapter to the model's own fp32 weights, not to the quantised copy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TrainingSample } from '../../src-shared/views.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { scoreWithAdapter } from '../../src-main/train/merge.js';
import { train } from '../../src-main/train/trainer.js';
import { readCheckpointState } from '../../src-main/train/run-checkpoint.js';
import type { RunSettings } from '../../src-main/train/run-settings.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
let tmp: string;
let samples: TrainingSample[];
let tokenizer: ChatTokenizer;
let base: ModelEngine;

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-qlora-'));
  tokenizer = ChatTokenizer.load(MODEL);
  base = ModelEngine.open(MODEL);
  const { ws } = await tempWorkspace();
  await ws.importExport(fakeExport('stories.jsonl', [
    story('p1', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
    story('p2', 'Lily went to the park with her mom.', 'Great, I love it.'),
    story('n1', 'The dog ran to the park and played with a ball.', 'No, that is not what I wanted.'),
    story('n2', 'Tom had a big red car in the box.', 'No, try again.'),
  ]));
  trainOnEverySession(ws);
  for (const id of ['p1', 'p2']) ws.setLabel(`openai:${id}`, 1, { reward: 1 });
  for (const id of ['n1', 'n2']) ws.setLabel(`openai:${id}`, 1, { reward: -1 });
  samples = ws.trainingSamples();
  ws.close();
});
afterAll(async () => {
  await base?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function rowsOf(ids: string[]) {
  return ids.map((id) => {
    const s = samples.find((x) => x.sessionId === `openai:${id}`)!;
    return tokenizer.encodeResponse(s.messages.map((m) => ({ ...m })), s.response.content);
  });
}

describe('QLoRA runs on stories260K', () => {
  it('rl on an int4 base: applied to the fp32 base, +1 replies gain log-prob and −1 replies lose it; --merge uses the fp32 weights', async () => {
    const out = path.join(tmp, 'int4');
    const result = await train({ modelDir: MODEL, outDir: out, samples, method: 'rl', steps: 4, lr: 5e-4, seed: 1, quantize: 'int4', merge: true });
    expect(result).toMatchObject({ status: 'finished', steps: 4, rows: 4 });
    const rows = [...rowsOf(['p1', 'p2']), ...rowsOf(['n1', 'n2'])];
    const [before, after] = [await base.score(rows), await scoreWithAdapter(MODEL, out, rows)];
    const delta = before.map((b, i) => sum(after[i]!) - sum(b));
    console.log(`qlora learning (int4 base, fp32 scoring): summed log-prob change per reply ${delta.map((d) => d.toFixed(2)).join(', ')}`);
    expect(delta[0]).toBeGreaterThan(1);
    expect(delta[1]).toBeGreaterThan(1);
    expect(delta[2]).toBeLessThan(-1);
    expect(delta[3]).toBeLessThan(-1);
    // The merged model is the fp32 base plus the adapter: it scores as the adapter on the fp32 base does.
    const merged = ModelEngine.open(result.mergedDir!);
    try {
      const m = await merged.score(rows);
      m.forEach((row, i) => row.forEach((v, j) => expect(Math.abs(v - after[i]![j]!)).toBeLessThan(1e-4)));
    } finally {
      await merged.close();
    }
  });

  it('records --quantize in its checkpoints, and cancel + resume is bit-for-bit the straight run', async () => {
    const common = { modelDir: MODEL, samples, method: 'rl' as const, steps: 4, lr: 5e-4, seed: 1, quantize: 'int8' as const, saveEvery: 1 };
    const straight = await train({ ...common, outDir: path.join(tmp, 'straight') });
    expect(straight).toMatchObject({ status: 'finished', steps: 4 });
    let seen = 0;
    const split = path.join(tmp, 'split');
    const cancelled = await train({ ...common, outDir: split }, { onEvent: (e) => e.type === 'step' && seen++, shouldStop: () => seen >= 2 });
    expect(cancelled).toMatchObject({ status: 'cancelled', steps: 2 });
    expect(readCheckpointState<RunSettings>(split).state.settings.quantize).toBe('int8');
    // Resumed without the flag: the run's own setting.
    const resumed = await train({ modelDir: MODEL, outDir: split, resume: split });
    expect(resumed).toMatchObject({ status: 'finished', steps: 4 });
    const bytes = (dir: string) => fs.readFileSync(path.join(dir, 'adapter_model.safetensors'));
    expect(bytes(split).equals(bytes(path.join(tmp, 'straight')))).toBe(true);
    expect(readCheckpointState<RunSettings>(split).state.settings.quantize).toBe('int8');
  });
});
