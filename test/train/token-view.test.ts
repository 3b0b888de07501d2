// The token view (docs/design.md §Token view) shows what training will do, so its numbers must
// be the trainer's: the hint gap per token equals the advantages the trainer's own step gives
// for the same samples (teacher − old, old the policy's log-probs at step 1), and their mean is
// the teacher–student gap trainer_log.jsonl records; the adapter change equals the training
// step's policy minus base log-probs. Also: the cache, cancel, and the one-line refusals.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TokenView, TokenViewResult } from '../../src-shared/token-view.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { TokenViewService } from '../../src-main/api/token-view-service.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { SettingsStore } from '../../src-main/store/settings-file.js';
import { fillAdvantages, fillInStepAdvantages } from '../../src-main/train/advantages.js';
import { padBatch, responseValues, rowsFromSamples } from '../../src-main/train/batches.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { train } from '../../src-main/train/trainer.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const HINTS: Record<string, string> = {
  'openai:a': 'Write about a cat named Tom who likes to play in the garden.',
  'openai:b': 'The story should be about a big red ball and a happy dog.',
};
const LORA = { r: 4, alpha: 8, targets: ['q', 'v'] as ('q' | 'v')[] };

let ws: Workspace;
let dir: string;
let service: TokenViewService;
let events: { name: string; payload: unknown }[];
let hinted: TrainingSample[];

function view(result: TokenViewResult): TokenView {
  expect(result.cancelled).toBe(false);
  return result.view!;
}

beforeAll(async () => {
  ({ ws, dir } = await tempWorkspace());
  const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
  await ws.importExport(fakeExport('s.jsonl', [
    story('a', 'Once upon a time, there was a little girl named Lily. She liked to play.', 'No, a story about a cat.'),
    story('b', 'The dog ran to the park and played with a ball.', 'Make it about a red ball.'),
    story('c', 'Lily went to the park with her mom.', 'Perfect, thanks!'),
  ]));
  for (const [sessionId, hint] of Object.entries(HINTS)) ws.setLabel(sessionId, 1, { hint, reward: -1 });
  ws.setLabel('openai:c', 1, { reward: 1 });
  hinted = ws.trainingSamples({ method: 'opd' }).filter((s) => s.hint);
  expect(hinted.map((s) => s.sessionId).sort()).toEqual(Object.keys(HINTS));
  const hub = new EventHub();
  events = [];
  hub.subscribe((name, payload) => events.push({ name, payload }));
  service = new TokenViewService(hub, () => new SettingsStore(path.join(dir, 'settings.json'), MODEL));
}, 60_000);

