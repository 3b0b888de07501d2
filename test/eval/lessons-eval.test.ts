// Lessons evaluated exactly as an adapter is (docs/design.md §Lessons): on the held-out sessions,
// the base model with the lessons as its system prompt, scored by likelihood and by replay, beside
// the base and the adapters. A lesson changes the system prompt, so the log-probs change; and they
// are the log-probs `hindsight score` gives the same contexts with that system prompt.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvalReport } from '../../src-shared/eval-report.js';
import type { ReplayMetrics } from '../../src-shared/eval-replay.js';
import { LESSONS_HEADER, withLessons } from '../../src-shared/lessons.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { evaluate, type EvalOptions } from '../../src-main/eval/evaluate.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { withWorkspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { scriptedServer, type ScriptedServer } from '../judge/helpers.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const N = 12;
const HELD_OUT = Array.from({ length: 4 }, (_, k) => `openai:story${k}`);

let dir: string;
let dbPath: string;
let samples: TrainingSample[];
let lessons: string;
let adapter: string;
let server: ScriptedServer;

beforeAll(async () => {
  const opened = await tempWorkspace();
  ({ dir, dbPath } = opened);
  const ws = opened.ws;
  const conversations = Array.from({ length: N }, (_, k) =>
    conv(`story${k}`, [['user', `Tell me a story about ${['a cat', 'a dog', 'the sun'][k % 3]}.`], ['assistant', k % 2 ? 'Once upon a time there was a cat. It was happy.' : 'The end.'], ['user', k % 2 ? 'Lovely, thanks!' : 'No, make it longer.']]),
  );
  await ws.importExport(fakeExport('stories.jsonl', conversations));
  for (let k = 0; k < N; k++) ws.setLabel(`openai:story${k}`, 1, { reward: k % 2 ? 1 : -1, ...(k % 2 ? {} : { hint: 'Tell a longer story, with a beginning and an end.' }) });
  ws.setHeldOut(HELD_OUT, true);
  ws.setHeldOut(Array.from({ length: N - 4 }, (_, k) => `openai:story${k + 4}`), false);
  ws.close();
  // The lessons from the hints of the sessions trained on, by rules.
  expect((await runCli('lessons', '--regenerate', '--db', dbPath)).code).toBe(0);
  const r = await runCli('lessons', '--db', dbPath, '--json');
  lessons = r.json().lessons.text;
  expect(lessons).toBe(`${LESSONS_HEADER}\n- Tell a longer story, with a beginning and an end.`);
  expect(r.json()).toMatchObject({ hints: 4, heldOutHints: 2 });
  samples = await withWorkspace(dbPath, (w) => w.evaluationSamples('heldout'), { access: 'read' });
  // An adapter with B ≠ 0, so that it differs from the base.
  const ckpt = Checkpoint.open(MODEL);
  const lora = { r: 4, alpha: 32, targets: ['q' as const, 'v' as const] };
  const specs = loraSpecs(ckpt.config, lora.targets);
  const weights = initLora(specs, lora.r, 5);
  for (const spec of specs) weights.set(loraBKey(spec), Float32Array.from({ length: spec.outFeatures * lora.r }, (_, i) => ((i % 7) - 3) * 0.05));
  adapter = path.join(dir, 'noisy');
  writeAdapter(adapter, { lora, specs, weights, baseModel: MODEL });
  server = await scriptedServer((body) => {
    const text: string = body.messages.at(-1).content;
    const reply = text.slice(text.indexOf('## New reply\n') + 13, text.lastIndexOf('\n\nWould the new reply'));
    return { content: `\\boxed{${reply.length % 2 === 0 ? 1 : -1}}` };
  });
}, 120_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const options = (extra: Partial<EvalOptions> = {}): EvalOptions => ({
  modelDir: MODEL, adapters: [], samples, split: { name: 'heldout', sessions: 4, samples: samples.length }, metrics: ['likelihood', 'hints'], seed: 0, device: 'cpu', ...extra,
});

const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;

describe('the lessons, measured as an adapter is', () => {
  it('change the log-probs, and are exactly what `score` gives the contexts with the lessons as system prompt', async () => {
    const report = await evaluate(options({ lessons }));
    expect(report.models.map((m) => m.name)).toEqual(['base', 'lessons']);
    const [base, told] = report.models;
    expect(told!.lessons).toBe(lessons);
    expect(told!.likelihood!.pos.n).toBe(2);
    expect(told!.likelihood!.neg.n).toBe(2);
    expect(told!.likelihood!.pos.mean).not.toBe(base!.likelihood!.pos.mean);
    expect(told!.likelihood!.neg.mean).not.toBe(base!.likelihood!.neg.mean);
    expect(told!.hints!.n).toBe(base!.hints!.n);
    expect(report.comparisons.map((c) => `${c.a} vs ${c.b}`)).toEqual(['lessons vs base']);
    expect(report.comparisons[0]!.margin_delta!.n).toBe(4);

    // `hindsight score` on the same contexts with the lessons merged in the way the eval does.
    for (const [reward, estimate] of [[1, told!.likelihood!.pos], [-1, told!.likelihood!.neg]] as const) {
      const rows = samples.filter((s) => s.reward === reward).map((s) => ({ context: withLessons(s.messages, lessons), response: s.response.content }));
      const input = path.join(dir, `score-${reward}.jsonl`);
      const out = path.join(dir, `scored-${reward}.jsonl`);
      fs.writeFileSync(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
      expect((await runCli('score', '--model', MODEL, '--input', input, '--out', out)).code).toBe(0);
      const perRow = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => mean(JSON.parse(l).logprobs as number[]));
      expect(estimate.mean!).toBeCloseTo(mean(perRow), 4);
      // And without the lessons, score gives the base's numbers: the difference is the system prompt.
      fs.writeFileSync(input, samples.filter((s) => s.reward === reward).map((s) => JSON.stringify({ context: s.messages, response: s.response.content })).join('\n') + '\n');
      expect((await runCli('score', '--model', MODEL, '--input', input, '--out', out)).code).toBe(0);
      const plain = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => mean(JSON.parse(l).logprobs as number[]));
      expect((reward === 1 ? base!.likelihood!.pos : base!.likelihood!.neg).mean!).toBeCloseTo(mean(plain), 4);
    }
  }, 120_000);

  it('sit between the base and the adapters, compared with both', async () => {
    const report = await evaluate(options({ lessons, adapters: [adapter] }));
    expect(report.models.map((m) => m.name)).toEqual(['base', 'lessons', adapter]);
    expect(report.comparisons.map((c) => `${c.a} vs ${c.b}`)).toEqual([`${adapter} vs base`, 'lessons vs base', `${adapter} vs lessons`]);
    // Without lessons the report is as before.
    const plain = await evaluate(options({ adapters: [adapter], lessons: '  ' }));
    expect(plain.models.map((m) => m.name)).toEqual(['base', adapter]);
    expect(plain.models[0]!.likelihood).toEqual(report.models[0]!.likelihood);
    expect(plain.comparisons).toEqual(report.comparisons.slice(0, 1));
    await expect(evaluate(options({ lessons, adapters: ['lessons'] }))).rejects.toThrow(/would share its name with the lessons' row/);
  }, 120_000);

  it('are replayed with the same seeds, generating with the lessons while the judge sees the context as it was', async () => {
    const report = await evaluate(options({
      lessons, metrics: ['replay'],
      replay: { rollouts: 2, votes: 1, maxNewTokens: 12, temperature: 0.7, judge: { backend: 'openai', baseUrl: server.baseUrl, model: 'scripted' } },
    }));
    const [base, told] = report.models.map((m) => m.replay as ReplayMetrics);
    expect(Object.keys(told!.replies)).toEqual(Object.keys(base!.replies));
    const key = Object.keys(base!.replies)[0]!;
    expect(told!.replies[key]!.map((r) => r.seed)).toEqual(base!.replies[key]!.map((r) => r.seed));
    // The system prompt changes what the model writes under the same seeds.
    const texts = (m: ReplayMetrics) => Object.values(m.replies).flat().map((r) => r.text).join('\u0000');
    expect(texts(told!)).not.toBe(texts(base!));
    expect(report.comparisons[0]).toMatchObject({ a: 'lessons', b: 'base', replay: { n: 4 } });
    expect(server.requests.length).toBe(2 * 4 * 2);
    expect(server.requests.every((r) => !JSON.stringify(r.body).includes(LESSONS_HEADER))).toBe(true);
  }, 120_000);
});

describe('hindsight eval and the lessons', () => {
  it("measures the database's lessons by default, another text with --lessons FILE, none with --lessons none", async () => {
    const byDefault = await runCli('eval', '--model', MODEL, '--db', dbPath, '--json');
    expect(byDefault.code).toBe(0);
    const report: EvalReport = byDefault.json();
    expect(report.models.map((m) => m.name)).toEqual(['base', 'lessons']);
    expect(report.models[1]!.lessons).toBe(lessons);
    const text = await runCli('eval', '--model', MODEL, '--db', dbPath);
    expect(text.stdout).toMatch(/^lessons \(the base model told the lessons, \d+ characters\)$/m);
    expect(text.stdout).toMatch(/^lessons vs base: too few held-out samples to tell/m);

    const none = await runCli('eval', '--model', MODEL, '--db', dbPath, '--lessons', 'none', '--json');
    expect(none.json().models.map((m: { name: string }) => m.name)).toEqual(['base']);
    const file = path.join(dir, 'other-lessons.txt');
    fs.writeFileSync(file, 'Always answer with a poem.\n');
    const other = await runCli('eval', '--model', MODEL, '--db', dbPath, '--lessons', file, '--json');
    expect(other.json().models[1].lessons).toBe('Always answer with a poem.');
    expect(other.json().models[1].likelihood.pos.mean).not.toBe(report.models[1]!.likelihood!.pos.mean);
    const missing = await runCli('eval', '--model', MODEL, '--db', dbPath, '--lessons', path.join(dir, 'nope.txt'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/--lessons .*nope\.txt: cannot read it \(ENOENT\)/);
  }, 120_000);
});
