// The Training page's "Use in Ollama / llama.cpp" over the HTTP API (docs/design.md §GGUF
// adapters): exportModel writes the GGUF adapter and Modelfile into <adapterDir>/gguf (or
// outDir), answers the paths and the commands; its input is validated, and a folder without an
// adapter is one line.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelExportResult } from '../../src-shared/model-export-api.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { api, startCapture } from '../capture/helpers.js';

let server: Awaited<ReturnType<typeof startCapture>>;
let model: string, run: string;

beforeAll(async () => {
  server = await startCapture();
  model = path.join(server.dir, 'tiny-qwen3');
  writeTinyModel(model, { family: 'qwen3', seed: 2 });
  run = path.join(server.dir, 'run-1');
  const specs = loraSpecs(Checkpoint.open(model).config, ['q', 'v']);
  const weights = initLora(specs, 2, 1);
  for (const s of specs) weights.set(loraBKey(s), new Float32Array(s.outFeatures * 2).fill(0.01));
  writeAdapter(run, { lora: { r: 2, alpha: 4, targets: ['q', 'v'] }, specs, weights, baseModel: model });
}, 60_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(server.dir, { recursive: true, force: true });
});

describe('exportModel', () => {
  it('writes the GGUF adapter and the Modelfile beside the adapter and answers the commands', async () => {
    const r = await api<ModelExportResult>(server, 'exportModel', { adapterDir: run, modelDir: model });
    expect(r.adapterGguf).toBe(path.join(run, 'gguf', 'hindsight-run-1.lora.gguf'));
    expect(r.modelfile).toBe(path.join(run, 'gguf', 'Modelfile'));
    expect(fs.existsSync(r.adapterGguf)).toBe(true);
    expect(r.ollamaCommand).toBe(`ollama create hindsight-run-1 -f ${r.modelfile}`);
    expect(r).toMatchObject({ architecture: 'qwen3', tensors: 2 * 2 * 2, ollamaName: 'hindsight-run-1' });
    expect(r.notes.join(' ')).toMatch(/Hugging Face folder/);
    expect(fs.readFileSync(r.modelfile, 'utf8')).toContain(`ADAPTER ${r.adapterGguf}`);
  });

  it('refuses a bad merged type (validation) and a folder without an adapter (one line)', async () => {
    await expect(api(server, 'exportModel', { adapterDir: run, modelDir: model, merged: 'q4_0' })).rejects.toThrow(/merged/);
    await expect(api(server, 'exportModel', { adapterDir: run, modelDir: model, extra: 1 })).rejects.toThrow(/extra/);
    await expect(api(server, 'exportModel', { adapterDir: server.dir, modelDir: model })).rejects.toThrow(/holds no adapter/);
    await expect(api(server, 'exportModel', { adapterDir: run, modelDir: model, merged: 'f16' })).rejects.toThrow(/merged GGUF \(--merged\) needs a GGUF base/);
  });
});