afterAll(async () => {
  await service?.close();
  ws?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('the token view', () => {
  it("gives the trainer's own OPD advantages per token, and trainer_log's teacher–student gap as their mean", async () => {
    const views: TokenView[] = [];
    for (const s of hinted) views.push(view(await service.compute(ws, { sessionId: s.sessionId, responseTurn: s.responseTurn, mode: 'hint' })));

    // The trainer's step 1 on the same samples: rows, teacher = base log-probs on the teacher
    // spans, old = the policy's log-probs inside the step (a fresh adapter), advantages.
    const checkpoint = Checkpoint.open(MODEL);
    const rows = rowsFromSamples(hinted, ChatTokenizer.load(MODEL), 'opd', Math.min(512, checkpoint.config.maxPositionEmbeddings)).rows;
    const step = await createTrainStep(checkpoint, {
      lora: LORA, device: 'cpu', loss: { method: 'opd', epsLow: 0.2, epsHigh: 0.2, klBeta: 0 },
      optimizer: { kind: 'sgd', lr: 1e-3, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
    });
    try {
      const batch = padBatch(rows);
      const tb = padBatch(rows.map((r) => r.teacher!));
      const base = await step.baseLogprobs(tb);
      const teacher = rows.map((r, j) => responseValues(base, tb.seqLen, j, r.teacher!).slice());
      const inputs = { method: 'opd' as const, weights: { wOpd: 1, wRl: 1 }, rows, batch, teacher };
      fillInStepAdvantages(inputs);
      const weights = initLora(loraSpecs(checkpoint.config, LORA.targets), LORA.r, 0);
      const result = await step.step(batch, weights, { step: 0, m: new Map(), v: new Map() });
      const n = batch.batch * batch.seqLen;
      const grids = { ...batch, oldLogprobs: new Float32Array(n), advantages: new Float32Array(n) };
      fillAdvantages({ ...inputs, batch: grids, policyOld: result.logprobs });
      let maxDiff = 0;
      rows.forEach((row, b) => {
        const advantages = responseValues(grids.advantages, batch.seqLen, b, row);
        const shown = views[b]!.tokens;
        expect(shown.map((t) => t.id)).toEqual(row.inputIds.slice(row.responseStart));
        expect(shown).toHaveLength(advantages.length);
        shown.forEach((t, i) => (maxDiff = Math.max(maxDiff, Math.abs(t.value - advantages[i]!), Math.abs(t.to - t.from - advantages[i]!))));
      });
      process.stderr.write(`[token view] ${rows.length} rows, ${views.reduce((a, v) => a + v.tokens.length, 0)} tokens: max |view − trainer advantage| = ${maxDiff.toExponential(2)}\n`);
      expect(maxDiff).toBeLessThan(1e-5);
      expect(views.every((v) => v.tokens.some((t) => Math.abs(t.value) > 1e-3))).toBe(true);
    } finally {
      await step.close();
    }

    // The trainer itself, one step over both rows: its logged gap is the token mean.
    const outDir = path.join(dir, 'opd-run');
    await train({ modelDir: MODEL, outDir, samples: hinted, method: 'opd', steps: 1, batchSize: hinted.length, loraR: LORA.r, loraAlpha: LORA.alpha, targets: LORA.targets });
    const [logged] = readLog(path.join(outDir, 'trainer_log.jsonl'));
    const tokens = views.flatMap((v) => v.tokens);
    const mean = tokens.reduce((a, t) => a + t.value, 0) / tokens.length;
    expect(Math.abs(logged!.teacher_student_gap! - mean)).toBeLessThan(1e-5);
    expect(views.map((v) => v.hint)).toEqual(hinted.map((s) => s.hint));
    expect(views[0]!.tokens.map((t) => t.text).join('')).toContain('little girl named Lily');
  }, 120_000);

  it('serves a repeated request from the cache, and a changed hint is computed anew', async () => {
    const request = { sessionId: 'openai:a', responseTurn: 1, mode: 'hint' as const };
    const first = view(await service.compute(ws, request));
    events.length = 0;
    const again = view(await service.compute(ws, request));
    expect(again.cached).toBe(true);
    expect(again.tokens).toEqual(first.tokens);
    expect(events.filter((e) => e.name === 'tokenview.progress').map((e) => (e.payload as { message: string }).message)).toContain('Done (cached)');

    ws.setLabel('openai:a', 1, { hint: 'Write about a happy fish in the sea.' });
    const changed = view(await service.compute(ws, request));
    expect(changed.cached).toBe(false);
    expect(changed.hint).toBe('Write about a happy fish in the sea.');
    expect(changed.tokens.map((t) => t.value)).not.toEqual(first.tokens.map((t) => t.value));
    ws.setLabel('openai:a', 1, { hint: HINTS['openai:a']! });
  }, 60_000);

  it("is cancelled by cancel({ job: 'tokenView' }) and by a newer request", async () => {
    const a = { sessionId: 'openai:a', responseTurn: 1, mode: 'hint' as const };
    const b = { sessionId: 'openai:b', responseTurn: 1, mode: 'hint' as const };
    const pending = service.compute(ws, a);
    expect(service.cancel()).toEqual({ cancelled: true });
    expect(await pending).toEqual({ cancelled: true, view: null });
    expect(service.cancel()).toEqual({ cancelled: false });

    const older = service.compute(ws, a);
    const newer = service.compute(ws, b);
    expect(await older).toEqual({ cancelled: true, view: null });
    expect(view(await newer).sessionId).toBe('openai:b');
  }, 60_000);

  it('refuses a reply without a hint, a missing model and a missing adapter in one line', async () => {
    await expect(service.compute(ws, { sessionId: 'openai:c', responseTurn: 1, mode: 'hint' })).rejects.toThrow(/This reply has no hint: write one/);
    await expect(service.compute(ws, { sessionId: 'openai:c', responseTurn: 9, mode: 'hint' })).rejects.toThrow(/no sample at reply #9/);
    await expect(service.compute(ws, { sessionId: 'openai:a', responseTurn: 1, mode: 'hint', modelDir: path.join(dir, 'none') })).rejects.toThrow(/There is no model at/);
    await expect(service.compute(ws, { sessionId: 'openai:a', responseTurn: 1, mode: 'adapter' })).rejects.toThrow(/Choose a trained adapter/);
  });

  it("shows an adapter's change per token: the training step's policy minus base log-probs", async () => {
    const outDir = path.join(dir, 'rl-run');
    const samples = ws.trainingSamples({ method: 'rl' });
    await train({ modelDir: MODEL, outDir, samples, method: 'rl', steps: 3, batchSize: samples.length, lr: 5e-3, loraR: LORA.r, loraAlpha: LORA.alpha, targets: LORA.targets });
    const shown = view(await service.compute(ws, { sessionId: 'openai:c', responseTurn: 1, mode: 'adapter', adapterDir: outDir }));
    expect(shown.adapterDir).toBe(outDir);

    const sample = ws.trainingSampleAt('openai:c', 1)!;
    const row = ChatTokenizer.load(MODEL).encodeResponse(sample.messages.map((m) => ({ ...m })), sample.response.content);
    const adapter = readAdapter(outDir, Checkpoint.open(MODEL).config);
    const step = await createTrainStep(MODEL, {
      lora: adapter.lora, device: 'cpu', loss: { method: 'rl', epsLow: 0.2, epsHigh: 0.28, klBeta: 0 },
      optimizer: { kind: 'sgd', lr: 1, betas: [0.9, 0.98], eps: 1e-8, weightDecay: 0, maxGradNorm: 1 },
    });
    try {
      const batch = padBatch([row]);
      const policy = responseValues(await step.policyLogprobs(batch, adapter.weights), batch.seqLen, 0, row);
      const base = responseValues(await step.baseLogprobs(batch), batch.seqLen, 0, row);
      expect(shown.tokens).toHaveLength(policy.length);
      const maxDiff = Math.max(...shown.tokens.map((t, i) => Math.abs(t.value - (policy[i]! - base[i]!))));
      expect(maxDiff).toBeLessThan(1e-5);
      expect(Math.max(...shown.tokens.map((t) => Math.abs(t.value)))).toBeGreaterThan(1e-3);
    } finally {
      await step.close();
    }
  }, 120_000);
});
