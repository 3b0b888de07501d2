// The background loop on the real judge and trainer: captured chats are judged (heuristic),
// a run starts once N = 2 samples are labelled, its adapter is hot-swapped in while clients
// keep talking — every answer is a 200 from ONE whole model (its log-probs equal that model's
// scorer) or a 503 with Retry-After — the swap survives a restart, and rollback serves the
// base model again.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { scoreWithAdapter } from '../../src-main/train/merge.js';
import { readCheckpointState } from '../../src-main/train/run-checkpoint.js';
import type { RunSettings } from '../../src-main/train/run-settings.js';
import { api, chat, DEMO_MODEL, startCapture, TEST_TIMEOUT_MS, waitFor, type Message } from './helpers.js';

const SETTINGS = {
  captureAutoJudge: true,
  captureAutoTrain: true,
  captureTrainEvery: 2,
  captureTrainSteps: 1,
  captureTrainMethod: 'rl',
  // The background run keeps the base as int4 blocks (QLoRA); the adapter it serves is fp32 and applies to the fp32 base.
  captureTrainQuantize: 'int4',
  judgeBackend: 'heuristic',
  judgeHints: false,
};

let server: Awaited<ReturnType<typeof startCapture>> | undefined;
afterAll(async () => {
  await server?.close();
});

interface Answer {
  status: number;
  retryAfter: string | null;
  model?: string;
  messages: Message[];
  logprobs?: number[];
  tokens?: string[];
}

describe('auto-judge → auto-train after N samples → hot swap under load → rollback', () => {
  it('runs the whole loop', async () => {
    server = await startCapture({}, SETTINGS);
    const dir = server.dir;
    let base = `${server.url}v1`;
    const talk = async (id: string, opener: string, reaction: string) => {
      const first = [{ role: 'user', content: opener }];
      const r1 = await chat(base, server!.token, first, { headers: { 'X-Session-Id': id } });
      await chat(base, server!.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: reaction }], { headers: { 'X-Session-Id': id } });
    };

    // Clients that keep talking through the judge, the training run and the swap.
    const answers: Answer[] = [];
    let stop = false;
    const client = async (n: number) => {
      for (let i = 0; !stop; i++) {
        const messages = [{ role: 'user', content: `Client ${n}, story ${i}.` }];
        const r = await chat(base, server!.token, messages, { headers: { 'X-Turn-Type': 'side' }, body: { logprobs: true, max_tokens: 6 } });
        answers.push({
          status: r.status,
          retryAfter: r.headers.get('retry-after'),
          model: r.body.model,
          messages,
          logprobs: r.body.choices?.[0]?.logprobs?.content.map((c: { logprob: number }) => c.logprob),
        });
      }
    };
    const clients = [0, 1, 2].map(client);

    // Held out of training by the split rule (sha256 gives it the value 8, below 10): judged,
    // never trained on, so the run below trains on exactly the other two (docs/design.md §Evaluation).
    await talk('heldout', 'Tell me a story about a bird.', 'Perfect, thanks!');
    await talk('happy', 'Tell me a story about a dog.', 'Perfect, thanks! That was great.');
    expect((await api(server, 'captureStatus')).loop.state).not.toBe('off');
    await talk('unhappy', 'Tell me a story about a cat.', 'No, that is wrong. I asked for a short one.');

    const swapped = await waitFor('the adapter swap', async () => (await api(server!, 'captureStatus')).adapter.active as string | null);
    // A few more answers from the new adapter, then stop the clients.
    const seen = answers.length;
    await waitFor('answers after the swap', () => answers.length >= seen + 6);
    stop = true;
    await Promise.all(clients);

    // The judge labelled both captured samples; the run trained on exactly them.
    const ws = server.service.currentWorkspace as Workspace;
    const labels = ws.listSamples().filter((s) => s.sessionId.startsWith('capture:')).map((s) => [s.sessionId, s.label.reward, s.label.source]);
    expect(labels).toEqual(expect.arrayContaining([['capture:happy', 1, 'heuristic'], ['capture:unhappy', -1, 'heuristic']]));
    const status = await api(server, 'captureStatus');
    expect(status.loop.lastRun).toMatchObject({ samples: 2, adapterDir: swapped });
    expect(path.dirname(swapped)).toBe(`${server.dbPath}.capture-adapters`); // the database's own folder, not the folder's
    expect(status.pendingTrain).toBe(0);
    expect(fs.existsSync(`${swapped}/adapter_model.safetensors`)).toBe(true);
    // No Precision chosen: the run records the device's default as null, as a Training-page run does (precision.test.ts chooses fp16).
    expect(readCheckpointState<RunSettings>(swapped).state.settings).toMatchObject({ quantize: 'int4', precision: null });
    const log = fs.readFileSync(status.logPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(log.filter((r) => r.t === 'trained')).toEqual([expect.objectContaining({ samples: ['capture:happy/1', 'capture:unhappy/1'], adapterDir: swapped })]);
    const adapterId = `stories260K+${swapped.split('/').at(-1)}`;
    const models = await (await fetch(`${base}/models`, { headers: { Authorization: `Bearer ${server.token}` } })).json();
    expect(models.data[0].id).toBe(adapterId);

    // No request failed except with a 503 + Retry-After; every 200 came whole from one model.
    const failed = answers.filter((a) => a.status !== 200);
    for (const a of failed) {
      expect(a.status).toBe(503);
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
    }
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.some((a) => a.model === 'stories260K')).toBe(true);
    expect(ok.some((a) => a.model === adapterId)).toBe(true);
    expect(ok.every((a) => a.model === 'stories260K' || a.model === adapterId)).toBe(true);
    const model = await LocalModel.load(DEMO_MODEL);
    try {
      // Check a sample of answers from each side of the swap against that model's own scorer.
      for (const id of ['stories260K', adapterId]) {
        for (const a of ok.filter((x) => x.model === id).slice(0, 3)) {
          const detail = ws.captureExchanges().find((x) => x.kind === 'side' && JSON.stringify(x.messages) === JSON.stringify(a.messages))!;
          const r = detail.rollout!;
          const row = { inputIds: [...r.promptIds, ...r.tokens], responseStart: r.promptIds.length };
          const [expected] = id === 'stories260K' ? await model.score([row]) : await scoreWithAdapter(DEMO_MODEL, swapped, [row]);
          expect(a.logprobs!.length).toBeGreaterThan(0);
          a.logprobs!.forEach((lp, i) => expect(lp).toBeCloseTo(expected![i]!, 3));
        }
      }
    } finally {
      await model.close();
    }

    // A restart replays the log: the same adapter is served, nothing is trained twice.
    await server.close();
    server = await startCapture({}, {}, dir);
    base = `${server.url}v1`;
    const again = await api(server, 'captureStatus');
    expect(again.adapter.active).toBe(swapped);
    expect(again.pendingTrain).toBe(0);
    expect((await chat(base, server.token, [{ role: 'user', content: 'Hello.' }], { headers: { 'X-Turn-Type': 'side' } })).body.model).toBe(adapterId);

    // Rollback: the base model is served again, and that too is in the log.
    const rolled = await api(server, 'captureRollback');
    expect(rolled.adapter).toEqual({ active: null, previous: null, history: [] });
    expect((await chat(base, server.token, [{ role: 'user', content: 'Hello.' }], { headers: { 'X-Turn-Type': 'side' } })).body.model).toBe('stories260K');
    await expect(api(server, 'captureRollback')).rejects.toThrow(/no earlier adapter/);
  }, TEST_TIMEOUT_MS);
});
