// GLM-4 as GGUF (src-main/model/gguf/model.ts): a tiny GLM-4 folder (tools/tiny-models.ts: q/k/v
// biases, half of each head turned over adjacent pairs, gate/up fused, four norms) written by the
// benches' writer as llama.cpp's converter writes `glm4` (q/k not permuted, rope.dimension_count
// half the head, ffn_up holding gate and up) reads back as the folder's config and scores as the
// folder does; the model list calls it loadable; GLM-4V's M-RoPE is refused in one line; a `glm4`
// tokenizer adds no BOS, as llama.cpp's does not. llama.cpp itself: test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { openGguf, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { GGUF_TYPE, entriesOf, writeGgufFile } from '../../src-main/model/gguf/writer.js';
import { ggufTokenizer } from '../../src-main/model/gguf/tokenizer-json.js';
import { scoreRow } from '../helpers/score-model.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-glm4-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const dir = writeTinyModel(path.join(tmp, 'glm4'), { family: 'glm4', numLayers: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 9 }).dir;
const file = path.join(tmp, 'glm4-f32.gguf');
writeGguf(dir, file, { type: 'f32' });
const ROW = { inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60, 8, 30], responseStart: 1 };
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));

/** `file` rewritten with `entries` changed. */
function rewritten(out: string, change: (entries: ReturnType<typeof entriesOf>) => void): string {
  const g = openGguf(file);
  const entries = entriesOf(g, () => false);
  change(entries);
  writeGgufFile(out, entries, g.tensors.map((t) => ({ name: t.name, dims: t.dims, type: t.type, data: () => readGgufTensorBytes(t) })));
  return out;
}

describe('a GLM-4 GGUF', () => {
  it("reads the folder's layout and scores as the folder does; the model list calls it loadable", async () => {
    const want = readModelConfig(dir);
    expect(want).toMatchObject({ architecture: 'Glm4ForCausalLM', rotaryDim: 8, ropeInterleaved: true, sandwichNorms: 'glm4', qkvBias: true, oBias: false });
    const got = Checkpoint.open(file).config;
    expect(got).toMatchObject({ architecture: 'Glm4ForCausalLM', rotaryDim: 8, ropeInterleaved: true, sandwichNorms: 'glm4', qkvBias: true, oBias: false });
    expect(maxDiff(await scoreRow(file, ROW), await scoreRow(dir, ROW))).toBeLessThan(1e-5);
    expect(inspectModel(file)).toMatchObject({ architecture: 'glm4', loadable: true, reason: null });
    expect(openGguf(file).tensors.map((t) => t.name)).toContain('blk.0.ffn_up.weight');
  });

  it("refuses GLM-4V's M-RoPE in one line, in the model list too", () => {
    const mrope = rewritten(path.join(tmp, 'mrope.gguf'), (entries) => entries.push({ key: 'glm4.rope.dimension_sections', type: GGUF_TYPE.array, elemType: GGUF_TYPE.i32, value: [8, 12, 12, 0] }));
    expect(() => Checkpoint.open(mrope)).toThrow(/glm4\.rope\.dimension_sections \(M-RoPE, GLM-4V's\) is not supported/);
    expect(inspectModel(mrope)).toMatchObject({ loadable: false, reason: "glm4.rope.dimension_sections (M-RoPE, GLM-4V's) is not supported" });
  });

  it("a glm4 tokenizer adds no BOS, whatever add_bos_token says (llama.cpp's rule; the template writes [gMASK]<sop>)", () => {
    const set = (entries: ReturnType<typeof entriesOf>, key: string, type: number, value: string | number | boolean) => {
      const e = entries.find((x) => x.key === key);
      if (e) e.value = value;
      else entries.push({ key, type, value });
    };
    const asIs = rewritten(path.join(tmp, 'bos.gguf'), (entries) => {
      set(entries, 'tokenizer.ggml.add_bos_token', GGUF_TYPE.bool, true);
      set(entries, 'tokenizer.ggml.bos_token_id', GGUF_TYPE.u32, 3);
    });
    expect(ggufTokenizer(openGguf(asIs)).config.add_bos_token).toBe(true); // the same file under another pre-tokenizer adds it
    const glm = rewritten(path.join(tmp, 'glm-tok.gguf'), (entries) => {
      set(entries, 'tokenizer.ggml.pre', GGUF_TYPE.string, 'glm4');
      set(entries, 'tokenizer.ggml.add_bos_token', GGUF_TYPE.bool, true);
      set(entries, 'tokenizer.ggml.bos_token_id', GGUF_TYPE.u32, 3);
    });
    expect(ggufTokenizer(openGguf(glm)).config.add_bos_token).toBe(false);
  });
});
