// Adapters trained elsewhere (docs/design.md §Hand-off). The fixture test/fixtures/peft-roundtrip
// was written by bench/peft_roundtrip.py: a PEFT-layout adapter for the demo model (random A
// and B in bf16, alpha ≠ 2r, one rank_pattern entry) and PyTorch's log-probs of a fixed text
// with it applied. `hindsight score --adapter` must give the same log-probs, and so must the
// same adapter in fp16, fp32, without the key prefix, with full-path targets; rsLoRA and
// alpha_pattern scale as PEFT does; what cannot be applied gets a one-line error.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32, writeSafetensors, type TensorToWrite } from '../../src-main/model/safetensors.js';
import { float32ToFp16 } from '../../src-main/model/half.js';
import { loraAKey, loraBKey } from '../../src-main/train/lora.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { runCli } from '../helpers/cli.js';
import { maxAbsDiff } from '../helpers/numbers.js';

const MODEL = path.resolve('resources/models/stories260K');
const FIXTURE = path.resolve('test/fixtures/peft-roundtrip');
const expected = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'expected.json'), 'utf8')) as { logprobs: number[]; base_logprobs: number[] };
const baseConfig = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'adapter/adapter_config.json'), 'utf8'));
let tmp: string;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-peft-roundtrip-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The fixture's tensors as fp32, by name. */
function fixtureTensors(): Map<string, { shape: number[]; data: Float32Array }> {
  const file = path.join(FIXTURE, 'adapter/adapter_model.safetensors');
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const e of readSafetensorsHeader(file).tensors) out.set(e.name, { shape: e.shape, data: toFloat32(readTensorBytes(e), e.dtype, e.name).slice() });
  return out;
}

/** A copy of the fixture adapter with its tensors re-encoded, renamed, or its config edited. */
function variant(name: string, options: { dtype?: 'F32' | 'F16'; rename?: (k: string) => string; config?: (c: any) => void; extra?: Record<string, TensorToWrite> }): string {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir, { recursive: true });
  const tensors: Record<string, TensorToWrite> = {};
  for (const [k, t] of fixtureTensors()) {
    const key = options.rename ? options.rename(k) : k;
    tensors[key] = options.dtype === 'F16' ? { dtype: 'F16', shape: t.shape, data: float32ToFp16(t.data) } : { dtype: 'F32', shape: t.shape, data: t.data };
  }
  writeSafetensors(path.join(dir, 'adapter_model.safetensors'), { ...tensors, ...options.extra });
  const config = structuredClone(baseConfig);
  options.config?.(config);
  fs.writeFileSync(path.join(dir, 'adapter_config.json'), JSON.stringify(config));
  return dir;
}

async function scoreWith(adapter: string): Promise<number[]> {
  const out = path.join(tmp, `scored-${path.basename(adapter)}.jsonl`);
  const r = await runCli('score', '--model', MODEL, '--input', path.join(FIXTURE, 'input.jsonl'), '--out', out, '--adapter', adapter);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(fs.readFileSync(out, 'utf8').split('\n')[0]!).logprobs;
}

