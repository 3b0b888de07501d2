/**
 * What `--model` (and every model field) may name: a Hugging Face checkpoint folder (with its
 * config.json) or a GGUF file (./gguf/model.ts; any part of a split one). Checkpoint.open and
 * ChatTokenizer.load open either; the checks before a long job ask this.
 */
import fs from 'node:fs';
import path from 'node:path';
import { isGgufPath } from './gguf/model.js';

export { isGgufPath };

/** Whether `p` looks like a model Hindsight can open: a folder with config.json, or a .gguf file. */
export function isModelPath(p: string): boolean {
  if (isGgufPath(p)) return fs.existsSync(p) && fs.statSync(p).isFile();
  return fs.existsSync(path.join(p, 'config.json'));
}

/** How the messages name what a model path should be. */
export const MODEL_PATH_KINDS = 'a Hugging Face checkpoint folder (with config.json) or a .gguf file';
