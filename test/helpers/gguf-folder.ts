// The config.json a GGUF model's folder gets (a merged model of a GGUF base: writeGgufCompanionFiles,
// the app's own write), in a fresh folder under `parent`: the JSON as written, and what
// readModelConfig reads back from it. What the format tests check a GGUF's folder by.
import fs from 'node:fs';
import path from 'node:path';
import { Checkpoint, readModelConfig, type ModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { writeGgufCompanionFiles } from '../../src-main/model/gguf/folder-files.js';

export function ggufFolderConfig(file: string, parent: string): { config: ModelConfig; written: Record<string, unknown>; read: ModelConfig } {
  const ckpt = Checkpoint.open(file);
  const dir = fs.mkdtempSync(path.join(parent, 'folder-'));
  writeGgufCompanionFiles(ckpt.gguf!, dir);
  const written = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  return { config: ckpt.config, written, read: readModelConfig(dir) };
}
