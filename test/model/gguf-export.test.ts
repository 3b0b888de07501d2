// export-model's pieces without llama.cpp (that check is test/interop/llama-cpp-export.test.ts):
// the GGUF writer against the reader, the F16/Q8_0 encoders against the dequantiser, the q/k
// row permutation against its inverse, the adapter file's metadata and names, the Modelfile's
// template mapping and Ollama-store names, and the one-line refusals.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { UserError } from '../../src-shared/types.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { dequantize } from '../../src-main/model/gguf/dequantize.js';
import { encodeF16, encodeQ4_0, encodeQ8_0 } from '../../src-main/model/gguf/encode.js';
import { floatToHalf, halfToFloat } from '../../src-main/model/half.js';
import { permuteRows, unpermuteRows } from '../../src-main/model/gguf/model.js';
import { readGgufHeader } from '../../src-main/model/gguf/reader.js';
import { entriesOf, writeGgufFile } from '../../src-main/model/gguf/writer.js';
import { buildModelfile, mapChatTemplate, ollamaModelForBlob } from '../../src-main/model/ollama-modelfile.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { exportModel } from '../../src-main/train/model-export.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { str, writeGguf as writeRawGguf } from './gguf-writer.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-export-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function tinyGguf(name: string, family: 'llama' | 'qwen2' = 'llama', hiddenSize = 64): string {
  const dir = path.join(tmp, name);
  writeTinyModel(dir, { family, numHeads: 4, numKvHeads: 2, hiddenSize, headDim: 16, intermediateSize: 96, seed: 3 });
  const file = path.join(tmp, `${name}.gguf`);
  writeGguf(dir, file, { type: 'f32' });
  return file;
}

function adapterFor(model: string, dir: string): void {
  const specs = loraSpecs(Checkpoint.open(model).config, ['q', 'k', 'v']);
  const weights = initLora(specs, 2, 1);
  for (const spec of specs) weights.set(loraBKey(spec), Float32Array.from({ length: spec.outFeatures * 2 }, (_, i) => Math.sin(i + spec.layer))); // B ≠ 0, so the permutation shows
  writeAdapter(dir, { lora: { r: 2, alpha: 4, targets: ['q', 'k', 'v'] }, specs, weights, baseModel: model });
}

function userError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    const msg = (err as Error).message;
    expect(msg.split('\n')).toHaveLength(1);
    return msg;
  }
  throw new Error('expected a UserError');
}

