// Evaluation on the demo model (docs/design.md §Evaluation). A planted preference: sessions
// whose replies are about cats are labelled +1, sessions of gibberish −1; the trainer learns
// from the training sessions while it evaluates the held-out ones, which it must never train
// on. Then `evaluate` (and `hindsight eval`) on the held-out sessions shows the margin up with
// an interval above 0, and an untrained (zero-B) adapter shows a difference of exactly zero.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overLengthReason } from '../../src-shared/training.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { evaluate, type EvalOptions } from '../../src-main/eval/evaluate.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { train, type TrainResult } from '../../src-main/train/trainer.js';
import { evalRowsFromSamples } from '../../src-main/train/eval-rows.js';
import { readEvalLog, readLogLines } from '../../src-main/train/trainer-log.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { conv, fakeExport, tempDir, tempWorkspace } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const ANIMALS = ['cat', 'kitten', 'little cat', 'old cat'];
const DEEDS = ['sat on the mat and purred', 'played with a red ball', 'slept in the warm sun', 'drank some milk', 'ran after a mouse', 'jumped on the bed'];

const NAMES = ['Tom', 'Lily', 'Max', 'Sue', 'Ben', 'Mia', 'Sam', 'Zoe', 'Tim', 'Ann', 'Bob', 'Kim', 'Dan', 'Eve', 'Joe', 'Amy'];
/** A short story about a cat, different for every k. */
const catReply = (k: number) => `${NAMES[k]} had a ${ANIMALS[k % 4]}. The cat ${DEEDS[k % 6]} and was happy.`;
/** Letters that make no words, seeded by k. */
function gibberish(k: number): string {
  let x = 1234567 + k * 7919;
  const letter = () => ((x = (x * 1103515245 + 12345) % 2147483648), 'qxzvkwjbfp'[x % 10]);
  return Array.from({ length: 6 }, () => Array.from({ length: 4 }, letter).join('')).join(' ') + '.';
}

const N = 16; // cat and gibberish sessions each; the first 4 of each are held out
const ids = (kind: 'cat' | 'gib', from: number, to: number) => Array.from({ length: to - from }, (_, i) => `openai:${kind}${from + i}`);
const HELD_OUT = [...ids('cat', 0, 4), ...ids('gib', 0, 4)];

let dir: string;
let dbPath: string;
let trainSamples: TrainingSample[];
let heldOutSamples: TrainingSample[];
let run: TrainResult;
const out = () => path.join(dir, 'run');

