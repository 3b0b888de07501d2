// Gemma 3 as GGUF (src-main/model/gguf/model.ts, src-main/model/gemma-config.ts gemmaFromGguf): a
// tiny Gemma 3 folder (tools/tiny-models.ts: two sliding layers with a 4-position window, a global
// one with linear RoPE scaling) written by the benches' writer as llama.cpp's converter writes
// `gemma3` (norms as 1 + w, post_attention_norm / ffn_norm / post_ffw_norm, the window, its
// pattern as a count, rope.freq_base_swa) reads back as the folder's config and scores as the
// folder does; the same file with Ollama's keys (rope.local.freq_base, the pattern as one flag a
// layer) and a vision tower beside the text model reads the same; a merged GGUF keeps the norms as
// the file stores them. llama.cpp itself: test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { scoreRow } from '../helpers/score-model.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { openGguf, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { GGUF_TYPE, entriesOf, writeGgufFile } from '../../src-main/model/gguf/writer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { ggufFolderConfig } from '../helpers/gguf-folder.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-gemma3-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

// query_pre_attn_scalar the head size, as llama.cpp takes it.
const dir = writeTinyModel(path.join(tmp, 'gemma3'), { family: 'gemma3', numLayers: 3, hiddenSize: 64, headDim: 16, intermediateSize: 96, queryPreAttnScalar: 16, seed: 9, tie: true }).dir;
const file = path.join(tmp, 'gemma3-f32.gguf');
writeGguf(dir, file, { type: 'f32' });
// Longer than the 4-position window.
const ROWS = [{ inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60, 8, 30], responseStart: 1 }];

const scores = (model: string) => scoreRow(model, ROWS[0]!);
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));

/** `file` rewritten with Ollama's keys for the sliding layers and a vision tensor beside the text model's. */
function asOllamaWrites(out: string): void {
  const g = openGguf(file);
  const entries = entriesOf(g, (key) => key === 'gemma3.rope.freq_base_swa' || key === 'gemma3.attention.sliding_window_pattern');
  entries.push({ key: 'gemma3.rope.local.freq_base', type: GGUF_TYPE.f32, value: 10000 });
  entries.push({ key: 'gemma3.attention.sliding_window_pattern', type: GGUF_TYPE.array, elemType: GGUF_TYPE.bool, value: [true, true, false] });
  const tensors = g.tensors.map((t) => ({ name: t.name, dims: t.dims, type: t.type, data: () => readGgufTensorBytes(t) }));
  tensors.push({ name: 'v.patch_embd.weight', dims: [4, 4], type: 0, data: () => new Uint8Array(64) });
  writeGgufFile(out, entries, tensors);
}

describe('a Gemma 3 GGUF', () => {
  it("reads the folder's layout and scores as the folder does; the model list calls it loadable", async () => {
    const want = readModelConfig(dir);
    expect(want.sliding!.layers).toEqual([true, true, false]);
    const got = Checkpoint.open(file).config;
    expect(got).toMatchObject({ architecture: 'Gemma3ForCausalLM', family: 'gemma3', qkNorm: true, ropeScaling: { type: 'linear', factor: 8 } });
    expect([got.gemma, got.sliding]).toEqual([want.gemma, want.sliding]);
    const fromFolder = await scores(dir);
    expect(maxDiff(await scores(file), fromFolder)).toBeLessThan(1e-5);
    expect(inspectModel(file)).toMatchObject({ architecture: 'gemma3', loadable: true, reason: null });
  });

  it("Ollama's keys (rope.local.freq_base, one flag a layer) and a vision tower read as llama.cpp's", async () => {
    const ollama = path.join(tmp, 'ollama.gguf');
    asOllamaWrites(ollama);
    expect(Checkpoint.open(ollama).config.sliding).toEqual(Checkpoint.open(file).config.sliding);
    expect(maxDiff(await scores(ollama), await scores(file))).toBe(0);
    expect(inspectModel(ollama)).toMatchObject({ loadable: true });
  });

  it('a merged folder of it (config.json made from the metadata) reads back the same layout, model_type gemma3_text', () => {
    const { config, written, read } = ggufFolderConfig(file, tmp);
    expect([written.model_type, written.hidden_act, written.layer_types]).toEqual(['gemma3_text', undefined, ['sliding_attention', 'sliding_attention', 'full_attention']]);
    expect(read).toMatchObject({ gemma: config.gemma, sliding: config.sliding, ropeScaling: config.ropeScaling, ropeTheta: config.ropeTheta });
  });

  it('the norms are read as w (the file holds 1 + w)', () => {
    const name = 'model.layers.0.post_feedforward_layernorm.weight';
    const folder = Checkpoint.open(dir), gguf = Checkpoint.open(file);
    const [a, b] = [folder.readFloat32(name, [64]), gguf.readFloat32(name, [64])];
    expect(maxDiff([...a], [...b])).toBeLessThan(1e-7);
    expect(Math.max(...a.map(Math.abs))).toBeLessThan(1); // drawn around 0, as Gemma stores them
  });
});
