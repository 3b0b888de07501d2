// The Export page's "For a GPU cluster" calls over the HTTP API (docs/design.md §Hand-off):
// handoffTrl writes the folder; handoffReplayStart/Status/Stop run a replay in the background.
// The server replays its own imported sessions into its own capture endpoint, standing in
// for an OpenClaw-RL server.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplayProgress } from '../../src-shared/handoff.js';
import { api, startCapture, waitFor } from '../capture/helpers.js';

const FIXTURES = ['test/fixtures/chatgpt-branches.json', 'test/fixtures/openai-chat.jsonl'].map((f) => path.resolve(f));
let server: Awaited<ReturnType<typeof startCapture>>;

beforeAll(async () => {
  server = await startCapture();
  await api(server, 'importFiles', { paths: FIXTURES }); // sessions with samples enough for one to be held out
}, 60_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(server.dir, { recursive: true, force: true });
});

describe('hand-off calls', () => {
  it('handoffTrl writes the folder; a bad method is a validation error naming the field', async () => {
    const outDir = path.join(server.dir, 'trl');
    const result = await api(server, 'handoffTrl', { baseModel: 'meta-llama/Llama-3.1-8B-Instruct', outDir, method: 'dpo', gpus: 2 });
    expect(result.outDir).toBe(outDir);
    expect(result.files).toContain('train.py');
    expect(fs.readFileSync(path.join(outDir, 'accelerate/zero3.yaml'), 'utf8')).toMatch(/^num_processes: 2$/m);
    await expect(api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'ppo', gpus: 1 })).rejects.toThrow(/method/);
  });

  it("handoffTrl and handoffReplayStart take the Training page's loss aggregation and top-K, checked like its other inputs", async () => {
    const outDir = path.join(server.dir, 'trl-loss');
    await api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'sdft', gpus: 1, lossAgg: 'token-mean', opdTopK: 50 });
    const script = fs.readFileSync(path.join(outDir, 'train.py'), 'utf8');
    expect(script).toMatch(/^LOSS_AGG = "token-mean"$/m);
    expect(script).toMatch(/^OPD_TOPK = 50$/m);
    await expect(api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'grpo', gpus: 1, lossAgg: 'token-sum' })).rejects.toThrow(/lossAgg/);
    await expect(api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'sdft', gpus: 1, opdTopK: 5000 })).rejects.toThrow(/opdTopK/);
    await expect(api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'sdft', gpus: 1, opdTopK: '' })).rejects.toThrow(/opdTopK/);
    const replay = { endpoint: `${server.url}v1`, outDir: path.join(server.dir, 'replay-loss'), method: 'opd', concurrency: 1, paceMs: 0 };
    await expect(api(server, 'handoffReplayStart', { ...replay, lossAgg: 'mean' })).rejects.toThrow(/lossAgg/);
    await expect(api(server, 'handoffReplayStart', { ...replay, opdTopK: -1 })).rejects.toThrow(/opdTopK/);
    expect((await api<ReplayProgress>(server, 'handoffReplayStatus')).state).toBe('idle'); // refused: nothing started
  });

  it('handoffTrl leaves the held-out sessions out of data/ and says how many; includeHeldOut puts them back', async () => {
    const split = await api<{ heldOut: { sessions: number; samples: number } }>(server, 'split');
    expect(split.heldOut.sessions).toBeGreaterThan(0);
    const outDir = path.join(server.dir, 'trl-split');
    const left = await api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'kto', gpus: 1 });
    expect(left.heldOut).toMatchObject({ ...split.heldOut, included: false });
    expect(left.heldOut.datasets.map((d: { file: string }) => d.file)).toContain('heldout/kto.jsonl');
    expect(fs.existsSync(path.join(outDir, 'heldout/kto.jsonl'))).toBe(true);
    const all = await api(server, 'handoffTrl', { baseModel: 'x', outDir, method: 'kto', gpus: 1, includeHeldOut: true });
    expect(all.heldOut).toEqual({ ...split.heldOut, included: true, datasets: [] });
    const lines = (r: { datasets: { lines: number }[] }) => r.datasets.reduce((n, d) => n + d.lines, 0);
    expect(lines(all)).toBe(lines(left) + lines(left.heldOut));
  });

  it('handoffReplayStart replays in the background; status shows the progress until it finishes', async () => {
    const outDir = path.join(server.dir, 'replay');
    const started = await api<ReplayProgress>(server, 'handoffReplayStart', {
      endpoint: `${server.url}v1`, apiKey: server.token, outDir, method: 'rl', concurrency: 1, paceMs: 0, maxTokens: 4,
    });
    expect(started.state).toBe('running');
    await expect(api(server, 'handoffReplayStart', { endpoint: `${server.url}v1`, outDir, method: 'rl', concurrency: 1, paceMs: 0 })).rejects.toThrow(/already running/);
    const done = await waitFor('the replay to finish', async () => {
      const s = await api<ReplayProgress>(server, 'handoffReplayStatus');
      return s.state === 'finished' ? s : null;
    });
    expect(done.total).toBeGreaterThan(0);
    expect(done).toMatchObject({ sent: done.total, sessionsDone: done.sessions, abandoned: 0, error: null });
    expect(done.heldOut).toMatchObject({ included: false });
    expect(done.heldOut!.sessions).toBeGreaterThan(0); // skipped: the server would train on them
    expect(fs.existsSync(path.join(outDir, 'openclaw.env'))).toBe(true);
    expect((await api<ReplayProgress>(server, 'handoffReplayStop')).state).toBe('finished'); // nothing to stop
  });
});
