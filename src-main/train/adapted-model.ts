/**
 * Generating with an adapter: the generation engine has no adapter hook, so base + adapter
 * is loaded MERGED. The trainer's merged export (./merge.ts, W' = W + (alpha/r)·B·A in fp32)
 * is written once into a cache folder keyed by the base folder and the adapter's bytes, then
 * loaded as a plain model. Merging holds the whole model in fp32 in memory and blocks the
 * thread while it writes (seconds for small models), so it suits the models Hindsight trains
 * on a desktop; the cache makes every later load instant. Used by the OpenAI-compatible
 * endpoint (src-main/openai/served-model.ts), `generate --adapter` and replay.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { LocalModel, type LoadOptions } from '../model/local-model.js';
import { writeMergedModel } from './merge.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readAdapter } from './peft.js';

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

/** The model, with the adapter merged in when one is given. */
export async function loadAdaptedModel(modelDir: string, adapterDir: string | null, options: LoadOptions = {}): Promise<LocalModel> {
  return LocalModel.load(adapterDir ? mergedModelDir(modelDir, adapterDir) : modelDir, options);
}
