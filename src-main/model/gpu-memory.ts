/**
 * The CUDA GPU's memory as nvidia-smi reports it, for the memory checks: a fine-tune's
 * (../train/memory-check.ts, docs/design.md §Memory estimate) and a model's load for inference
 * (./inference-fit.ts, §Memory for inference). Read for device 'cuda' only: onnxruntime-node gives the
 * CUDA provider no device id but 0, so a run uses device 0 of the GPUs CUDA_VISIBLE_DEVICES
 * shows, and that is the card read here. WebGPU is not read: Dawn may choose another adapter
 * (an integrated GPU, another vendor's), and what it allocates is not CUDA's, so nvidia-smi's
 * free memory says nothing certain about its room.
 *
 * nvidia-smi numbers cards in PCI bus order; CUDA, unless CUDA_DEVICE_ORDER=PCI_BUS_ID, puts the
 * fastest first. On a machine with one card, or identical cards, they agree; with mixed cards
 * and an index (not a UUID) the card read may not be the one the run gets.
 */
import { execFile } from 'node:child_process';
import type { GpuMemory } from '../../src-shared/memory-verdict.js';

/** The fields read, in MiB without units: one line a card, "NVIDIA H200, 143771, 143086". */
export const GPU_QUERY = ['--query-gpu=name,memory.total,memory.free', '--format=csv,noheader,nounits'];
/** nvidia-smi answers in well under a second; a driver that hangs must not hold a run's start. */
const QUERY_TIMEOUT_MS = 2000;
const MiB = 2 ** 20;

/**
 * The cards in nvidia-smi's answer to {@link GPU_QUERY}, in its order. A line that is not a
 * name and two whole numbers (an error message, "[N/A]" or "[Not Supported]" for a card whose
 * memory it cannot read) gives no card.
 */
export function parseGpuQuery(stdout: string): GpuMemory[] {
  const cards: GpuMemory[] = [];
  for (const line of stdout.split(/\r?\n/)) {
    const fields = line.split(',').map((f) => f.trim());
    if (fields.length < 3) continue;
    // The numbers are the last two fields, so a name with a comma in it stays whole.
    const [total, free] = fields.slice(-2) as [string, string];
    const name = fields.slice(0, -2).join(', ');
    if (!name || !/^\d+$/.test(total) || !/^\d+$/.test(free)) continue;
    cards.push({ name, totalBytes: Number(total) * MiB, freeBytes: Number(free) * MiB });
  }
  return cards;
}

/**
 * The card CUDA's device 0 is, as nvidia-smi's --id takes it: the first entry of
 * CUDA_VISIBLE_DEVICES (an index, or a GPU's UUID), 0 when it is unset; null when it shows no
 * GPU ("" or "-1", or an entry CUDA does not take) or names a MIG instance, whose memory
 * nvidia-smi's per-card query does not give.
 */
export function cudaDeviceZero(visible: string | undefined): string | null {
  if (visible === undefined) return '0';
  const first = visible.split(',')[0]!.trim();
  if (/^\d+$/.test(first)) return String(Number(first));
  if (/^GPU-[0-9a-f-]+$/i.test(first)) return first;
  return null;
}

/**
 * The memory of the GPU a CUDA run would use, or null when there is none to read: no
 * nvidia-smi (not installed, no NVIDIA driver), a failure or a timeout, an answer that is not
 * one card's memory, or CUDA_VISIBLE_DEVICES hiding every GPU. Never throws: without it the
 * memory check checks the host's memory alone, as it does for the CPU.
 */
export function gpuMemory(env: NodeJS.ProcessEnv = process.env): Promise<GpuMemory | null> {
  const id = cudaDeviceZero(env.CUDA_VISIBLE_DEVICES);
  if (id === null) return Promise.resolve(null);
  return new Promise((resolve) => {
    try {
      execFile('nvidia-smi', [`--id=${id}`, ...GPU_QUERY], { env, timeout: QUERY_TIMEOUT_MS, encoding: 'utf8', windowsHide: true }, (err, stdout) => {
        resolve(err ? null : (parseGpuQuery(stdout)[0] ?? null));
      });
    } catch {
      resolve(null);
    }
  });
}

/** The card a run or load on `device` uses, where it is read: CUDA's (see {@link gpuMemory}); null elsewhere. */
export function deviceGpuMemory(device: string, env: NodeJS.ProcessEnv = process.env): Promise<GpuMemory | null> {
  return device === 'cuda' ? gpuMemory(env) : Promise.resolve(null);
}
