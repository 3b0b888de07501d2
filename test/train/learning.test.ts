// Learning on the real demo model (stories260K, a pretrained Llama) with the real training
// step: labelled samples in a workspace → trainer → exported PEFT adapter, scored by an
// independent LoRA path (merge.ts scoreWithAdapter) against the base model.
//   rl:  positively rewarded replies gain log-prob, negatively rewarded ones lose it.
//   opd: the teacher–student gap shrinks, and the hinted replies become more likely
//        WITHOUT the hint in the context.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TrainingSample } from '../../src-shared/views.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { enhancedContext } from '../../src-main/pipeline/hint-context.js';
import { scoreWithAdapter } from '../../src-main/train/merge.js';
import { train, type TrainResult } from '../../src-main/train/trainer.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
let tmp: string;
let samples: TrainingSample[];
let tokenizer: ChatTokenizer;
let base: ModelEngine;

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-learn-'));
  tokenizer = ChatTokenizer.load(MODEL);
  base = ModelEngine.open(MODEL);
  const { ws } = await tempWorkspace();
  await ws.importExport(fakeExport('stories.jsonl', [
    story('p1', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
    story('p2', 'Lily went to the park with her mom.', 'Great, I love it.'),
    story('n1', 'The dog ran to the park and played with a ball.', 'No, that is not what I wanted.'),
    story('n2', 'Tom had a big red car in the box.', 'No, try again.'),
    story('h1', 'Ben was a little boy. Ben liked to play.', 'Use the name Ben.'),
    story('h2', 'The frog jumped into the pond.', 'Write about a frog in the pond.'),
    story('h3', 'Sue had a red ball.', 'The girl is called Sue and she has a red ball.'),
  ]));
  trainOnEverySession(ws);
  for (const id of ['p1', 'p2']) ws.setLabel(`openai:${id}`, 1, { reward: 1 });
  for (const id of ['n1', 'n2']) ws.setLabel(`openai:${id}`, 1, { reward: -1 });
  ws.setLabel('openai:h1', 1, { hint: 'Use the name Ben.' });
  ws.setLabel('openai:h2', 1, { hint: 'Write about a frog in the pond.' });
  ws.setLabel('openai:h3', 1, { hint: 'The girl is called Sue and she has a red ball.' });
  samples = ws.trainingSamples();
  ws.close();
});
afterAll(async () => {
  await base?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Student rows (context without hint) and teacher rows (hint appended) of some samples. */
function rowsOf(ids: string[], withHint = false) {
  return ids.map((id) => {
    const s = samples.find((x) => x.sessionId === `openai:${id}`)!;
    const messages = withHint ? enhancedContext(s.messages, s.hint!) : s.messages;
    return tokenizer.encodeResponse(messages.map((m) => ({ ...m })), s.response.content);
  });
}

async function run(method: 'rl' | 'opd', steps: number, lr: number): Promise<{ result: TrainResult; out: string }> {
  const out = path.join(tmp, method);
  const result = await train({ modelDir: MODEL, outDir: out, samples, method, steps, lr, seed: 1 });
  return { result, out };
}

describe('learning on stories260K', () => {
  it('rl: +1 replies gain log-prob, −1 replies lose it', async () => {
    const { result, out } = await run('rl', 4, 5e-4);
    expect(result).toMatchObject({ status: 'finished', steps: 4, rows: 4, executionProvider: 'cpu' });
    const pos = rowsOf(['p1', 'p2']), neg = rowsOf(['n1', 'n2']);
    const [before, after] = [await base.score([...pos, ...neg]), await scoreWithAdapter(MODEL, out, [...pos, ...neg])];
    const delta = before.map((b, i) => sum(after[i]!) - sum(b));
    // Summed over each reply (10–15 tokens): at least one nat each way, in 4 small steps.
    expect(delta[0]).toBeGreaterThan(1);
    expect(delta[1]).toBeGreaterThan(1);
    expect(delta[2]).toBeLessThan(-1);
    expect(delta[3]).toBeLessThan(-1);
    const log = readLog(result.logFile);
    expect(log.map((l) => l.step)).toEqual([1, 2, 3, 4]);
    expect(log[0]).toMatchObject({ total_steps: 4, reward_mean: 0, teacher_student_gap: null, execution_provider: 'cpu', lr: 5e-4 });
    for (const l of log) expect(l.grad_norm).toBeGreaterThan(0);
  });

  it('opd: the teacher–student gap shrinks and the hinted replies become more likely without the hint', async () => {
    const ids = ['h1', 'h2', 'h3'];
    const student = rowsOf(ids), teacher = rowsOf(ids, true);
    const teacherLp = await base.score(teacher);
    const studentBefore = await base.score(student);
    const gapOf = (lp: number[][]) => sum(lp.map((row, i) => sum(teacherLp[i]!) - sum(row))) / sum(lp.map((r) => r.length));
    const gapBefore = gapOf(studentBefore);
    expect(gapBefore).toBeGreaterThan(0.25); // the hint really helps the base model (nats per token)

    const { result, out } = await run('opd', 15, 1e-3);
    expect(result).toMatchObject({ status: 'finished', rows: 3 });
    const studentAfter = await scoreWithAdapter(MODEL, out, student);
    const gapAfter = gapOf(studentAfter);
    expect(gapAfter).toBeLessThan(0.4 * gapBefore);
    studentAfter.forEach((row, i) => expect(sum(row) - sum(studentBefore[i]!)).toBeGreaterThan(2));
    const log = readLog(result.logFile);
    expect(log[0]!.teacher_student_gap!).toBeCloseTo(gapBefore, 3); // the log's first gap is the same measurement
    expect(Math.abs(log.at(-1)!.teacher_student_gap!)).toBeLessThan(0.4 * gapBefore);
  });
});
