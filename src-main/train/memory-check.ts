/**
 * The memory check before a fine-tune (issue 31, docs/design.md §Memory estimate,
 * §Micro-batches): the host's memory, a CUDA run's GPU's (../model/gpu-memory.ts), a model's shape, and
 * the verdict of src-shared/memory-verdict.ts for a run's settings, with how the step runs: its
 * micro-batch and whether it recomputes. `hindsight train`, the training service (the Training
 * page's trainStart) and live capture's background runs all ask {@link checkRunMemory}, and hand
 * its {@link stepPlan} to the trainer. A run
 * that cannot fit even one row at a time is refused: the CLI unless --ignore-memory is given,
 * the service unless the page's Start anyway was ticked; live capture does not start it.
 *
 * HINDSIGHT_MEMORY_BUDGET caps the memory a run may plan on below what the machine has
 * (../model/host-memory.ts, which reads both).
 */
import { appWording } from '../../src-shared/types.js';
import { memoryRunOf, type MemoryRun, type ModelShape } from '../../src-shared/train-memory.js';
import { memoryVerdict, type MemoryReader, type MemoryVerdict } from '../../src-shared/memory-verdict.js';
import type { TrainMemoryInfo } from '../../src-shared/train-memory-api.js';
import type { TrainConfig } from '../../src-shared/training-api.js';
import { hostMemory, modelShape } from '../model/host-memory.js';
import { deviceGpuMemory, gpuMemory } from '../model/gpu-memory.js';
import type { StepPlan } from './run-settings.js';

/**
 * The verdict for a run on `modelPath` on this machine now, with how its step runs
 * (MemoryVerdict.microBatch, .recompute); `run` may depend on the model's shape (its default max
 * length does). A CUDA run's GPU is read too (null where nvidia-smi gives nothing).
 */
export async function checkRunMemory(modelPath: string, run: MemoryRun | ((shape: ModelShape) => MemoryRun), reader: MemoryReader, env: NodeJS.ProcessEnv = process.env): Promise<MemoryVerdict> {
  const shape = modelShape(modelPath);
  const settled = typeof run === 'function' ? run(shape) : run;
  const gpu = await deviceGpuMemory(settled.device ?? 'cpu', env);
  return memoryVerdict(shape, settled, hostMemory(env), reader, gpu);
}

/** What the verdict decided of how the step runs, as the trainer takes it (not saved with the run). */
export function stepPlan(verdict: MemoryVerdict): Required<StepPlan> {
  return { microBatch: verdict.microBatch, recomputeActivations: verdict.recompute };
}

/** The trainMemory call: a model's shape (or why it cannot be read), this machine's memory and its CUDA GPU's (null where none is read). */
export async function trainMemoryInfo(modelDir: string): Promise<TrainMemoryInfo> {
  const host = hostMemory(), gpu = await gpuMemory();
  try {
    return { shape: modelShape(modelDir), problem: null, host, gpu };
  } catch (err) {
    return { shape: null, problem: appWording(err as Error).split('\n')[0] ?? String(err), host, gpu };
  }
}

/** The verdict for the Training page's run (its refusal in the page's words), as the page computes it. */
export function checkConfigMemory(config: TrainConfig): Promise<MemoryVerdict> {
  return checkRunMemory(config.modelDir, (shape) => memoryRunOf(config, shape), 'app');
}

/** A resumed run's step for the memory available now; when its model cannot be read, the trainer says why. */
export async function resumedStepPlan(config: TrainConfig): Promise<StepPlan> {
  try {
    return stepPlan(await checkConfigMemory(config));
  } catch {
    return config.microBatch !== undefined ? { microBatch: config.microBatch } : {};
  }
}
