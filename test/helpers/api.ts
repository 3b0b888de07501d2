// One way for tests to call the app's API over HTTP, as the browser UI does: POST /api/<name>
// with the launch's token; a refused call throws with the call's name and the app's message.
import type { ServeHandle } from '../../src-main/api/serve-app.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';

/** Calls the app's API (POST /api/<name>) on a `serve` started in this process. */
export async function api<T = any>(server: Pick<ServeHandle, 'url' | 'token'>, name: string, input: unknown = {}): Promise<T> {
  const res = await fetch(`${server.url}api/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
    body: JSON.stringify(input),
  });
  const result = await res.json();
  if (!result.ok) throw new Error(`${name}: ${result.error.message}`);
  return result.value as T;
}

/** A two-step rl run of the demo model into `outDir`, on the CPU unless `changes` say otherwise. */
export function tinyTrainRun(modelDir: string, outDir: string, changes: Partial<TrainConfig> = {}): TrainConfig {
  return {
    modelDir, outDir, method: 'rl', steps: 2, batchSize: 2, lr: 1e-3, optimizer: 'adamw',
    loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cpu', seed: 0, checkpointEvery: 0, ...changes,
  };
}

/** Starts a run through the API and polls its status until it has stopped. */
export async function trainToEnd(server: Pick<ServeHandle, 'url' | 'token'>, config: TrainConfig): Promise<TrainRunInfo> {
  const { runId } = await api<{ runId: string }>(server, 'trainStart', config);
  for (;;) {
    const run = (await api<{ runs: TrainRunInfo[] }>(server, 'trainStatus')).runs.find((r) => r.runId === runId);
    if (run && run.status !== 'running' && run.status !== 'cancelling') return run;
    await new Promise((r) => setTimeout(r, 100));
  }
}
