// Adapters both ways, against the real PEFT (test/interop/py/peft_adapters.py) on a tiny Llama, a
// tiny Phi-3 (fused qkv_proj and gate_up_proj, which Hindsight trains as their parts and writes
// fused: src-main/train/fused-adapter.ts), a tiny GLM-4 (gate/up fused), a tiny Gemma 2 (soft-capped) and a tiny Gemma 3 (sliding layers), that transformers made (bf16 on disk, untied head):
//   - an adapter Hindsight trained (`train --merge`) loads in PeftModel.from_pretrained, whose
//     log-probs equal `score --adapter`'s within 1e-4; merge_and_unload's weights equal the
//     merged folder Hindsight wrote, which transformers loads as a plain fp32 model;
//   - an adapter PEFT trained (real AdamW steps; rank_pattern, alpha_pattern, use_rslora; saved
//     in bf16) scores in Hindsight as PEFT applies it, and Hindsight's merge of it (the --merge
//     path, writeMergedModel) equals merge_and_unload.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { readSafetensorsHeader } from '../../src-main/model/safetensors.js';
import { writeMergedModel } from '../../src-main/train/merge.js';
import { readAdapter } from '../../src-main/train/peft.js';
import { runCli } from '../helpers/cli.js';
import { runPython, writeTinyTokenizerFolder } from './helpers.js';
import { maxAbsDiffRows } from '../helpers/numbers.js';
import { interopPython, pythonEnv } from './python.js';

const TOLERANCE = 1e-4;
/** Merged weights are W + s·B·A summed in float64 (Hindsight) or fp32 (PEFT): a few fp32 ulps of |W| ≈ 0.5. */
const WEIGHT_TOLERANCE = 1e-6;
const SCRIPT = path.resolve('test/interop/py/peft_adapters.py');
const TEXTS = [
  'The cat sat on the mat and looked at the door.',
  'Once upon a time there was a small boat on a wide sea.',
  'She said: the answer is in the question, and the question is in the answer.',
];

interface Made { rows: { ids: number[]; start: number }[]; base: number[][]; peft: number[][]; peft_merged: number[][]; adapter_dtypes_loaded: string[] }
interface Checked { dir: string; peft: number[][]; merged_weight_diff: number; missing: string[]; merged_dtype_default: string; merged_plain: number[][] }

