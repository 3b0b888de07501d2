/**
 * The memory check before a fine-tune (issue 31, docs/design.md §Memory estimate,
 * §Micro-batches): the host's memory, a CUDA run's GPU's (./gpu-memory.ts), a model's shape, and
 * the verdict of src-shared/memory-verdict.ts for a run's settings, with how the step runs: its
 * micro-batch and whether it recomputes. `hindsight train`, the training service (the Training
 * page's trainStart) and live capture's background runs all ask {@link checkRunMemory}, and hand
 * its {@link stepPlan} to the trainer. A run
 * that cannot fit even one row at a time is refused: the CLI unless --ignore-memory is given,
 * the service unless the page's Start anyway was ticked; live capture does not start it.
 *
 * HINDSIGHT_MEMORY_BUDGET (bytes, or with a unit: 6G, 6GB, 800M) caps the memory a run may
 * plan on below what the machine has: for a machine shared with other work, and for tests,
 * which make a run not fit without a machine that small.
 */
import fs from 'node:fs';
import os from 'node:os';
import { appWording, UserError } from '../../src-shared/types.js';
import { memoryRunOf, type MemoryRun, type ModelShape } from '../../src-shared/train-memory.js';
import { memoryVerdict, type HostMemory, type MemoryReader, type MemoryVerdict } from '../../src-shared/memory-verdict.js';
import type { TrainMemoryInfo } from '../../src-shared/train-memory-api.js';
import type { TrainConfig } from '../../src-shared/training-api.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { gpuMemory } from './gpu-memory.js';
import type { StepPlan } from './run-settings.js';

const UNITS: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

/** HINDSIGHT_MEMORY_BUDGET's bytes: "6G", "6 GB", "6GiB", "800M", "123456789"; throws on anything else. */
export function parseMemoryBudget(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  if (!m) throw new UserError(`HINDSIGHT_MEMORY_BUDGET must be a size such as 6G, 800M or a number of bytes, got '${text}'`);
  return Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
}

/** Linux's MemAvailable in bytes, or null where /proc/meminfo has none (other systems). */
function memAvailable(): number | null {
  try {
    const kb = /^MemAvailable:\s+(\d+)\s*kB/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'))?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}

/** The machine's memory now: total, and what a run can use (MemAvailable on Linux, else free memory), capped by HINDSIGHT_MEMORY_BUDGET. */
export function hostMemory(env: NodeJS.ProcessEnv = process.env): HostMemory {
  const totalBytes = os.totalmem();
  const linux = memAvailable();
  const available = linux ?? os.freemem();
  const budgetText = env.HINDSIGHT_MEMORY_BUDGET;
  const budgetBytes = budgetText !== undefined && budgetText !== '' ? parseMemoryBudget(budgetText) : null;
  if (budgetBytes !== null && budgetBytes < available) return { totalBytes, availableBytes: budgetBytes, source: 'budget', budgetBytes };
  return { totalBytes, availableBytes: available, source: linux === null ? 'freemem' : 'MemAvailable', budgetBytes };
}

/** A model's shape from its config.json or GGUF header (no weights are read). */
export function modelShape(modelPath: string): ModelShape {
  const c = Checkpoint.open(modelPath).config;
  return {
    hiddenSize: c.hiddenSize, intermediateSize: c.intermediateSize, numLayers: c.numLayers, numHeads: c.numHeads, numKvHeads: c.numKvHeads,
    headDim: c.headDim, vocabSize: c.vocabSize, tieWordEmbeddings: c.tieWordEmbeddings, maxPositionEmbeddings: c.maxPositionEmbeddings,
    ...(c.gemma?.attentionSoftcap ? { softcappedAttention: true } : {}),
  };
}

/**
 * The verdict for a run on `modelPath` on this machine now, with how its step runs
 * (MemoryVerdict.microBatch, .recompute); `run` may depend on the model's shape (its default max
 * length does). A CUDA run's GPU is read too (null where nvidia-smi gives nothing).
 */
export async function checkRunMemory(modelPath: string, run: MemoryRun | ((shape: ModelShape) => MemoryRun), reader: MemoryReader, env: NodeJS.ProcessEnv = process.env): Promise<MemoryVerdict> {
  const shape = modelShape(modelPath);
  const settled = typeof run === 'function' ? run(shape) : run;
  const gpu = settled.device === 'cuda' ? await gpuMemory(env) : null;
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
