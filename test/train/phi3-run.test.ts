// A training run on a Phi-3 (fused qkv_proj and gate_up_proj, LongRoPE, a partial rotation):
// `train` writes the adapter for the fused modules, a checkpoint's adapter is one too, and a run
// stopped after its checkpoint and resumed from it ends with the same adapter, to the bit, as
// one that was never stopped (the fused pair read back is the parts' pairs exactly:
// src-main/train/fused-adapter.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.js';
import { readSafetensorsHeader } from '../../src-main/model/safetensors.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-phi3-run-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('a training run on a Phi-3 model', () => {
  it('writes fused modules, and a resumed run ends where an unbroken one does', async () => {
    const model = writeTinyModel(path.join(root, 'phi3'), { family: 'phi3', seed: 3, hiddenSize: 32, numLayers: 2 }).dir;
    const data = path.join(root, 'data.jsonl');
    const rows = [[5, 9, 14, 7, 22, 31, 8], [40, 3, 17, 9, 11, 2], [6, 6, 19, 25, 4, 13, 30, 12]];
    fs.writeFileSync(data, rows.map((ids, i) => JSON.stringify({ input_ids: ids, response_start: 3, reward: i % 2 ? -1 : 1 })).join('\n') + '\n');
    const train = (out: string, ...more: string[]) => cli('train', '--model', model, '--out', out, '--data', data, '--lora-r', '4', '--lr', '5e-2', '--batch-size', '3', '--threads', '1', ...more);

    const whole = path.join(root, 'whole');
    expect((await train(whole, '--steps', '4')).code).toBe(0);
    const header = readSafetensorsHeader(path.join(whole, 'adapter_model.safetensors'));
    const modules = [...new Set(header.tensors.map((t) => t.name.replace(/^base_model\.model\.model\.layers\.\d+\./, '').replace(/\.lora_[AB]\.weight$/, '')))].sort();
    expect(modules).toEqual(['mlp.down_proj', 'mlp.gate_up_proj', 'self_attn.o_proj', 'self_attn.qkv_proj']);

    const broken = path.join(root, 'broken');
    expect((await train(broken, '--steps', '2', '--save-every', '1')).code).toBe(0);
    const r = await cli('train', '--resume', broken, '--steps', '4', '--threads', '1');
    expect(r.code, r.stderr).toBe(0);
    const bytes = (dir: string) => fs.readFileSync(path.join(dir, 'adapter_model.safetensors'));
    expect(bytes(broken).equals(bytes(whole))).toBe(true);
  });
});