const BASES = [
  { name: 'llama', base: { family: 'llama', tie: false, dtype: 'BF16', rope_theta: 500000 } },
  {
    name: 'phi3',
    base: {
      family: 'phi3', tie: false, dtype: 'BF16', partial_rotary_factor: 0.5, original_max_position_embeddings: 512, max_position_embeddings: 2048,
      rope_scaling: { rope_type: 'longrope', short_factor: [1, 1.3, 1.9, 2.4], long_factor: [4, 5, 6, 7] },
    },
  },
  // GLM-4: gate and up in one gate_up_proj (written fused, read back as its parts), q/k/v biases,
  // RoPE over adjacent pairs on half of each head.
  { name: 'glm4', base: { family: 'glm4', tie: false, dtype: 'BF16', attention_bias: true, partial_rotary_factor: 0.5 } },
  // Gemma 2: Gemma's layers with attention and logits soft-capped (at 2 and 5, which bend this
  // model's values), the first layer sliding over 8 positions.
  {
    name: 'gemma2',
    base: { family: 'gemma2', tie: true, dtype: 'BF16', head_dim: 16, sliding_window: 8, num_hidden_layers: 2, query_pre_attn_scalar: 24, attn_logit_softcapping: 2, final_logit_softcapping: 5 },
  },
  // Gemma 3: its norms, GELU and a sliding layer with an 8-position window (the texts are longer).
  {
    name: 'gemma3',
    base: {
      family: 'gemma3', tie: true, dtype: 'BF16', head_dim: 16, sliding_window: 8, num_hidden_layers: 3, query_pre_attn_scalar: 24,
      layer_types: ['sliding_attention', 'full_attention', 'sliding_attention'],
      rope_parameters: { full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1000000 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
    },
  },
  // Gemma 3 as its 4B and larger ship (Gemma3ForConditionalGeneration): the adapters' modules under
  // model.language_model, and the vision tower's q_proj and the like left alone.
  {
    name: 'gemma3-multimodal',
    base: {
      family: 'gemma3', multimodal: true, tie: true, dtype: 'BF16', head_dim: 16, sliding_window: 8, num_hidden_layers: 2, query_pre_attn_scalar: 16,
      layer_types: ['sliding_attention', 'full_attention'],
      rope_parameters: { full_attention: { rope_type: 'default', rope_theta: 1000000 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
    },
  },
];

describe.skipIf(!interopPython).each(BASES)('LoRA adapters between Hindsight and PEFT on $name', ({ base: baseSpec }) => {
  let tmp: string, baseDir: string, peftDir: string, ourDir: string, peftMergedByUs: string;
  let made: Made;
  let checked: Checked[];
  const scored: Record<string, number[][]> = {};
  const diffs: Record<string, number> = {};

  async function score(name: string, model: string, adapter?: string): Promise<number[][]> {
    const input = path.join(tmp, 'rows.jsonl');
    const out = path.join(tmp, `${name}.jsonl`);
    const r = await runCli('score', '--model', model, '--input', input, '--out', out, '--threads', '1', ...(adapter ? ['--adapter', adapter] : []));
    expect(r.code, r.stderr).toBe(0);
    return fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l).logprobs as number[]);
  }

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-interop-peft-'));
    baseDir = writeTinyTokenizerFolder(path.join(tmp, 'base'));
    peftDir = path.join(tmp, 'peft-adapter');
    ourDir = path.join(tmp, 'hindsight-adapter');
    peftMergedByUs = path.join(tmp, 'peft-adapter-merged-by-hindsight');
    const base = { dir: baseDir, ...baseSpec };
    made = JSON.parse(await runPython(interopPython!, [SCRIPT, 'make'], JSON.stringify({ base, peft_dir: peftDir, texts: TEXTS }), pythonEnv()));
    fs.writeFileSync(path.join(tmp, 'rows.jsonl'), made.rows.map((r) => JSON.stringify({ input_ids: r.ids, response_start: r.start })).join('\n') + '\n');

    // Hindsight trains its adapter on the same rows (rewarded +1, −1, +1) and merges it.
    const data = path.join(tmp, 'train.jsonl');
    fs.writeFileSync(data, made.rows.map((r, i) => JSON.stringify({ input_ids: r.ids, response_start: r.start, reward: i % 2 ? -1 : 1 })).join('\n') + '\n');
    const t = await runCli('train', '--model', baseDir, '--out', ourDir, '--data', data, '--steps', '4', '--batch-size', '3', '--lr', '2e-2',
      '--lora-r', '4', '--lora-alpha', '16', '--merge', '--threads', '1', '--json');
    expect(t.code, t.stderr).toBe(0);
    // Hindsight's merge of PEFT's adapter: what --merge writes, from the adapter as Hindsight reads it.
    const adapter = readAdapter(peftDir, Checkpoint.open(baseDir).config);
    writeMergedModel(Checkpoint.open(baseDir), peftMergedByUs, adapter.lora, adapter.specs, adapter.weights);

    for (const [name, model, adapterDir] of [
      ['base', baseDir], ['ours', baseDir, ourDir], ['ours-merged', path.join(ourDir, 'merged')],
      ['peft', baseDir, peftDir], ['peft-merged', peftMergedByUs],
    ] as [string, string, string?][]) scored[name] = await score(name, model, adapterDir);

    const check = { base: baseDir, rows: made.rows, adapters: [{ dir: ourDir, merged: path.join(ourDir, 'merged') }, { dir: peftDir, merged: peftMergedByUs }] };
    checked = JSON.parse(await runPython(interopPython!, [SCRIPT, 'check'], JSON.stringify(check), pythonEnv()));
  }, 600_000);
  afterAll(() => {
    console.log(`PEFT vs Hindsight, largest differences: ${JSON.stringify(diffs)}`);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('scores the base model as transformers does', () => {
    expect((diffs.base = maxAbsDiffRows(scored.base!, made.base))).toBeLessThan(TOLERANCE);
  });

  it(`an adapter Hindsight trained: PeftModel.from_pretrained's log-probs equal score --adapter's within ${TOLERANCE}`, () => {
    const [ours] = checked;
    expect((diffs.ours = maxAbsDiffRows(scored.ours!, ours!.peft))).toBeLessThan(TOLERANCE);
    expect(maxAbsDiffRows(ours!.peft, made.base)).toBeGreaterThan(0.05); // training moved it: the comparison can fail
  });

  it('an adapter Hindsight trained: merge_and_unload equals train --merge, which transformers loads as fp32', () => {
    const [ours] = checked;
    expect(ours!.missing).toEqual([]);
    expect((diffs.oursMergedWeights = ours!.merged_weight_diff)).toBeLessThan(WEIGHT_TOLERANCE);
    expect(ours!.merged_dtype_default).toBe('torch.float32');
    expect((diffs.oursMerged = maxAbsDiffRows(scored['ours-merged']!, ours!.peft))).toBeLessThan(TOLERANCE);
    expect(maxAbsDiffRows(ours!.merged_plain, ours!.peft)).toBeLessThan(TOLERANCE);
  });

  it('an adapter PEFT trained (rank_pattern, alpha_pattern, use_rslora, bf16) scores in Hindsight as in PEFT', () => {
    const config = JSON.parse(fs.readFileSync(path.join(peftDir, 'adapter_config.json'), 'utf8'));
    expect(config).toMatchObject({ use_rslora: true, r: 4 });
    expect(Object.keys(config.rank_pattern).length).toBeGreaterThan(1);
    expect(Object.keys(config.alpha_pattern).length).toBeGreaterThan(1);
    const dtypes = new Set(readSafetensorsHeader(path.join(peftDir, 'adapter_model.safetensors')).tensors.map((t) => t.dtype));
    expect([...dtypes]).toEqual(['BF16']);
    expect((diffs.peft = maxAbsDiffRows(scored.peft!, made.peft))).toBeLessThan(TOLERANCE);
    expect(maxAbsDiffRows(checked[1]!.peft, made.peft)).toBe(0); // the same adapter, loaded twice by PEFT
    expect(maxAbsDiffRows(made.peft, made.base)).toBeGreaterThan(0.05);
  });

  it("an adapter PEFT trained: Hindsight's merge equals merge_and_unload", () => {
    const [, theirs] = checked;
    expect(theirs!.missing).toEqual([]);
    expect((diffs.peftMergedWeights = theirs!.merged_weight_diff)).toBeLessThan(WEIGHT_TOLERANCE);
    expect((diffs.peftMerged = maxAbsDiffRows(scored['peft-merged']!, made.peft_merged))).toBeLessThan(TOLERANCE);
    expect(maxAbsDiffRows(made.peft_merged, made.peft)).toBeLessThan(TOLERANCE);
  });
});
