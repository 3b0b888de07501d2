/**
 * The model the endpoint answers with: a checkpoint folder, optionally with a PEFT LoRA
 * adapter applied.
 *
 * The generation engine has no adapter hook, so an adapter is served MERGED: the trainer's
 * merged export (src-main/train/merge.ts, W' = W + (alpha/r)·B·A in fp32) is written once
 * into a cache folder keyed by the base folder and the adapter's bytes, then loaded as a
 * plain model. Merging holds the whole model in fp32 in memory and blocks the thread while
 * it writes (seconds for small models), so it suits the models Hindsight trains on a
 * desktop; the cache makes every later load instant.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import { writeMergedModel } from '../train/merge.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readAdapter } from '../train/peft.js';

/** The id clients see: the model folder's name, plus the adapter folder's name when one is applied. */
export function servedModelId(modelDir: string, adapterDir: string | null): string {
  const base = path.basename(path.resolve(modelDir));
  return adapterDir ? `${base}+${path.basename(path.resolve(adapterDir))}` : base;
}

function cacheKey(modelDir: string, adapterDir: string): string {
  const hash = crypto.createHash('sha256').update(path.resolve(modelDir));
  for (const file of [ADAPTER_CONFIG, ADAPTER_WEIGHTS]) hash.update('\0').update(fs.readFileSync(path.join(adapterDir, file)));
  return hash.digest('hex').slice(0, 24);
}

/** The merged folder for base + adapter, written on first use. */
export function mergedModelDir(modelDir: string, adapterDir: string, cacheRoot = path.join(os.tmpdir(), 'hindsight-merged')): string {
  const ckpt = Checkpoint.open(modelDir);
  const adapter = readAdapter(adapterDir, ckpt.config); // validates before anything is written
  const dir = path.join(cacheRoot, cacheKey(modelDir, adapterDir));
  if (fs.existsSync(path.join(dir, 'config.json'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  try {
    writeMergedModel(ckpt, tmp, adapter.lora, adapter.specs, adapter.weights);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

export async function loadServedModel(modelDir: string, adapterDir: string | null, device: Device): Promise<LocalModel> {
  const dir = adapterDir ? mergedModelDir(modelDir, adapterDir) : modelDir;
  return LocalModel.load(dir, { device });
}
