// Live capture's background runs take the memory check of `hindsight train` and the Training page
// (src-main/train/memory-check.ts, docs/design.md §Micro-batches): on a machine where not even
// one row of the model's length fits (made small through HINDSIGHT_MEMORY_BUDGET, the real
// setting, read by the server in this process; room left for the model to answer the chats),
// the run is not started, no adapter folder is
// made, and the check's one line is what the capture status shows; the samples still count
// towards the next run.
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { api, startCapture, talkThreeChats, waitFor } from './helpers.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { DEMO_MODEL } from '../judge/helpers.js';

const budgetBefore = process.env.HINDSIGHT_MEMORY_BUDGET;
let server: Awaited<ReturnType<typeof startCapture>> | undefined;
afterAll(async () => {
  await server?.close();
  if (budgetBefore === undefined) delete process.env.HINDSIGHT_MEMORY_BUDGET;
  else process.env.HINDSIGHT_MEMORY_BUDGET = budgetBefore;
});

describe('a background run that cannot fit one row', () => {
  it('is not started; the capture status says why in one line', async () => {
    // Room for the demo model to answer the chats (about 155 MB: src-shared/inference-memory.ts),
    // not for its background run's training step (about 189 MB: src-shared/train-memory.ts).
    process.env.HINDSIGHT_MEMORY_BUDGET = '170M';
    expect(estimateInferenceMemory(modelShape(DEMO_MODEL), { quantize: 'int4' }).total).toBeLessThan(170 * 2 ** 20);
    server = await startCapture({}, {
      captureAutoJudge: true, captureAutoTrain: true, captureTrainEvery: 2, captureTrainSteps: 1, captureTrainMethod: 'rl', judgeBackend: 'heuristic', judgeHints: false,
    });
    await talkThreeChats(server);

    const error = await waitFor('the loop to give up on the run', async () => (await api(server!, 'captureStatus')).loop.lastError as string | null);
    expect(error).toMatch(/^Background training was not started: it needs about \d+ MB even with one row of 512 tokens at a time, but this machine has 170 MB allowed \(HINDSIGHT_MEMORY_BUDGET\) of [\d.]+ GB: free memory or choose a smaller model\.$/);
    const status = await api(server, 'captureStatus');
    expect(status.loop.lastRun).toBeNull();
    expect(status.adapter.active).toBeNull();
    expect(status.pendingTrain).toBe(2);
    expect(fs.existsSync(`${server.dbPath}.capture-adapters`)).toBe(false);
  });
});
