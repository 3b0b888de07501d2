// SmolLM3 and OLMo 2 as GGUF (src-main/model/gguf/model.ts): a tiny SmolLM3 folder (tools/tiny-models.ts: its
// 4th layer without RoPE) written by the benches' writer as llama.cpp's converter writes `smollm3`
// (Llama's tensors, q/k permuted; no key for the NoPE layers, which llama.cpp takes as every 4th)
// reads back as the folder's config and scores as the folder does; a merged folder's config.json
// names the NoPE layers as transformers does. A tiny OLMo 2 (norms after each branch, `olmo2`'s
// post_attention_norm and post_ffw_norm, q/k not permuted) scores as its folder, and so does a tiny
// OLMo 3 (llama.cpp's olmo2 with sliding layers and YaRN). llama.cpp itself:
// test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { scoreRow } from '../helpers/score-model.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { configJson } from '../../src-main/model/gguf/folder-files.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { ggufFolderConfig } from '../helpers/gguf-folder.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-smollm3-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const dir = writeTinyModel(path.join(tmp, 'smollm3'), { family: 'smollm3', numLayers: 4, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 9, tie: true }).dir;
const file = path.join(tmp, 'smollm3-f32.gguf');
writeGguf(dir, file, { type: 'f32' });
const ROWS = [{ inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60], responseStart: 1 }];

const scores = (model: string) => scoreRow(model, ROWS[0]!);

describe('a SmolLM3 GGUF', () => {
  it("reads the folder's NoPE layers and scores as the folder does; the model list calls it loadable", async () => {
    const want = readModelConfig(dir);
    expect(want.noRopeLayers).toEqual([false, false, false, true]);
    expect(Checkpoint.open(file).config).toMatchObject({ architecture: 'SmolLM3ForCausalLM', family: 'llama', noRopeLayers: want.noRopeLayers });
    const [fromFolder, fromFile] = [await scores(dir), await scores(file)];
    expect(Math.max(...fromFile.map((v, i) => Math.abs(v - fromFolder[i]!)))).toBeLessThan(1e-5);
    expect(inspectModel(file)).toMatchObject({ architecture: 'smollm3', loadable: true, reason: null });
  });

  it('a merged folder of it (config.json made from the metadata) names the NoPE layers, model_type smollm3', () => {
    const { config, written, read } = ggufFolderConfig(file, tmp);
    expect([written.model_type, written.no_rope_layers]).toEqual(['smollm3', [1, 1, 1, 0]]);
    expect(read.noRopeLayers).toEqual(config.noRopeLayers);
  });
});

describe('an OLMo 2 GGUF', () => {
  const olmo = writeTinyModel(path.join(tmp, 'olmo2'), { family: 'olmo2', numLayers: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 10 }).dir;
  const olmoFile = path.join(tmp, 'olmo2-f32.gguf');
  writeGguf(olmo, olmoFile, { type: 'f32' });

  it('reads as the folder (norms after each branch, q/k normed whole) and scores as it does', async () => {
    expect(Checkpoint.open(olmoFile).config).toMatchObject({ architecture: 'Olmo2ForCausalLM', qkNorm: true, qkNormWhole: true, postNorms: true });
    const [fromFolder, fromFile] = [await scores(olmo), await scores(olmoFile)];
    expect(Math.max(...fromFile.map((v, i) => Math.abs(v - fromFolder[i]!)))).toBeLessThan(1e-5);
    const merged = configJson(Checkpoint.open(olmoFile).config);
    expect(merged.model_type).toBe('olmo2');
  });
});

describe('an OLMo 3 GGUF (olmo2 with sliding layers and YaRN)', () => {
  it("reads the folder's sliding layers and YaRN, and scores as the folder does (rows past the window and the original context)", async () => {
    const olmo3 = writeTinyModel(path.join(tmp, 'olmo3'), { family: 'olmo3', numLayers: 4, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 11 }).dir;
    const olmo3File = path.join(tmp, 'olmo3-f32.gguf');
    writeGguf(olmo3, olmo3File, { type: 'f32' });
    const want = readModelConfig(olmo3), got = Checkpoint.open(olmo3File).config;
    expect(want.sliding).toEqual({ window: 4, layers: [true, true, true, false], ropeTheta: 1000000 });
    expect(got).toMatchObject({ architecture: 'Olmo3ForCausalLM', sliding: want.sliding, postNorms: true });
    expect(got.ropeScaling).toEqual({ ...want.ropeScaling, attentionFactor: expect.closeTo(1 + 0.1 * Math.log(4), 6) });
    const long = [{ inputIds: Array.from({ length: 40 }, (_, i) => (i * 7 + 3) % 90), responseStart: 1 }];
    const [fromFolder, fromFile] = [await scoreRow(olmo3, long[0]!), await scoreRow(olmo3File, long[0]!)];
    expect(Math.max(...fromFile.map((v, i) => Math.abs(v - fromFolder[i]!)))).toBeLessThan(1e-5);
    expect(configJson(got)).toMatchObject({ model_type: 'olmo3', sliding_window: 4, rope_scaling: { rope_type: 'yarn', factor: 4 } });
  });
});

describe('a Ministral 3 GGUF (mistral3: YaRN with its log multiplier, the query temperature)', () => {
  it('reads as the folder and scores as it does, past the original context', async () => {
    const dir3 = writeTinyModel(path.join(tmp, 'ministral3'), { family: 'ministral3', hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 12 }).dir;
    const file3 = path.join(tmp, 'ministral3-f32.gguf');
    writeGguf(dir3, file3, { type: 'f32' });
    const want = readModelConfig(dir3), got = Checkpoint.open(file3).config;
    expect(want).toMatchObject({ queryTemperature: { beta: 0.1, floorScale: 8 }, ropeScaling: { type: 'yarn', factor: 4, attentionFactor: 1 } });
    expect(got).toMatchObject({ architecture: 'Ministral3ForCausalLM', queryTemperature: { beta: expect.closeTo(0.1, 6), floorScale: 8 } });
    expect((got.ropeScaling as { attentionFactor: number }).attentionFactor).toBeCloseTo(1, 6);
    const row = { inputIds: Array.from({ length: 30 }, (_, i) => (i * 5 + 2) % 90), responseStart: 1 };
    const [fromFolder, fromFile] = [await scoreRow(dir3, row), await scoreRow(file3, row)];
    expect(Math.max(...fromFile.map((v, i) => Math.abs(v - fromFolder[i]!)))).toBeLessThan(1e-5);
  });
});