describe('GGUF writing', () => {
  it('copies a file: metadata of every type (arrays included) and tensors read back as written', () => {
    const base = tinyGguf('copy');
    const g = readGgufHeader(base);
    const out = path.join(tmp, 'copy-out.gguf');
    writeGgufFile(out, entriesOf(g), g.tensors.map((t) => ({ name: t.name, dims: t.dims, type: t.type, data: () => fs.readFileSync(t.file).subarray(t.begin, t.end) })));
    const back = readGgufHeader(out);
    expect([...back.metadata]).toEqual([...g.metadata]);
    expect([...back.metadataTypes]).toEqual([...g.metadataTypes]);
    expect(back.tensors.map((t) => [t.name, t.dims, t.type])).toEqual(g.tensors.map((t) => [t.name, t.dims, t.type]));
    expect(fs.readFileSync(out).subarray(back.dataOffset)).toEqual(fs.readFileSync(base).subarray(g.dataOffset));
    expect(fs.statSync(out).mode & 0o777).toBe(0o600);
  });

  it('encodes F16 (round to nearest even) and Q8_0 as the dequantiser reads them', () => {
    for (const v of [0, 1, -2.5, 65504, 1e-5, 6.1e-5, 3.14159, -1e-8]) expect(Math.abs(halfToFloat(floatToHalf(v)) - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -11 + 2 ** -25);
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00); // a tie goes to even
    const x = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i) * (i % 7));
    expect(dequantize(encodeF16(x), 1, 64, 'f16')).toEqual(Float32Array.from(x, (v) => halfToFloat(floatToHalf(v))));
    const q = dequantize(encodeQ8_0(x), 8, 64, 'q8_0');
    for (let b = 0; b < 2; b++) {
      const amax = Math.max(...x.subarray(b * 32, b * 32 + 32).map(Math.abs));
      for (let i = b * 32; i < b * 32 + 32; i++) expect(Math.abs(q[i]! - x[i]!)).toBeLessThanOrEqual(amax / 127 / 2 + amax * 1e-3);
    }
  });

  it('encodes Q4_0 as the dequantiser reads them: the largest-magnitude value exactly, the rest within a step of it / 8', () => {
    const x = Float32Array.from({ length: 96 }, (_, i) => Math.sin(i * 0.7) * (i < 32 ? 1 : i < 64 ? -0.01 : 30));
    const q = dequantize(encodeQ4_0(x), 2, 96, 'q4_0');
    for (let b = 0; b < 3; b++) {
      const block = Array.from(x.subarray(b * 32, b * 32 + 32)), amax = Math.max(...block.map(Math.abs));
      const at = b * 32 + block.findIndex((v) => Math.abs(v) === amax);
      expect(Math.abs(q[at]! - x[at]!)).toBeLessThanOrEqual(amax * 1e-3); // code 0: d · −8 = m, up to d's fp16 rounding
      // Code 15 is the top: a value near −m (x / d ≈ 8) is clamped to 7 d, a whole step off.
      for (let i = b * 32; i < b * 32 + 32; i++) expect(Math.abs(q[i]! - x[i]!)).toBeLessThanOrEqual(amax / 8 + amax * 1e-3);
    }
  });

  it("permuteRows is the inverse of the reader's unpermuteRows", () => {
    const w = Float32Array.from({ length: 8 * 16 * 3 }, (_, i) => i);
    expect(unpermuteRows(permuteRows(w, 8, 3), 8, 3)).toEqual(w);
    expect(permuteRows(w, 8, 3)).not.toEqual(w);
  });
});

