// LoRA tensors, initialisation and PEFT adapter folders: names, shapes, bounds, round trips
// and the errors a bad adapter gets. Also the merged export against unmerged LoRA scoring.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { UserError } from '../../src-shared/types.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { readSafetensorsHeader } from '../../src-main/model/safetensors.js';
import { writeSafetensors } from '../../src-main/model/safetensors.js';
import { initLora, kaimingBound, loraAKey, loraBKey, loraSpecs, parseTargets } from '../../src-main/train/lora.js';
import { mergeInto, scoreWithAdapter, writeMergedModel } from '../../src-main/train/merge.js';
import { readAdapter, writeAdapter } from '../../src-main/train/peft.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-adapter-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const fresh = (name: string) => fs.mkdtempSync(path.join(tmp, name + '-'));

describe('LoRA specs and initialisation', () => {
  it('names every targeted projection with its PEFT key and sizes', () => {
    const model = writeTinyModel(fresh('m'), { family: 'qwen2', numLayers: 2 });
    const config = Checkpoint.open(model.dir).config;
    const specs = loraSpecs(config, ['q', 'k', 'v', 'o', 'gate', 'up', 'down']);
    expect(specs).toHaveLength(14);
    expect(specs.slice(0, 7).map((s) => s.module)).toEqual([
      'base_model.model.model.layers.0.self_attn.q_proj', 'base_model.model.model.layers.0.self_attn.k_proj',
      'base_model.model.model.layers.0.self_attn.v_proj', 'base_model.model.model.layers.0.self_attn.o_proj',
      'base_model.model.model.layers.0.mlp.gate_proj', 'base_model.model.model.layers.0.mlp.up_proj',
      'base_model.model.model.layers.0.mlp.down_proj',
    ]);
    // Each spec's sizes are those of the HF weight it adapts ([out, in]).
    for (const s of specs) {
      const w = model.weights.get(`${s.module.replace('base_model.model.', '')}.weight`)!;
      expect(w.shape).toEqual([s.outFeatures, s.inFeatures]);
    }
    expect(loraSpecs(config, ['v', 'q']).map((s) => s.target)).toEqual(['q', 'v', 'q', 'v']);
  });

  it('A is kaiming-uniform (bound 1/√in, as torch with a=√5), B is zero, and the seed decides the values', () => {
    const config = Checkpoint.open(writeTinyModel(fresh('m'), { family: 'llama', numLayers: 1, intermediateSize: 96 }).dir).config;
    const specs = loraSpecs(config, parseTargets('all'));
    const w = initLora(specs, 8, 7);
    for (const s of specs) {
      const a = w.get(loraAKey(s))!;
      const bound = kaimingBound(s.inFeatures);
      expect(bound).toBeCloseTo(Math.sqrt(3) * Math.sqrt(2 / (1 + 5)) / Math.sqrt(s.inFeatures), 12);
      expect(a.length).toBe(8 * s.inFeatures);
      const max = Math.max(...a.map(Math.abs));
      expect(max).toBeLessThanOrEqual(bound);
      expect(max).toBeGreaterThan(0.95 * bound); // fills the interval, not a narrower one
      const mean = a.reduce((x, y) => x + y, 0) / a.length;
      const variance = a.reduce((x, y) => x + y * y, 0) / a.length;
      expect(Math.abs(mean)).toBeLessThan(0.1 * bound);
      expect(variance).toBeCloseTo((bound * bound) / 3, 2); // U(−b, b) has variance b²/3
      expect(w.get(loraBKey(s))!.every((x) => x === 0)).toBe(true);
    }
    const again = initLora(specs, 8, 7);
    const other = initLora(specs, 8, 8);
    const key = loraAKey(specs[0]!);
    expect(Buffer.from(again.get(key)!.buffer).equals(Buffer.from(w.get(key)!.buffer))).toBe(true);
    expect(Buffer.from(other.get(key)!.buffer).equals(Buffer.from(w.get(key)!.buffer))).toBe(false);
  });

  it('parses --targets in any order and names the bad one', () => {
    expect(parseTargets('down,q,v_proj')).toEqual(['q', 'v', 'down']);
    expect(() => parseTargets('q,lm_head')).toThrow(/unknown LoRA target 'lm_head'/);
  });
});