beforeAll(async () => {
  dir = tempDir('hindsight-eval-');
  const opened = await tempWorkspace();
  const ws = opened.ws;
  dbPath = opened.dbPath;
  const conversations = Array.from({ length: N }, (_, k) => [
    conv(`cat${k}`, [['user', 'Tell me a story.'], ['assistant', catReply(k)], ['user', 'Lovely, thank you!']]),
    conv(`gib${k}`, [['user', 'Tell me a story.'], ['assistant', gibberish(k)], ['user', 'That makes no sense.']]),
  ]).flat();
  await ws.importExport(fakeExport('planted.jsonl', conversations));
  for (let k = 0; k < N; k++) {
    ws.setLabel(`openai:cat${k}`, 1, { reward: 1 });
    ws.setLabel(`openai:gib${k}`, 1, { reward: -1 });
  }
  ws.setLabel('openai:cat1', 1, { hint: 'Write about a cat.' });
  ws.setLabel('openai:gib2', 1, { repair: 'The cat slept in the warm sun.' });
  ws.setHeldOut(HELD_OUT, true);
  ws.setHeldOut([...ids('cat', 4, N), ...ids('gib', 4, N)], false);
  trainSamples = ws.trainingSamples({ method: 'rl' });
  heldOutSamples = ws.evaluationSamples('heldout');
  ws.close();
  run = await train({
    modelDir: MODEL, outDir: out(), samples: trainSamples, heldOut: { sessionIds: HELD_OUT, samples: heldOutSamples },
    method: 'rl', steps: 12, batchSize: 8, lr: 5e-3, seed: 1, evalEvery: 6,
  });
}, 120_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const options = (adapters: string[], extra: Partial<EvalOptions> = {}): EvalOptions => ({
  modelDir: MODEL, adapters, samples: heldOutSamples, split: { name: 'heldout', sessions: 8, samples: 8 },
  metrics: ['likelihood', 'hints'], seed: 0, device: 'cpu', ...extra,
});

describe('held-out samples during training', () => {
  it('never reach a training batch: dataset.jsonl holds none of them', () => {
    expect(run).toMatchObject({ status: 'finished', steps: 12, rows: 24, heldOut: { sessions: 8, samples: 8 } });
    const lines = fs.readFileSync(path.join(out(), 'dataset.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(24);
    expect(lines.every((l) => typeof l.session_id === 'string' && !HELD_OUT.includes(l.session_id))).toBe(true);
    // And by their tokens: no row is a held-out reply in its context.
    const tokenizer = ChatTokenizer.load(MODEL);
    const heldOutIds = new Set(heldOutSamples.map((s) => tokenizer.encodeResponse(s.messages.map((m) => ({ ...m })), s.response.content).inputIds.join()));
    expect(lines.filter((l) => heldOutIds.has(l.input_ids.join()))).toEqual([]);
  });

  it('are windowed as training windows its rows: a reply that does not fit is left out and counted', () => {
    const tokenizer = ChatTokenizer.load(MODEL);
    const sample = heldOutSamples.find((s) => s.sessionId === 'openai:cat1')!; // +1, with a hint
    const whole = evalRowsFromSamples([sample], tokenizer, 512).rows[0]!;
    const reply = whole.student.inputIds.length - whole.student.responseStart;
    // The hint makes the teacher's context longer: at the student's length, the teacher's
    // context is cut (its oldest tokens first), both replies stay whole.
    const studentLength = whole.student.inputIds.length;
    expect(whole.teacher!.inputIds.length).toBeGreaterThan(studentLength);
    const tight = evalRowsFromSamples([sample], tokenizer, studentLength);
    expect(tight.rows).toHaveLength(1);
    expect(tight.rows[0]!.student).toEqual(whole.student);
    const teacher = tight.rows[0]!.teacher!;
    expect(teacher.inputIds.length).toBeLessThanOrEqual(studentLength);
    expect(teacher.inputIds.slice(teacher.responseStart)).toEqual(whole.student.inputIds.slice(whole.student.responseStart));
    // No room for the reply: the sample is not measured, and the reason says why.
    expect(evalRowsFromSamples([sample], tokenizer, reply)).toEqual({ rows: [], skipped: { [overLengthReason(reply)]: 1 } });
  });

  it('are refused when a caller hands one to the trainer', async () => {
    const leaked = heldOutSamples.find((s) => s.sessionId === 'openai:cat0')!;
    await expect(train({
      modelDir: MODEL, outDir: path.join(dir, 'leak'), samples: [...trainSamples, leaked], heldOut: { sessionIds: HELD_OUT, samples: heldOutSamples }, method: 'rl', steps: 1,
    })).rejects.toThrow(/refusing to train on openai:cat0\/1: session openai:cat0 is held out/);
    expect(fs.existsSync(path.join(dir, 'leak'))).toBe(false);
  });

  it('are counted and evaluated in the log at the start, every N steps and at the end, and in eval.json', () => {
    const lines = readLogLines(run.logFile);
    expect(lines[0]).toEqual({ type: 'held_out', sessions: 8, samples: 8 });
    const evals = readEvalLog(run.logFile);
    expect(evals.map((e) => e.step)).toEqual([0, 6, 12]);
    expect(evals[0]!.margin_delta).toEqual({ n: 8, mean: 0, ci: [0, 0] }); // B = 0 at the start
    expect(evals[0]!.likelihood.pos.n).toBe(4);
    expect(evals[0]!.hints.n).toBe(1);
    expect(evals[2]!.margin_delta.mean!).toBeGreaterThan(evals[1]!.margin_delta.mean!);
    const report = JSON.parse(fs.readFileSync(path.join(out(), 'eval.json'), 'utf8'));
    expect(report).toMatchObject({ split: { name: 'heldout', sessions: 8, samples: 8 }, step: 12, models: [{ name: 'base' }, { name: 'run', adapter: out() }] });
    expect(report.comparisons[0].margin_delta).toEqual(evals[2]!.margin_delta);
  });
});

describe('evaluate', () => {
  it('shows the planted preference: the margin is up, with an interval above 0', async () => {
    const report = await evaluate(options([out()]));
    const [base, adapter] = report.models;
    expect(adapter!.likelihood!.margin.mean!).toBeGreaterThan(base!.likelihood!.margin.mean!);
    const delta = report.comparisons[0]!.margin_delta!;
    expect(delta.n).toBe(8);
    expect(delta.ci![0]).toBeGreaterThan(0);
    expect(adapter!.likelihood!.repair).toMatchObject({ n: 1 });
    expect(report.cancelled).toBe(false);
    // The trainer's own last evaluation measured the same thing with the same forward pass.
    const last = readEvalLog(run.logFile).at(-1)!;
    expect(delta.mean!).toBeCloseTo(last.margin_delta.mean!, 3);
  }, 60_000);

  it('shows a difference of exactly zero for an untrained (zero-B) adapter', async () => {
    const ckpt = Checkpoint.open(MODEL);
    const lora = { r: 4, alpha: 8, targets: ['q' as const, 'v' as const, 'down' as const] };
    const specs = loraSpecs(ckpt.config, lora.targets);
    const zero = path.join(dir, 'zero-b');
    writeAdapter(zero, { lora, specs, weights: initLora(specs, lora.r, 3), baseModel: MODEL });
    const report = await evaluate(options([zero]));
    expect(report.comparisons[0]).toMatchObject({ margin_delta: { n: 8, mean: 0, ci: [0, 0] }, gap_delta: { n: 1, mean: 0, ci: [0, 0] } });
    expect(report.models[1]!.likelihood).toEqual(report.models[0]!.likelihood);
  }, 60_000);

  it('measures every model in int8 where fp32 does not fit, says so, and still sees the planted preference', async () => {
    // What evaluate prices: a batch (8, the default) of its longest row.
    const { rows } = evalRowsFromSamples(heldOutSamples, ChatTokenizer.load(MODEL), 512);
    const longest = Math.max(...rows.flatMap((r) => [r.student, r.teacher, r.repair].map((span) => span?.inputIds.length ?? 0)));
    const need = (quantize: 'none' | 'int8') => estimateInferenceMemory(modelShape(MODEL), { quantize, rows: 8, contextTokens: longest }).total;
    const report = await withEnv('HINDSIGHT_MEMORY_BUDGET', String(Math.floor((need('none') + need('int8')) / 2)), () => evaluate(options([out()])));
    expect(report.notes.find((n) => n.startsWith('likelihood and hints measured with'))).toMatch(/^likelihood and hints measured with int8 weights: fp32 would need about /);
    const fp32 = await evaluate(options([out()]));
    expect(fp32.notes.some((n) => n.startsWith('likelihood and hints measured with'))).toBe(false);
    const delta = report.comparisons[0]!.margin_delta!;
    expect(delta.ci![0]).toBeGreaterThan(0);
    // int8 moves the log-probs a little, not the comparison.
    expect(delta.mean!).toBeCloseTo(fp32.comparisons[0]!.margin_delta!.mean!, 1);
    expect(report.models[0]!.likelihood!.margin.mean).not.toBe(fp32.models[0]!.likelihood!.margin.mean);
  }, 60_000);

  it('keeps what was measured when stopped', async () => {
    let batches = 0;
    const report = await evaluate(options([out()], { batchSize: 2 }), { onProgress: () => batches++, shouldStop: () => batches >= 2 });
    expect(report.cancelled).toBe(true);
    expect(report.models[0]!.likelihood!.pos.n + report.models[0]!.likelihood!.neg.n).toBe(4);
    expect(report.models[1]!.likelihood!.pos.n).toBe(0);
    expect(report.notes.at(-1)).toMatch(/stopped before the end/);
  });
});

describe('hindsight eval and generate --adapter', () => {
  it('prints the report as one JSON object in the shape of the evaluation issue', async () => {
    const r = await runCli('eval', '--model', MODEL, '--db', dbPath, '--adapter', out(), '--metrics', 'likelihood,hints,replay', '--json', '--out', path.join(dir, 'report.json'));
    expect(r.code).toBe(0);
    const report = r.json();
    expect(report.split).toEqual({ name: 'heldout', sessions: 8, samples: 8 });
    expect(report.models.map((m: { name: string }) => m.name)).toEqual(['base', out()]);
    expect(report.models[1]).toMatchObject({ adapter: out(), likelihood: { pos: { n: 4, ci: [expect.any(Number), expect.any(Number)] }, margin: { ci: expect.any(Array) } }, hints: { n: 1 } });
    expect(report.models[0].replay.skipped).toMatch(/replay judge/);
    expect(report.comparisons[0]).toMatchObject({ a: out(), b: 'base', margin_delta: { mean: expect.any(Number), ci: expect.any(Array) }, replay: { skipped: expect.any(String) } });
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'report.json'), 'utf8'))).toEqual(report);
    expect(r.stderr).toMatch(/base: 8\/8 samples/);
    const text = await runCli('eval', '--model', MODEL, '--db', dbPath, '--adapter', out());
    // 8 held-out samples: under the minimum, the comparison says so instead of a verdict.
    expect(text.stdout).toMatch(/vs base: too few held-out samples to tell \(n = 8\)/);
  }, 60_000);

  it('generates with an adapter applied', async () => {
    const r = await runCli('generate', '--model', MODEL, '--adapter', out(), '--prompt', 'Tell me a story.', '--max-new-tokens', '8', '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ adapter: out(), execution_provider: 'cpu' });
    expect(r.json().tokens.length).toBeGreaterThan(0);
  }, 60_000);
});
