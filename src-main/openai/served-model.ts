/**
 * The model the endpoint answers with: a checkpoint folder, optionally with a PEFT LoRA
 * adapter applied.
 *
 * An adapter is fed beside the base weights: see src-main/train/adapted-model.ts.
 */
import path from 'node:path';
import type { CheckedForm, LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import { loadAdaptedModel } from '../train/adapted-model.js';

/** The id clients see: the model folder's name, plus the adapter folder's name when one is applied. */
export function servedModelId(modelDir: string, adapterDir: string | null): string {
  const base = path.basename(path.resolve(modelDir));
  return adapterDir ? `${base}+${path.basename(path.resolve(adapterDir))}` : base;
}

/**
 * `form`: load in this form of the weights, and its chat length, without a memory check (one the
 * caller checked); else the form that fits. Its generation session is built while it loads, so
 * that a first load's conversion of the weights (`onConversion`) is the load's, not a request's.
 */
export async function loadServedModel(modelDir: string, adapterDir: string | null, device: Device, form?: CheckedForm, onConversion?: (done: number, total: number) => void): Promise<LocalModel> {
  const options = { device, prepare: ['generate' as const], ...(onConversion ? { onConversion } : {}) };
  return loadAdaptedModel(modelDir, adapterDir, form ? { ...options, ...form, ignoreMemory: true } : options);
}