describe('PEFT adapter folders', () => {
  it('writes PEFT keys, shapes and config, and reads back the same bits', () => {
    const model = writeTinyModel(fresh('m'), { family: 'qwen3', numLayers: 2 });
    const config = Checkpoint.open(model.dir).config;
    const lora = { r: 4, alpha: 8, targets: parseTargets('q,v,down') };
    const specs = loraSpecs(config, lora.targets);
    const weights = initLora(specs, 4, 1);
    for (const [k, v] of weights) if (k.endsWith('lora_B.weight')) v.forEach((_, i) => (v[i] = Math.sin(i + k.length)));
    const dir = fresh('adapter');
    writeAdapter(dir, { lora, specs, weights, baseModel: model.dir });
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'adapter_config.json'), 'utf8'));
    expect(cfg).toMatchObject({ peft_type: 'LORA', task_type: 'CAUSAL_LM', r: 4, lora_alpha: 8, lora_dropout: 0, bias: 'none', base_model_name_or_path: model.dir });
    expect(cfg.target_modules).toEqual(['q_proj', 'v_proj', 'down_proj']);
    const header = readSafetensorsHeader(path.join(dir, 'adapter_model.safetensors'));
    const shapes = Object.fromEntries(header.tensors.map((t) => [t.name, [t.dtype, ...t.shape]]));
    expect(shapes['base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight']).toEqual(['F32', 4, config.hiddenSize]);
    expect(shapes['base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight']).toEqual(['F32', config.numHeads * config.headDim, 4]);
    expect(shapes['base_model.model.model.layers.0.mlp.down_proj.lora_A.weight']).toEqual(['F32', 4, config.intermediateSize]);
    expect(header.tensors).toHaveLength(12);
    expect(fs.readdirSync(dir).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']); // no temp files left
    const back = readAdapter(dir, config);
    expect(back.lora).toEqual(lora);
    for (const [k, v] of weights) expect(Buffer.from(back.weights.get(k)!.buffer).equals(Buffer.from(v.buffer))).toBe(true);
  });

  it('writes a fused-projection model\'s parts as its fused modules (Phi-3: qkv_proj, gate_up_proj) and reads them back to the bit', () => {
    const model = writeTinyModel(fresh('phi3'), { family: 'phi3', numLayers: 2 });
    const config = Checkpoint.open(model.dir).config;
    const r = 2;
    const lora = { r, alpha: 6, targets: parseTargets('q,v,gate,down') };
    const specs = loraSpecs(config, lora.targets);
    const weights = initLora(specs, r, 3);
    for (const [k, v] of weights) if (k.endsWith('lora_B.weight')) v.forEach((_, i) => (v[i] = Math.cos(i + k.length)));
    const dir = fresh('phi3-adapter');
    writeAdapter(dir, { lora, specs, weights, baseModel: model.dir, model: config });
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'adapter_config.json'), 'utf8'));
    expect(cfg).toMatchObject({ r, lora_alpha: 6, target_modules: ['down_proj', 'qkv_proj', 'gate_up_proj'], rank_pattern: { qkv_proj: 3 * r, gate_up_proj: 2 * r }, alpha_pattern: { qkv_proj: 18, gate_up_proj: 12 } });
    const header = readSafetensorsHeader(path.join(dir, 'adapter_model.safetensors'));
    const shapes = Object.fromEntries(header.tensors.map((t) => [t.name, t.shape]));
    const { hiddenSize: H, numHeads, numKvHeads, headDim, intermediateSize: I } = config;
    expect(shapes['base_model.model.model.layers.1.self_attn.qkv_proj.lora_A.weight']).toEqual([3 * r, H]);
    expect(shapes['base_model.model.model.layers.1.self_attn.qkv_proj.lora_B.weight']).toEqual([(numHeads + 2 * numKvHeads) * headDim, 3 * r]);
    expect(shapes['base_model.model.model.layers.0.mlp.gate_up_proj.lora_B.weight']).toEqual([2 * I, 2 * r]);
    expect(header.tensors).toHaveLength(12); // qkv, gate_up and down in 2 layers
    const back = readAdapter(dir, config);
    expect(back.lora).toEqual(lora); // k and up, zero blocks, are not adapted
    expect([...back.weights.keys()].sort()).toEqual([...weights.keys()].sort());
    for (const [k, v] of weights) expect(Buffer.from(back.weights.get(k)!.buffer).equals(Buffer.from(v.buffer)), k).toBe(true);
    // The separate projections' names do not exist in such a model.
    const separate = fresh('phi3-separate');
    writeAdapter(separate, { lora, specs, weights, baseModel: model.dir });
    expect(() => readAdapter(separate, config)).toThrow(/module 'model.layers.0.self_attn.q_proj' is not supported; .*qkv_proj\|gate_up_proj\) on this model, whose checkpoint fuses q\/k\/v and gate\/up/);
  });

  it('reads a fused module PEFT trained (one A for q, k and v) as its parts, each with the whole A and its rows of B', () => {
    const model = writeTinyModel(fresh('phi3'), { family: 'phi3', numLayers: 1 });
    const config = Checkpoint.open(model.dir).config;
    const R = 4, H = config.hiddenSize, out = (config.numHeads + 2 * config.numKvHeads) * config.headDim;
    const a = Float32Array.from({ length: R * H }, (_, i) => Math.sin(i) / 8);
    const b = Float32Array.from({ length: out * R }, (_, i) => Math.cos(i) / 8);
    const dir = fresh('peft-fused');
    writeSafetensors(path.join(dir, 'adapter_model.safetensors'), {
      'base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight': { dtype: 'F32', shape: [R, H], data: a },
      'base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight': { dtype: 'F32', shape: [out, R], data: b },
    });
    fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: R, lora_alpha: 8, target_modules: ['qkv_proj'] }));
    const back = readAdapter(dir, config);
    expect(back.lora).toEqual({ r: R, alpha: 8, targets: ['q', 'k', 'v'] });
    const q = back.specs.find((s) => s.target === 'q')!, k = back.specs.find((s) => s.target === 'k')!;
    expect(back.weights.get(loraAKey(q))).toEqual(a);
    expect(back.weights.get(loraAKey(k))).toEqual(a);
    const qRows = config.numHeads * config.headDim;
    expect(back.weights.get(loraBKey(k))).toEqual(b.slice(qRows * R, (qRows + config.numKvHeads * config.headDim) * R));
  });

  it("reads a target list naming parts the model fuses (GLM-4's gate and up), which PEFT leaves unadapted", () => {
    const model = writeTinyModel(fresh('glm4'), { family: 'glm4', numLayers: 1 });
    const config = Checkpoint.open(model.dir).config;
    const R = 2, H = config.hiddenSize, inO = config.numHeads * config.headDim;
    const dir = fresh('peft-glm4');
    writeSafetensors(path.join(dir, 'adapter_model.safetensors'), {
      'base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight': { dtype: 'F32', shape: [R, inO], data: new Float32Array(R * inO).fill(0.01) },
      'base_model.model.model.layers.0.self_attn.o_proj.lora_B.weight': { dtype: 'F32', shape: [H, R], data: new Float32Array(H * R).fill(0.01) },
    });
    // As a generic TRL script lists them: gate_proj and up_proj match no module of GLM-4's.
    fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: R, lora_alpha: 4, target_modules: ['o_proj', 'gate_proj', 'up_proj'] }));
    expect(readAdapter(dir, config).lora).toEqual({ r: R, alpha: 4, targets: ['o'] });
  });

  it('refuses adapters it cannot honour, naming the file and the problem', () => {
    const model = writeTinyModel(fresh('m'), { family: 'llama', numLayers: 1 });
    const config = Checkpoint.open(model.dir).config;
    const lora = { r: 2, alpha: 4, targets: parseTargets('q,v') };
    const specs = loraSpecs(config, lora.targets);
    const good = fresh('good');
    writeAdapter(good, { lora, specs, weights: initLora(specs, 2, 0), baseModel: 'x' });
    const variant = (edit: (cfg: Record<string, unknown>) => void) => {
      const dir = fresh('bad');
      fs.copyFileSync(path.join(good, 'adapter_model.safetensors'), path.join(dir, 'adapter_model.safetensors'));
      const cfg = JSON.parse(fs.readFileSync(path.join(good, 'adapter_config.json'), 'utf8'));
      edit(cfg);
      fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify(cfg));
      return dir;
    };
    expect(() => readAdapter(path.join(tmp, 'nope'), config)).toThrow(/adapter folder not found/);
    expect(() => readAdapter(variant((c) => (c.r = 3)), config)).toThrow(/lora_A\.weight' has shape \[2,\d+\], expected \[3,\d+\]/);
    expect(() => readAdapter(variant((c) => (c.target_modules = ['q_proj'])), config)).toThrow(/v_proj.lora_A.weight' does not belong to this model's LoRA/);
    expect(() => readAdapter(variant((c) => (c.target_modules = ['q_proj', 'v_proj', 'k_proj'])), config)).toThrow(/missing 2 LoRA tensor\(s\), e.g. '.*k_proj/);
    expect(() => readAdapter(variant((c) => (c.target_modules = ['q_proj', 'lm_head'])), config)).toThrow(/adapter_config.json: target module 'lm_head' is not supported/);
    expect(() => readAdapter(variant((c) => (c.use_dora = true)), config)).toThrow(/use_dora \(DoRA\) is not supported/);
    expect(() => readAdapter(variant((c) => (c.target_modules = ['embed_tokens'])), config)).toThrow(/embedding LoRA is not supported/);
    expect(() => readAdapter(variant((c) => (c.peft_type = 'IA3')), config)).toThrow(/peft_type must be "LORA"/);
    expect(() => readAdapter(variant((c) => (c.target_modules = 42)), config)).toThrow(/target_modules must be a list/);
    const otherModel = Checkpoint.open(writeTinyModel(fresh('m2'), { family: 'llama', numLayers: 1, hiddenSize: 48 }).dir).config;
    expect(() => readAdapter(good, otherModel)).toThrow(/has shape \[2,\d+\], expected \[2,48\]/);
  });

  it('refuses malicious adapter folders with one line each, fast: bad headers, special files, huge values, hostile patterns', () => {
    const model = writeTinyModel(fresh('m'), { family: 'llama', numLayers: 1 });
    const config = Checkpoint.open(model.dir).config;
    const lora = { r: 2, alpha: 4, targets: parseTargets('q') };
    const specs = loraSpecs(config, lora.targets);
    const good = fresh('good');
    writeAdapter(good, { lora, specs, weights: initLora(specs, 2, 0), baseModel: 'x' });
    const goodConfig = JSON.parse(fs.readFileSync(path.join(good, 'adapter_config.json'), 'utf8'));
    const folder = (cfg: unknown = goodConfig, weights?: Buffer | 'dir') => {
      const dir = fresh('evil');
      fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify(cfg));
      if (weights === 'dir') fs.mkdirSync(path.join(dir, 'adapter_model.safetensors'));
      else if (weights) fs.writeFileSync(path.join(dir, 'adapter_model.safetensors'), weights);
      else fs.copyFileSync(path.join(good, 'adapter_model.safetensors'), path.join(dir, 'adapter_model.safetensors'));
      return dir;
    };
    const raw = (header: string, data = Buffer.alloc(64)) => {
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(Buffer.byteLength(header)));
      return Buffer.concat([len, Buffer.from(header), data]);
    };
    const refused = (dir: string, pattern: RegExp) => {
      const started = Date.now();
      let message = '';
      try {
        readAdapter(dir, config);
      } catch (err) {
        expect(err).toBeInstanceOf(UserError);
        message = (err as Error).message;
      }
      expect(message).toMatch(pattern);
      expect(message.split('\n')).toHaveLength(1);
      expect(Date.now() - started).toBeLessThan(2_000);
    };
    const q = specs[0]!.module;
    refused(folder(goodConfig, raw(`{"${q}.lora_A.weight":{"dtype":"F32","shape":"2,64","data_offsets":[0,8]}}`)), /needs a shape of whole numbers/);
    refused(folder(goodConfig, raw('null')), /not a safetensors file \(the header is null, not an object\)/);
    refused(folder(goodConfig, raw(`{"${q}.lora_A.weight":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`)), /data_offsets/);
    refused(folder(goodConfig, 'dir'), /adapter_model.safetensors: not a regular file/);
    refused(folder(null), /adapter_config.json: must be a JSON object/);
    refused(folder({ ...goodConfig, lora_alpha: 1e308 }), /lora_alpha must be a number up to/);
    refused(folder({ ...goodConfig, rank_pattern: { q_proj: 0.5 } }), /rank_pattern\['q_proj'\] must be a whole number/);
    refused(folder({ ...goodConfig, rank_pattern: { '(?=q)q_proj': 2 } }), /rank_pattern key '\(\?=q\)q_proj' is not a module pattern Hindsight can match/);
    // Weights of 3e38: finite, but the update overflows the forward pass.
    const huge = initLora(specs, 2, 0);
    for (const w of huge.values()) w.fill(3e38);
    const hugeDir = fresh('huge');
    writeAdapter(hugeDir, { lora, specs, weights: huge, baseModel: 'x' });
    refused(hugeDir, /update scaling·B·A can reach .* non-finite/);
    // A named pipe or a link to /dev/zero in a file's place: refused at once, never read.
    const piped = folder();
    fs.rmSync(path.join(piped, 'adapter_config.json'));
    execFileSync('mkfifo', [path.join(piped, 'adapter_config.json')]);
    refused(piped, /adapter_config.json: not a regular file/);
    const zero = folder();
    fs.rmSync(path.join(zero, 'adapter_config.json'));
    fs.symlinkSync('/dev/zero', path.join(zero, 'adapter_config.json'));
    refused(zero, /adapter_config.json: not a regular file/);
    // A catastrophic-backtracking key is matched in linear time (and here matches nothing).
    const started = Date.now();
    const evil = readAdapter(folder({ ...goodConfig, rank_pattern: { '(.*)*(.*)*(.*)*(.*)*(.*)*!': 7 }, alpha_pattern: { '(a|aa)+$': 1 } }), config);
    expect(evil.lora).toEqual(lora);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('matches rank_pattern and alpha_pattern keys as PEFT does: the whole path or a part after a dot, first key in the file wins', () => {
    const model = writeTinyModel(fresh('m'), { family: 'llama', numLayers: 2 });
    const config = Checkpoint.open(model.dir).config;
    const specs = loraSpecs(config, parseTargets('q'));
    const dir = fresh('patterns');
    const tensors: Record<string, { dtype: 'F32'; shape: number[]; data: Float32Array }> = {};
    const rankOf = (layer: number) => (layer === 0 ? 4 : 2);
    for (const s of specs) {
      const r = rankOf(s.layer);
      tensors[`${s.module}.lora_A.weight`] = { dtype: 'F32', shape: [r, s.inFeatures], data: new Float32Array(r * s.inFeatures).fill(0.01) };
      tensors[`${s.module}.lora_B.weight`] = { dtype: 'F32', shape: [s.outFeatures, r], data: new Float32Array(s.outFeatures * r).fill(0.01) };
    }
    writeSafetensors(path.join(dir, 'adapter_model.safetensors'), tensors);
    const cfg = { peft_type: 'LORA', r: 2, lora_alpha: 2, target_modules: ['q_proj'], rank_pattern: { 'layers\\.0\\.self_attn\\.q_proj': 4, 'l[a-z]+s.0.self_attn.q_proj': 9 }, alpha_pattern: { 'ers.0.self_attn.q_proj': 100 } };
    fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify(cfg));
    const back = readAdapter(dir, config); // 'ers.0…' is no part after a dot: layer 0 keeps alpha 2
    expect(back.lora.r).toBe(4);
    expect(back.lora.alpha).toBe(2); // layer 0: rank 4, alpha 2 → the uniform scaling is 2/4
  });

  it('accepts PEFT keys that carry the adapter name and half-precision tensors', () => {
    const model = writeTinyModel(fresh('m'), { family: 'llama', numLayers: 1 });
    const config = Checkpoint.open(model.dir).config;
    const specs = loraSpecs(config, ['q']);
    const a = initLora(specs, 2, 3).get(loraAKey(specs[0]!))!;
    const dir = fresh('named');
    const bf16 = (x: Float32Array) => new Uint16Array(new Uint32Array(x.buffer.slice(0)).map((b) => b >>> 16));
    writeSafetensors(path.join(dir, 'adapter_model.safetensors'), {
      [`${specs[0]!.module}.lora_A.default.weight`]: { dtype: 'BF16', shape: [2, specs[0]!.inFeatures], data: bf16(a) },
      [`${specs[0]!.module}.lora_B.default.weight`]: { dtype: 'F32', shape: [specs[0]!.outFeatures, 2], data: new Float32Array(specs[0]!.outFeatures * 2) },
    });
    fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 2, lora_alpha: 16, target_modules: ['q_proj'] }));
    const back = readAdapter(dir, config);
    expect(back.lora).toEqual({ r: 2, alpha: 16, targets: ['q'] });
    const aBack = back.weights.get(loraAKey(specs[0]!))!;
    aBack.forEach((x, i) => expect(Math.abs(x - a[i]!)).toBeLessThanOrEqual(Math.abs(a[i]!) / 128));
  });
});

