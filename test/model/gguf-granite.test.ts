// Granite as GGUF (src-main/model/gguf/model.ts): a tiny Granite folder (tools/tiny-models.ts:
// its four multipliers, none of them 1) written by the benches' writer as llama.cpp's converter
// writes `granite` (Llama's tensors, q/k permuted, the multipliers as embedding_scale,
// attention.scale, residual_scale and logit_scale) reads back as the folder's config and scores
// as the folder does; llama.cpp itself: test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { scoreRow } from '../helpers/score-model.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { ggufFolderConfig } from '../helpers/gguf-folder.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-granite-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const dir = path.join(tmp, 'granite');
writeTinyModel(dir, { family: 'granite', numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 9, tie: true });
const file = path.join(tmp, 'granite-f32.gguf');
writeGguf(dir, file, { type: 'f32' });
const ROWS = [{ inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60], responseStart: 1 }];

const scores = (model: string) => scoreRow(model, ROWS[0]!);

describe('a Granite GGUF', () => {
  it("reads the folder's multipliers and scores as the folder does; the model list calls it loadable", async () => {
    const want = readModelConfig(dir);
    expect(want.multipliers).toEqual({ embedding: 6, attention: 0.2, residual: 0.4, logits: 3 });
    const got = Checkpoint.open(file).config;
    expect(got).toMatchObject({ architecture: 'GraniteForCausalLM', family: 'llama' });
    for (const [k, v] of Object.entries(want.multipliers!)) expect(got.multipliers![k as 'embedding'], k).toBeCloseTo(v, 6); // stored as f32
    const [fromFolder, fromFile] = [await scores(dir), await scores(file)];
    expect(Math.max(...fromFile.map((v, i) => Math.abs(v - fromFolder[i]!)))).toBeLessThan(1e-5);
    expect(inspectModel(file)).toMatchObject({ architecture: 'granite', loadable: true, reason: null });
  });

  it('a merged folder of it (config.json made from the metadata) keeps the multipliers and model_type granite', () => {
    const { config, written, read } = ggufFolderConfig(file, tmp);
    expect(written.model_type).toBe('granite');
    expect(read.multipliers).toEqual(config.multipliers);
  });
});
