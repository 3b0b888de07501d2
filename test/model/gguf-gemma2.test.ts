// Gemma 2 as GGUF (src-main/model/gguf/model.ts, src-main/model/gemma-config.ts gemmaFromGguf): a
// tiny Gemma 2 folder (tools/tiny-models.ts: every other layer sliding over 4 positions, attention
// and logits soft-capped at 1 and 2) written by the benches' writer as llama.cpp's converter writes
// `gemma2` (norms as 1 + w, the four norms, attn_logit_softcapping, final_logit_softcapping, the
// window) reads back as the folder's config and scores as the folder does; a file with none of
// the keys llama.cpp defaults (window, caps) takes llama.cpp's defaults (4,096; 50 and 30); a merged
// folder of it reads back the same. llama.cpp itself: test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { scoreRow } from '../helpers/score-model.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { openGguf, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { entriesOf, writeGgufFile } from '../../src-main/model/gguf/writer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { ggufFolderConfig } from '../helpers/gguf-folder.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-gemma2-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

// query_pre_attn_scalar the head size, as llama.cpp takes it.
const dir = writeTinyModel(path.join(tmp, 'gemma2'), { family: 'gemma2', numLayers: 3, hiddenSize: 64, headDim: 16, intermediateSize: 96, queryPreAttnScalar: 16, seed: 9, tie: true }).dir;
const file = path.join(tmp, 'gemma2-f32.gguf');
writeGguf(dir, file, { type: 'f32' });
// Longer than the 4-position window.
const ROW = { inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60, 8, 30], responseStart: 1 };
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));

describe('a Gemma 2 GGUF', () => {
  it("reads the folder's layout and scores as the folder does; the model list calls it loadable", async () => {
    const want = readModelConfig(dir);
    expect(want).toMatchObject({ family: 'gemma2', qkNorm: false, gemma: { attentionSoftcap: 1, finalSoftcap: 2 } });
    expect(want.sliding).toEqual({ window: 4, layers: [true, false, true], ropeTheta: 10000 });
    const got = Checkpoint.open(file).config;
    expect(got).toMatchObject({ architecture: 'Gemma2ForCausalLM', family: 'gemma2', qkNorm: false, ropeTheta: 10000 });
    expect([got.gemma, got.sliding]).toEqual([want.gemma, want.sliding]);
    expect(maxDiff(await scoreRow(file, ROW), await scoreRow(dir, ROW))).toBeLessThan(1e-5);
    expect(inspectModel(file)).toMatchObject({ architecture: 'gemma2', loadable: true, reason: null });
  });

  it("a file without the window, the caps or the RoPE base takes llama.cpp's defaults", () => {
    const bare = path.join(tmp, 'bare.gguf');
    const g = openGguf(file);
    const dropped = ['attention.sliding_window', 'attention.sliding_window_pattern', 'attn_logit_softcapping', 'final_logit_softcapping', 'rope.freq_base', 'rope.freq_base_swa'];
    const entries = entriesOf(g, (key) => dropped.some((d) => key === `gemma2.${d}`));
    writeGgufFile(bare, entries, g.tensors.map((t) => ({ name: t.name, dims: t.dims, type: t.type, data: () => readGgufTensorBytes(t) })));
    const c = Checkpoint.open(bare).config;
    expect([c.gemma, c.sliding, c.ropeTheta]).toEqual([{ attentionScale: 1 / 4, attentionSoftcap: 50, finalSoftcap: 30 }, { window: 4096, layers: [true, false, true], ropeTheta: 10000 }, 10000]);
  });

  it('a merged folder of it (config.json made from the metadata) reads back the same layout, model_type gemma2', () => {
    const { config, written, read } = ggufFolderConfig(file, tmp);
    expect([written.model_type, written.attn_logit_softcapping, written.final_logit_softcapping, written.rope_local_base_freq]).toEqual(['gemma2', 1, 2, undefined]);
    expect(read).toMatchObject({ family: 'gemma2', gemma: config.gemma, sliding: config.sliding, ropeTheta: config.ropeTheta });
  });
});