describe('merged export', () => {
  it('W + s·B·A written as a plain model scores like LoRA applied unmerged', async () => {
    const model = writeTinyModel(fresh('m'), { family: 'qwen2', numLayers: 2, dtype: 'BF16' });
    const ckpt = Checkpoint.open(model.dir);
    const lora = { r: 4, alpha: 8, targets: parseTargets('all') };
    const specs = loraSpecs(ckpt.config, lora.targets);
    const weights = initLora(specs, 4, 5);
    for (const [k, v] of weights) if (k.endsWith('lora_B.weight')) v.forEach((_, i) => (v[i] = 0.05 * Math.cos(i * 0.7 + k.length)));
    const adapterDir = fresh('adapter');
    writeAdapter(adapterDir, { lora, specs, weights, baseModel: model.dir });
    const mergedDir = writeMergedModel(ckpt, fresh('merged'), lora, specs, weights);

    const rows = [{ inputIds: [5, 17, 40, 33, 2, 91, 12], responseStart: 3 }, { inputIds: [7, 8, 9, 10], responseStart: 1 }];
    const merged = ModelEngine.open(mergedDir);
    const base = ModelEngine.open(model.dir);
    const viaMerged = await merged.score(rows);
    const viaBase = await base.score(rows);
    await merged.close();
    await base.close();
    const viaHook = await scoreWithAdapter(model.dir, adapterDir, rows);
    let maxDiff = 0, moved = 0;
    viaHook.flat().forEach((x, i) => {
      maxDiff = Math.max(maxDiff, Math.abs(x - viaMerged.flat()[i]!));
      moved = Math.max(moved, Math.abs(x - viaBase.flat()[i]!));
    });
    expect(maxDiff).toBeLessThan(2e-4);
    expect(moved).toBeGreaterThan(1e-3); // the adapter does change the model
  });

  it('mergeInto adds s·B·A exactly as a naive product', () => {
    const [r, inF, outF, s] = [3, 5, 4, 2.5];
    const a = Float32Array.from({ length: r * inF }, (_, i) => Math.sin(i));
    const b = Float32Array.from({ length: outF * r }, (_, i) => Math.cos(i));
    const w = Float32Array.from({ length: outF * inF }, (_, i) => i / 10);
    const expected = w.map((x, idx) => {
      const o = Math.floor(idx / inF), i = idx % inF;
      let acc = 0;
      for (let k = 0; k < r; k++) acc += b[o * r + k]! * a[k * inF + i]!;
      return x + s * acc;
    });
    mergeInto(w, a, b, r, inF, outF, s);
    w.forEach((x, i) => expect(x).toBeCloseTo(expected[i]!, 5));
  });
});
