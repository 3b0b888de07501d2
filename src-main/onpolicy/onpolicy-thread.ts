/**
 * Starting an on-policy run from the app or the CLI: the loop (./onpolicy-trainer.ts) runs in a
 * worker thread (./onpolicy-worker.ts), as the offline trainer does (../train/trainer-thread.ts),
 * with the same events, so the Training page's progress works unchanged.
 *
 *     const result = await startOnPolicyTraining({ modelDir, outDir, method: 'rl', onPolicy: { taskFile } }, {
 *       onEvent: (e) => e.type === 'step' && chart(e.log),
 *       signal: abortController.signal, // Cancel: stops after the current episode, checkpoint kept
 *     });
 *
 * Only data crosses into the worker: a scripted policy (the tests') works in-thread only.
 */
import { runStoppableJob, type StoppableJobMessage } from '../model/worker-host.js';
import type { TrainerEvent } from '../train/trainer.js';
import type { StartOptions } from '../train/trainer-thread.js';
import type { OnPolicyTrainerOptions } from './options.js';
import type { OnPolicyResult } from './onpolicy-trainer.js';

/** Messages from the worker. */
export type OnPolicyWorkerMessage = StoppableJobMessage<TrainerEvent, OnPolicyResult>;

export function startOnPolicyTraining(options: OnPolicyTrainerOptions, start: StartOptions = {}): Promise<OnPolicyResult> {
  const files = { compiled: new URL('./onpolicy-worker.js', import.meta.url), source: new URL('./onpolicy-worker.ts', import.meta.url) };
  return runStoppableJob<TrainerEvent, OnPolicyResult>(files, options, 'on-policy trainer', start);
}
