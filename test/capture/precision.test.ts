// Live capture's background runs take the Training page's Precision (docs/design.md §Precision):
// the capture setting is checked by trainStart's rule (a value that is no precision is refused in
// one line naming the field; a hand-edited one in the settings file falls back to the device's
// default, null), and a run the loop starts carries the chosen precision into its checkpointed
// settings, as a Training-page run does.
import { afterAll, describe, expect, it } from 'vitest';
import type { Settings } from '../../src-shared/contract.js';
import { readCheckpointState } from '../../src-main/train/run-checkpoint.js';
import type { RunSettings } from '../../src-main/train/run-settings.js';
import { api, startCapture, talkThreeChats, TEST_TIMEOUT_MS, waitFor } from './helpers.js';

let server: Awaited<ReturnType<typeof startCapture>> | undefined;
afterAll(async () => {
  await server?.close();
});

describe("a background run's precision", () => {
  it('is refused in one line when it is no precision, and reaches the run when it is fp16', async () => {
    server = await startCapture({}, {
      captureAutoJudge: true, captureAutoTrain: true, captureTrainEvery: 2, captureTrainSteps: 1, captureTrainMethod: 'rl', judgeBackend: 'heuristic', judgeHints: false,
      captureTrainPrecision: 'fp8',
    });
    expect((await api<Settings>(server, 'getSettings')).capture.trainPrecision).toBeNull();
    await expect(api(server, 'updateSettings', { captureTrainPrecision: 'bf16' })).rejects.toThrow(
      /^updateSettings: invalid input: captureTrainPrecision must be one of "fp32", "fp16", got "bf16"$/,
    );
    expect((await api<Settings>(server, 'updateSettings', { captureTrainPrecision: 'fp16' })).capture.trainPrecision).toBe('fp16');

    await talkThreeChats(server);

    const swapped = await waitFor('the adapter swap', async () => (await api(server!, 'captureStatus')).adapter.active as string | null);
    expect(readCheckpointState<RunSettings>(swapped).state.settings).toMatchObject({ precision: 'fp16', quantize: 'none', device: 'cpu' });
    // Back to the device's default: null, as a Training-page run without a Precision records it.
    expect((await api<Settings>(server, 'updateSettings', { captureTrainPrecision: null })).capture.trainPrecision).toBeNull();
  }, TEST_TIMEOUT_MS);
});
