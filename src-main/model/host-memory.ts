/**
 * The machine's memory and a model's shape, as the memory checks read them: the fine-tune's
 * (../train/memory-check.ts) and a model's load for inference (./inference-fit.ts).
 *
 * HINDSIGHT_MEMORY_BUDGET (bytes, or with a unit: 6G, 6GB, 800M) caps the memory a run or a
 * load may plan on below what the machine has: for a machine shared with other work, and for
 * tests, which make a model not fit without a machine that small.
 */
import fs from 'node:fs';
import os from 'node:os';
import { UserError } from '../../src-shared/types.js';
import type { ModelShape } from '../../src-shared/train-memory.js';
import type { HostMemory } from '../../src-shared/memory-verdict.js';
import { Checkpoint, type ModelConfig } from './hf-checkpoint.js';

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
  return shapeOf(Checkpoint.open(modelPath).config);
}

/** What the memory estimates read of a model's config. */
export function shapeOf(c: ModelConfig): ModelShape {
  return {
    hiddenSize: c.hiddenSize, intermediateSize: c.intermediateSize, numLayers: c.numLayers, numHeads: c.numHeads, numKvHeads: c.numKvHeads,
    headDim: c.headDim, vocabSize: c.vocabSize, tieWordEmbeddings: c.tieWordEmbeddings, maxPositionEmbeddings: c.maxPositionEmbeddings,
    ...(c.gemma?.attentionSoftcap ? { softcappedAttention: true } : {}),
  };
}
