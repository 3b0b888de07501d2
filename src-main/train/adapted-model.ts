/**
 * A model with a trained adapter, for the Chat page, the OpenAI-compatible endpoint
 * (src-main/openai/served-model.ts), `generate --adapter` and evaluation replays
 * ({@link loadAdaptedModel}): the base as it loads anyway (its memory check, its `--quantize`
 * form: an 8B that answers in int4 keeps int4 with its adapter) and the adapter's A and B fed
 * beside it, the engine's LoRA inputs (docs/design.md §Devices, `fusedLora`), as on-policy
 * rollouts and `score --adapter` run it. A merged copy (W + s·B·A) would hold the whole model
 * in fp32 while it is written, 33 GB for an 8B, and then again in whatever form it loads.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { LocalModel, type LoadOptions } from '../model/local-model.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readAdapter } from './peft.js';

/** The adapter's content, as a key: a hash of its config and weights files (a retrained adapter in the same folder is another key). */
export function adapterKey(adapterDir: string): string {
  const hash = crypto.createHash('sha256');
  for (const file of [ADAPTER_CONFIG, ADAPTER_WEIGHTS]) hash.update('\0').update(fs.readFileSync(path.join(adapterDir, file)));
  return hash.digest('hex').slice(0, 24);
}

/** The model, with the adapter's weights fed beside it when one is given (read and checked against the model before anything loads). */
export async function loadAdaptedModel(modelDir: string, adapterDir: string | null, options: LoadOptions = {}): Promise<LocalModel> {
  if (!adapterDir) return LocalModel.load(modelDir, options);
  const adapter = readAdapter(adapterDir, Checkpoint.open(modelDir).config);
  const model = await LocalModel.load(modelDir, { ...options, lora: adapter.lora });
  try {
    await model.setLora(adapter.weights);
  } catch (err) {
    await model.close();
    throw err;
  }
  return model;
}