describe('a PEFT adapter trained elsewhere', () => {
  it('scores as PyTorch applying it does, within 1e-4 in log-prob', async () => {
    const got = await scoreWith(path.join(FIXTURE, 'adapter'));
    expect(maxAbsDiff(got, expected.logprobs)).toBeLessThan(1e-4);
    expect(maxAbsDiff(expected.logprobs, expected.base_logprobs)).toBeGreaterThan(0.5); // the adapter does matter
  });

  it('gives the same log-probs in fp16 and fp32, without the key prefix, with the adapter name, with full-path targets', async () => {
    const paths = Array.from({ length: 5 }, (_, l) => ['self_attn.q_proj', 'self_attn.v_proj', 'mlp.down_proj'].map((m) => `model.layers.${l}.${m}`)).flat();
    const dirs = [
      variant('fp16', { dtype: 'F16' }),
      variant('fp32', { dtype: 'F32' }),
      variant('bare-keys', { rename: (k) => k.replace(/^base_model\.model\./, '').replace(/\.weight$/, '.default.weight') }),
      variant('full-paths', { config: (c) => (c.target_modules = paths) }),
      variant('regex-targets', { config: (c) => (c.target_modules = '.*\\.(q_proj|v_proj|down_proj)') }),
    ];
    for (const dir of dirs) expect(maxAbsDiff(await scoreWith(dir), expected.logprobs), path.basename(dir)).toBeLessThan(1e-4);
  });

  it('folds rank_pattern, alpha_pattern and use_rslora into one exact r and alpha', () => {
    const config = Checkpoint.open(MODEL).config;
    const dir = variant('rslora', { config: (c) => ((c.use_rslora = true), (c.alpha_pattern = { 'layers.0.self_attn.q_proj': 5 })) });
    const loaded = readAdapter(dir, config);
    expect(loaded.lora.r).toBe(6);
    const raw = fixtureTensors();
    for (const spec of loaded.specs) {
      const module = spec.module.replace(/^base_model\.model\./, '');
      const a = raw.get(`${spec.module}.lora_A.weight`);
      if (!a) continue;
      const b = raw.get(`${spec.module}.lora_B.weight`)!;
      const rank = module === 'model.layers.2.mlp.down_proj' ? 6 : 4;
      const alpha = module === 'model.layers.0.self_attn.q_proj' ? 5 : baseConfig.lora_alpha;
      const want = product(b.data, a.data, rank, spec.outFeatures, spec.inFeatures, alpha / Math.sqrt(rank));
      const got = product(loaded.weights.get(loraBKey(spec))!, loaded.weights.get(loraAKey(spec))!, 6, spec.outFeatures, spec.inFeatures, loaded.lora.alpha / 6);
      got.forEach((x, i) => expect(Math.abs(x - want[i]!)).toBeLessThan(1e-5 * (1 + Math.abs(want[i]!))));
    }
  });

  it('refuses what it cannot apply with one line naming it', async () => {
    const vec = (n: number): TensorToWrite => ({ dtype: 'F32', shape: [n], data: new Float32Array(n) });
    const cases: [string, string, RegExp][] = [
      [variant('dora', { config: (c) => (c.use_dora = true) }), 'DoRA', /use_dora \(DoRA\) is not supported/],
      [variant('dora-tensor', { extra: { 'base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector': vec(64) } }), 'DoRA', /DoRA \(lora_magnitude_vector\) is not supported/],
      [variant('embedding', { extra: { 'base_model.model.model.embed_tokens.lora_embedding_A': { dtype: 'F32', shape: [4, 512], data: new Float32Array(2048) } } }), 'embedding', /embedding LoRA is not supported/],
      [variant('lm-head', { config: (c) => (c.target_modules = '.*'), extra: { 'base_model.model.lm_head.lora_A.weight': { dtype: 'F32', shape: [4, 64], data: new Float32Array(256) } } }), 'module', /module 'lm_head' is not supported/],
      [variant('layer-9', { config: (c) => (c.target_modules = '.*'), extra: { 'base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight': { dtype: 'F32', shape: [4, 64], data: new Float32Array(256) } } }), 'layer', /does not exist: this model has 5 layers/],
    ];
    for (const [dir, , pattern] of cases) {
      const r = await runCli('score', '--model', MODEL, '--input', path.join(FIXTURE, 'input.jsonl'), '--out', path.join(tmp, 'x.jsonl'), '--adapter', dir);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(pattern);
    }
  });

  it('generates with it applied (merged, as serve does), and starts training from it', async () => {
    const gen = await runCli('generate', '--model', MODEL, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '6', '--adapter', path.join(FIXTURE, 'adapter'), '--json');
    expect(gen.code).toBe(0);
    const base = await runCli('generate', '--model', MODEL, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '6', '--json');
    expect(gen.json().tokens).not.toEqual(base.json().tokens);

    const data = path.join(tmp, 'rows.jsonl');
    const row = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'input.jsonl'), 'utf8'));
    fs.writeFileSync(data, JSON.stringify({ ...row, reward: 1 }) + '\n');
    const out = path.join(tmp, 'continued');
    const trained = await runCli('train', '--model', MODEL, '--out', out, '--data', data, '--steps', '1', '--init-adapter', path.join(FIXTURE, 'adapter'));
    expect(trained.code, trained.stderr).toBe(0);
    expect(JSON.parse(fs.readFileSync(path.join(out, 'adapter_config.json'), 'utf8'))).toMatchObject({ r: 6, target_modules: ['q_proj', 'v_proj', 'down_proj'] });
  });
});

/** s·B·A as a dense [out, in] matrix. */
function product(b: Float32Array, a: Float32Array, r: number, outF: number, inF: number, s: number): Float64Array {
  const w = new Float64Array(outF * inF);
  for (let o = 0; o < outF; o++) for (let k = 0; k < r; k++) for (let i = 0; i < inF; i++) w[o * inF + i]! += s * b[o * r + k]! * a[k * inF + i]!;
  return w;
}
