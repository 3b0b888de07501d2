// The Export page's "For a GPU cluster" calls over the HTTP API (docs/design.md §Hand-off):
// handoffTrl writes the folder; handoffReplayStart/Status/Stop run a replay in the background.
// The server replays its own imported sessions into its own capture endpoint, standing in
// for an OpenClaw-RL server.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplayProgress } from '../../src-shared/handoff.js';
import { api, startCapture, waitFor } from '../capture/helpers.js';

const FIXTURE = path.resolve('test/fixtures/chatgpt-branches.json');
let server: Awaited<ReturnType<typeof startCapture>>;

beforeAll(async () => {
  server = await startCapture();
  await api(server, 'importFiles', { paths: [FIXTURE] });
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
    expect(fs.existsSync(path.join(outDir, 'openclaw.env'))).toBe(true);
    expect((await api<ReplayProgress>(server, 'handoffReplayStop')).state).toBe('finished'); // nothing to stop
  });
});
