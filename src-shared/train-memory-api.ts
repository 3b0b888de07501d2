/**
 * The Training page's memory estimate (src-shared/train-memory.ts): the chosen model's shape,
 * the host's memory and its CUDA GPU's, from which the page computes the estimate as the form changes.
 * trainStart refuses a run that cannot fit (TrainConfig.ignoreMemory starts it anyway).
 * Node-free: the contract spreads TRAIN_MEMORY_CALLS into its calls.
 */
import { call, returns } from './call-spec.js';
import { object, string } from './validate.js';
import type { ModelShape } from './train-memory.js';
import type { GpuMemory, HostMemory } from './memory-verdict.js';

export interface TrainMemoryInfo {
  /** The model's shape (config.json or the GGUF header); null when it cannot be read. */
  shape: ModelShape | null;
  /** Why the shape could not be read (no such folder, not a model), or null. */
  problem: string | null;
  /** The machine that runs the back end: total and available memory. */
  host: HostMemory;
  /** Its CUDA GPU's memory (nvidia-smi; device 0 of CUDA_VISIBLE_DEVICES), null where none is read: the page checks a CUDA run against it. */
  gpu: GpuMemory | null;
}

export const TRAIN_MEMORY_CALLS = {
  trainMemory: call(
    "A model's shape, the host's memory and its CUDA GPU's, for the Training page's memory estimate (src-shared/train-memory.ts).",
    object({ modelDir: string({ min: 1, max: 4096 }) }),
    returns<TrainMemoryInfo>(),
  ),
} as const;
