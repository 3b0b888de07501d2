// Phi-3 as GGUF (src-main/model/gguf/model.ts): a tiny Phi-3 folder (fused qkv_proj and
// gate_up_proj, LongRoPE, half of each head rotated, a sliding window; tools/tiny-models.ts)
// written by the benches' writer as llama.cpp's converter writes phi3 (attn_qkv, ffn_up,
// rope_factors_short/long, attn_factor, no q/k permutation) reads back as the folder's config and
// weights, and scores as the folder does, F32 and Q8_0. The adapter export writes fused pairs
// (B times the parts, for llama.cpp's alpha / rank), and the merged GGUF puts each part's update
// into its rows of the fused tensor. llama.cpp itself: test/interop/llama-cpp-export.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import { Checkpoint, readModelConfig, type ModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { joinFusedTensors } from '../../src-main/model/fused-projections.js';
import { writeGgufCompanionFiles } from '../../src-main/model/gguf/folder-files.js';
import { readGgufTensor } from '../../src-main/model/gguf/model.js';
import { ggufNativeBlocks } from '../../src-main/model/gguf/native-blocks.js';
import { readGgufHeader, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { dequantize as dequantizeGgml } from '../../src-main/model/gguf/dequantize.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { inspectModel } from '../../src-main/model/model-inspect.js';
import { dequantize } from '../../src-main/model/quantize.js';
import { writeSafetensors } from '../../src-main/model/safetensors.js';
import { loraAKey, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { exportModel } from '../../src-main/train/model-export.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import type { LinearTarget } from '../../src-main/model/decoder.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { f32, f32Bytes, modelRefusal, str, u32 } from './gguf-writer.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-phi3-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const dir = path.join(tmp, 'phi3');
const tiny = writeTinyModel(dir, { family: 'phi3', numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 7 });
const files = { f32: path.join(tmp, 'phi3-f32.gguf'), q8_0: path.join(tmp, 'phi3-q8_0.gguf') };
writeGgufFromFolder(dir, files.f32, { type: 'f32' });
writeGgufFromFolder(dir, files.q8_0, { type: 'q8_0' });
const ROWS = [{ inputIds: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60], responseStart: 1 }, { inputIds: [30, 31, 8, 8, 19, 50, 2], responseStart: 3 }];

/** The f32 values a GGUF file stores for `name`, as ggml lays them out. */
function stored(file: string, name: string): Float32Array {
  const info = readGgufHeader(file).tensors.find((t) => t.name === name)!;
  return dequantizeGgml(readGgufTensorBytes(info), info.type, info.dims.reduce((a, d) => a * d, 1), name);
}

async function scores(model: string, options = {}): Promise<number[][]> {
  const m = await LocalModel.load(model, options);
  try {
    return await m.score(ROWS);
  } finally {
    await m.close();
  }
}

const maxDiff = (a: number[][], b: number[][]) => Math.max(...a.flatMap((row, i) => row.map((v, j) => Math.abs(v - b[i]![j]!))));

describe('a Phi-3 GGUF', () => {
  it('is listed as loadable, at the context Hindsight runs it at', () => {
    const facts = inspectModel(files.q8_0);
    expect(facts).toMatchObject({ architecture: 'phi3', loadable: true, reason: null, contextLength: readModelConfig(dir).maxPositionEmbeddings });
    expect(facts.contextLength).toBeLessThan(tiny.config.max_position_embeddings as number); // LongRoPE's original context
  });

  it("reads the folder's config: fused projections, partial rotation, LongRoPE's short factors, the context capped", () => {
    const want = readModelConfig(dir);
    expect(want.maxPositionEmbeddings).toBe(512); // original context 512 of 1024, window 1023
    for (const file of Object.values(files)) {
      const got = Checkpoint.open(file).config;
      const round = (c: ModelConfig) => ({ ...c, rmsNormEps: Math.fround(c.rmsNormEps), ropeScaling: c.ropeScaling?.type === 'longrope' ? { ...c.ropeScaling, attentionFactor: Math.fround(c.ropeScaling.attentionFactor) } : c.ropeScaling });
      expect(round(got)).toEqual(round(want));
      expect(got).toMatchObject({ family: 'llama', architecture: 'Phi3ForCausalLM', rotaryDim: 8, maxPositionEmbeddings: 512 });
    }
    const meta = readGgufHeader(files.f32).metadata;
    expect(meta.get('general.architecture')).toBe('phi3');
    expect([meta.get('phi3.context_length'), meta.get('phi3.rope.scaling.original_context_length'), meta.get('phi3.attention.sliding_window'), meta.get('phi3.rope.dimension_count')]).toEqual([1024, 512, 1023, 8]);
    expect(meta.has('phi3.attention.key_length')).toBe(false); // as the converter: llama.cpp takes hidden / heads
  });

  it("reads every weight as the folder's Checkpoint gives it: the fused tensors cut into parts, rows not permuted", () => {
    const folder = Checkpoint.open(dir), gguf = Checkpoint.open(files.f32);
    expect(gguf.tensorNames.sort()).toEqual(folder.tensorNames.sort());
    expect(gguf.tensorNames.some((n) => /qkv_proj|gate_up_proj/.test(n))).toBe(false);
    for (const name of folder.tensorNames) {
      const shape = folder.entry(name).shape;
      const [want, got] = [folder.readFloat32(name, shape), gguf.readFloat32(name, shape)];
      expect(got.every((v, i) => Object.is(v, want[i])), name).toBe(true);
    }
    // The file holds the fused matrices as the folder does (q, k, v rows; gate, then up).
    const qkv = tiny.weights.get('model.layers.1.self_attn.qkv_proj.weight')!.data;
    expect(stored(files.f32, 'blk.1.attn_qkv.weight')).toEqual(qkv);
    expect([...stored(files.f32, 'rope_factors_short.weight')]).toEqual([1, 1.5, 2, 2.5]);
  });

  it('scores as the folder does, F32 exactly and Q8_0 as a folder of its dequantised weights', async () => {
    const folder = await scores(dir);
    const f32Diff = maxDiff(await scores(files.f32), folder);
    console.log(`tiny Phi-3: the F32 GGUF vs its folder, max |Δ log-prob| ${f32Diff.toExponential(2)}`);
    expect(f32Diff).toBeLessThan(1e-5);

    // Q8_0: each part's rows are the fused tensor's blocks, dequantised as the whole is.
    const q8 = Checkpoint.open(files.q8_0);
    const whole = stored(files.q8_0, 'blk.0.ffn_up.weight');
    const up = q8.readFloat32('model.layers.0.mlp.up_proj.weight', [96, 64]);
    expect(up).toEqual(whole.subarray(96 * 64));
    // The same weights as a folder (a merged model of a GGUF base is written so: companion files, fused tensors joined).
    const out = path.join(tmp, 'phi3-q8_0-folder');
    fs.mkdirSync(out);
    writeGgufCompanionFiles(q8.gguf!, out);
    const tensors: Record<string, { dtype: 'F32'; shape: number[]; data: Float32Array }> = {};
    for (const name of q8.tensorNames) tensors[name] = { dtype: 'F32', shape: q8.entry(name).shape, data: q8.readFloat32(name, q8.entry(name).shape) };
    joinFusedTensors(q8.config, tensors);
    expect(Object.keys(tensors)).toContain('model.layers.0.self_attn.qkv_proj.weight');
    writeSafetensors(path.join(out, 'model.safetensors'), tensors, { format: 'pt' });
    expect(readModelConfig(out)).toEqual({ ...q8.config, eosTokenIds: readModelConfig(out).eosTokenIds });
    const [fromFile, fromFolder] = [await scores(files.q8_0), await scores(out)];
    console.log(`tiny Phi-3: the Q8_0 GGUF vs a folder of its weights, max |Δ log-prob| ${maxDiff(fromFile, fromFolder).toExponential(2)}; vs the F32 folder ${maxDiff(fromFile, folder).toFixed(3)}`);
    expect(maxDiff(fromFile, fromFolder)).toBeLessThan(1e-5);
    // Q8_0's rounding only, which a random tiny model amplifies: measured 0.10 nats (0.08 for the tiny Llama).
    expect(maxDiff(fromFile, folder)).toBeLessThan(0.2);
  }, 120_000);

  it('runs the Q8_0 parts on their own blocks under --quantize int8', async () => {
    const ckpt = Checkpoint.open(files.q8_0);
    for (const name of ['model.layers.0.self_attn.k_proj.weight', 'model.layers.1.mlp.gate_proj.weight', 'model.layers.1.mlp.up_proj.weight']) {
      const [n, k] = ckpt.entry(name).shape as [number, number];
      const native = ggufNativeBlocks(ckpt.gguf!, name, n, k, 4)!;
      const fromGgml = readGgufTensor(ckpt.gguf!.tensors.get(name)!);
      expect(dequantize(native.read(), n, k, native.scheme).every((v, i) => Object.is(v, fromGgml[i])), name).toBe(true);
    }
    expect(maxDiff(await scores(files.q8_0, { quantize: 'int8' }), await scores(files.q8_0))).toBeLessThan(0.05);
  }, 120_000);

  it('is refused in one line where it is not as the converter writes phi3', () => {
    const base = {
      'general.architecture': str('phi3'), 'phi3.embedding_length': u32(8), 'phi3.block_count': u32(1), 'phi3.feed_forward_length': u32(16),
      'phi3.attention.head_count': u32(2), 'phi3.attention.layer_norm_rms_epsilon': f32(1e-5), 'phi3.context_length': u32(64), 'phi3.rope.dimension_count': u32(2),
    };
    const t = (name: string, n: number) => ({ name, dims: [n], type: 0, bytes: f32Bytes(new Array(n).fill(1)) });
    const embd = { name: 'token_embd.weight', dims: [8, 4], type: 0, bytes: f32Bytes(new Array(32).fill(0)) };
    const open = (name: string, meta: object, tensors: object[]) => modelRefusal(path.join(tmp, name), meta as never, tensors as never);
    expect(open('separate.gguf', base, [embd, t('blk.0.attn_q.weight', 8)])).toMatch(/tensor 'blk\.0\.attn_q\.weight' \(F32\) is not part of a phi3 model/);
    expect(open('factors.gguf', base, [embd, t('rope_factors_short.weight', 3)])).toMatch(/rope_factors_short\.weight must hold 1 positive numbers/);
    expect(open('odd.gguf', { ...base, 'phi3.rope.dimension_count': u32(3) }, [embd])).toMatch(/phi3\.rope\.dimension_count 3 must be an even number/);
    expect(open('bias.gguf', base, [embd, t('blk.0.attn_qkv.bias', 8)])).toMatch(/a bias on Phi-3's fused projections is not supported/);
  });
});

describe('export-model on a Phi-3 base', () => {
  const TARGETS: LinearTarget[] = ['q', 'v', 'o', 'up']; // k and gate left alone: zero blocks in the fused pairs
  const r = 2, alpha = 6;
  const run = path.join(tmp, 'phi3-run');
  const config = Checkpoint.open(files.f32).config;
  const specs = loraSpecs(config, TARGETS);
  const weights = new Map<string, Float32Array>();
  specs.forEach((spec, s) => {
    weights.set(loraAKey(spec), Float32Array.from({ length: r * spec.inFeatures }, (_, i) => Math.sin(i + 3 * s) * 0.2));
    weights.set(loraBKey(spec), Float32Array.from({ length: spec.outFeatures * r }, (_, i) => Math.cos(i + s) * 0.2));
  });
  writeAdapter(run, { lora: { r, alpha, targets: TARGETS }, specs, weights, baseModel: files.f32, model: config });

  it("writes the fused pairs under llama.cpp's names, B times the parts, the same from the GGUF and from the folder", () => {
    const fromGguf = exportModel({ run, model: files.f32, out: path.join(tmp, 'phi3-out') });
    const g = readGgufHeader(fromGguf.adapterGguf);
    expect(g.metadata.get('general.architecture')).toBe('phi3');
    expect(g.metadata.get('adapter.lora.alpha')).toBe(alpha);
    const dims = Object.fromEntries(g.tensors.map((t) => [t.name, t.dims]));
    expect(dims['blk.0.attn_qkv.weight.lora_a']).toEqual([64, 3 * r]);
    expect(dims['blk.0.attn_qkv.weight.lora_b']).toEqual([3 * r, 128]);
    expect(dims['blk.1.ffn_up.weight.lora_b']).toEqual([2 * r, 192]);
    expect(dims['blk.1.attn_output.weight.lora_b']).toEqual([r, 64]);
    expect(g.tensors).toHaveLength(2 * 3 * 2);

    const read = (name: string) => stored(fromGguf.adapterGguf, name);
    const spec = (layer: number, target: LinearTarget) => specs.find((s) => s.layer === layer && s.target === target)!;
    // attn_qkv's A: q's rows, k's (zero), v's; its B: block-diagonal, times 3.
    const a = read('blk.1.attn_qkv.weight.lora_a'), b = read('blk.1.attn_qkv.weight.lora_b');
    expect(a.subarray(0, r * 64)).toEqual(weights.get(loraAKey(spec(1, 'q'))));
    expect(a.subarray(r * 64, 2 * r * 64).every((v) => v === 0)).toBe(true);
    expect(a.subarray(2 * r * 64)).toEqual(weights.get(loraAKey(spec(1, 'v'))));
    const bv = weights.get(loraBKey(spec(1, 'v')))!;
    for (let o = 0; o < 32; o++) {
      const row = b.subarray((96 + o) * 3 * r, (97 + o) * 3 * r); // v's rows follow q's 64 and k's 32
      expect([...row]).toEqual([0, 0, 0, 0, Math.fround(3 * bv[o * r]!), Math.fround(3 * bv[o * r + 1]!)]);
    }
    // o_proj, not fused: as trained.
    expect(read('blk.1.attn_output.weight.lora_b')).toEqual(weights.get(loraBKey(spec(1, 'o'))));

    const fromFolder = exportModel({ run, model: dir, out: path.join(tmp, 'phi3-folder-out') });
    const f = readGgufHeader(fromFolder.adapterGguf);
    expect(f.metadata.get('general.architecture')).toBe('phi3');
    expect(f.tensors.map((t) => [t.name, t.dims])).toEqual(g.tensors.map((t) => [t.name, t.dims]));
    expect(fs.readFileSync(fromFolder.adapterGguf).subarray(f.dataOffset)).toEqual(fs.readFileSync(fromGguf.adapterGguf).subarray(g.dataOffset));
  });

  it("merges each part's update into its rows of the fused tensor (--merged f16)", () => {
    const out = exportModel({ run, model: files.f32, out: path.join(tmp, 'phi3-merged-out'), merged: 'f16' });
    const merged = Checkpoint.open(out.mergedGguf!), base = Checkpoint.open(files.f32);
    expect(merged.config).toEqual(base.config);
    expect(readGgufHeader(out.mergedGguf!).tensors.filter((t) => /attn_qkv|ffn_up/.test(t.name)).map((t) => t.dims)).toEqual([[64, 128], [64, 192], [64, 128], [64, 192]]);
    const scaling = alpha / r;
    for (const layer of [0, 1]) {
      for (const target of ['q', 'k', 'v', 'gate', 'up'] as const) {
        const name = `model.layers.${layer}.${{ q: 'self_attn.q_proj', k: 'self_attn.k_proj', v: 'self_attn.v_proj', gate: 'mlp.gate_proj', up: 'mlp.up_proj' }[target]}.weight`;
        const shape = base.entry(name).shape as [number, number];
        const want = base.readFloat32(name, shape);
        const spec = specs.find((s) => s.layer === layer && s.target === target);
        if (spec) {
          const A = weights.get(loraAKey(spec))!, B = weights.get(loraBKey(spec))!;
          for (let o = 0; o < shape[0]; o++) for (let i = 0; i < shape[1]; i++) {
            let d = 0;
            for (let k = 0; k < r; k++) d += B[o * r + k]! * A[k * shape[1] + i]!;
            want[o * shape[1] + i] += scaling * d;
          }
        }
        const got = merged.readFloat32(name, shape);
        const worst = Math.max(...got.map((v, i) => Math.abs(v - want[i]!) / Math.max(1, Math.abs(want[i]!))));
        expect(worst, name).toBeLessThan(1e-3); // F16's rounding
      }
    }
  });
});