describe('export-model', () => {
  it("writes llama.cpp's adapter metadata and names, and a Modelfile", () => {
    const base = tinyGguf('named');
    const run = path.join(tmp, 'My Run');
    adapterFor(base, run);
    const r = exportModel({ run, model: base, out: path.join(tmp, 'named-out') });
    const g = readGgufHeader(r.adapterGguf);
    expect(g.metadata.get('general.type')).toBe('adapter');
    expect(g.metadata.get('adapter.type')).toBe('lora');
    expect(g.metadata.get('general.architecture')).toBe('llama');
    expect(g.metadata.get('adapter.lora.alpha')).toBe(4);
    const a = g.tensors.find((t) => t.name === 'blk.0.attn_q.weight.lora_a')!;
    const b = g.tensors.find((t) => t.name === 'blk.0.attn_q.weight.lora_b')!;
    expect(a.dims).toEqual([64, 2]);
    expect(b.dims).toEqual([2, 64]);
    expect(g.tensors).toHaveLength(2 * 3 * 2);
    expect(r.ollamaName).toBe('hindsight-my-run');
    expect(r.ollamaCommand).toBe(`ollama create hindsight-my-run -f ${r.modelfile}`);
    expect(fs.readFileSync(r.modelfile, 'utf8')).toContain(`FROM ${path.resolve(base)}\nADAPTER ${r.adapterGguf}\n`);

    // From the Hugging Face folder the GGUF was written from: the same tensors, byte for byte
    // (names and Llama's q/k permutation from the config alone), and the folder's ChatML template.
    const fromFolder = exportModel({ run, model: path.join(tmp, 'named'), out: path.join(tmp, 'named-folder-out') });
    const f = readGgufHeader(fromFolder.adapterGguf);
    expect(f.tensors.map((t) => [t.name, t.dims])).toEqual(g.tensors.map((t) => [t.name, t.dims]));
    expect(fs.readFileSync(fromFolder.adapterGguf).subarray(f.dataOffset)).toEqual(fs.readFileSync(r.adapterGguf).subarray(g.dataOffset));
    const text = fs.readFileSync(fromFolder.modelfile, 'utf8');
    expect(text).toContain(`FROM ${path.join(tmp, 'named')}`);
    expect(text).toContain('<|im_start|>{{ .Role }}');
    expect(text).toContain('PARAMETER stop "<|im_end|>"');
    expect(fromFolder.notes[0]).toMatch(/Hugging Face folder/);
  });

  it('refuses with one line: no adapter, a base of other shapes, an unsupported architecture, --merged on a folder', () => {
    const base = tinyGguf('refuse');
    const empty = path.join(tmp, 'empty-run');
    fs.mkdirSync(path.join(empty, 'checkpoints'), { recursive: true });
    expect(userError(() => exportModel({ run: empty, model: base, out: path.join(tmp, 'x') }))).toMatch(/holds no adapter.*has not finished/);
    const run = path.join(tmp, 'refuse-run');
    adapterFor(base, run);
    const other = tinyGguf('other', 'llama', 96);
    expect(userError(() => exportModel({ run, model: other, out: path.join(tmp, 'x') }))).toMatch(/shape/);
    const gemma = path.join(tmp, 'gemma.gguf');
    writeRawGguf(gemma, { 'general.architecture': str('gemma') });
    expect(userError(() => exportModel({ run, model: gemma, out: path.join(tmp, 'x') }))).toMatch(/architecture 'gemma' is not supported/);
    expect(userError(() => exportModel({ run, model: path.join(tmp, 'refuse'), out: path.join(tmp, 'x'), merged: 'f16' }))).toMatch(/merged GGUF \(--merged\) needs a GGUF base/);
  });

  it('maps ChatML and Llama 3 templates, and leaves the rest to Ollama with a note', () => {
    const smol = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    const m = mapChatTemplate(smol);
    expect(m.kind).toBe('chatml');
    expect(m.kind === 'chatml' && m.system).toBe('You are a helpful AI assistant named SmolLM, trained by Hugging Face');
    const raw = mapChatTemplate(smol.replace(/\\n/g, '\n')); // as SmolLM2's GGUF stores it: real newlines
    expect(raw.kind === 'chatml' && raw.system).toBe('You are a helpful AI assistant named SmolLM, trained by Hugging Face');
    expect(mapChatTemplate("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}").kind).toBe('llama3');
    expect(mapChatTemplate("{{ 'Cutting Knowledge Date' }}<|start_header_id|>").kind).toBeNull();
    expect(mapChatTemplate('[INST] {{ message }} [/INST]').kind).toBeNull();
    const mf = buildModelfile({ base: '/m.gguf', adapter: '/a.gguf', chatTemplate: '[INST]', stopTokens: ['</s>'] });
    expect(mf.text).not.toContain('TEMPLATE');
    expect(mf.text).toContain('PARAMETER stop "</s>"');
    expect(mf.notes[0]).toMatch(/TEMPLATE is left out/);
  });

  it("names a base from Ollama's store by its model name", () => {
    const store = path.join(tmp, 'ollama');
    const digest = 'a'.repeat(64);
    fs.mkdirSync(path.join(store, 'blobs'), { recursive: true });
    fs.mkdirSync(path.join(store, 'manifests/registry.ollama.ai/library/qwen3'), { recursive: true });
    fs.writeFileSync(path.join(store, 'blobs', `sha256-${digest}`), 'x');
    fs.writeFileSync(path.join(store, 'manifests/registry.ollama.ai/library/qwen3/0.6b'), JSON.stringify({ layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${digest}` }] }));
    expect(ollamaModelForBlob(path.join(store, 'blobs', `sha256-${digest}`))).toBe('qwen3:0.6b');
    const mf = buildModelfile({ base: path.join(store, 'blobs', `sha256-${digest}`), adapter: '/a.gguf', stopTokens: [] });
    expect(mf.text).toContain('FROM qwen3:0.6b');
  });
});
