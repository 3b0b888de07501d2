// Each supported GGUF architecture against transformers' own GGUF loader (an independent
// mapping of names, metadata and Llama's q/k permutation): tiny Llama (untied), Qwen2 (biases,
// tied), Qwen3 (q/k norms) and Phi-3 (fused attn_qkv and ffn_up) folders written as GGUF by the
// benches' writer, F32 and Q8_0, give the same per-token log-probs in Hindsight and in
// AutoModelForCausalLM.from_pretrained(dir, gguf_file=…) within 1e-4 nats. Skips where the Python
// environment (with gguf) is missing.
//
// transformers 5.24's phi3 GGUF mapping (integrations/ggml.py) reads no partial rotation
// (rope.dimension_count maps to nothing), no LongRoPE (the rope_factors tensors and attn_factor are
// dropped) and no sliding window: it runs every phi3 file with whole-head default RoPE (the tiny
// Phi-3 with LongRoPE and half-head rotation differs by 1.9 nats there). The Phi-3 here has
// neither, so what is compared is the fused tensors' names and row order; LongRoPE and the partial
// rotation are checked against llama.cpp (./llama-cpp-export.test.ts), and against transformers
// here through the folder Hindsight writes for a Phi-3 GGUF (a merged model of a GGUF base:
// config.json from the file's metadata, the fused tensors joined again).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { writeMergedModel } from '../../src-main/train/merge.js';
import { writeTinyModel, type TinyFamily, type TinyModelOptions } from '../../tools/tiny-models.js';
import { interopPython, interopSkipReason, pythonEnv } from './python.js';

const TOLERANCE = 1e-4;
const IDS = [5, 9, 2, 7, 11, 3, 40, 41, 17, 60];

const PY = String.raw`
import json, sys, torch
from transformers import AutoModelForCausalLM
torch.set_num_threads(1)
ids = torch.tensor([json.loads(sys.argv[2])])
out = {}
for name in sys.argv[3:]:
    m = AutoModelForCausalLM.from_pretrained(sys.argv[1], gguf_file=name, dtype=torch.float32).eval()
    with torch.no_grad():
        lp = torch.log_softmax(m(ids).logits[0].float(), -1)
    out[name] = lp[:-1].gather(1, ids[0, 1:, None])[:, 0].tolist()
print(json.dumps(out))
`;

/** A checkpoint folder's class in transformers and its log-probs (argv: folder, ids). */
const PY_FOLDER = String.raw`
import json, sys, torch
from transformers import AutoModelForCausalLM
torch.set_num_threads(1)
ids = torch.tensor([json.loads(sys.argv[2])])
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
with torch.no_grad():
    lp = torch.log_softmax(m(ids).logits[0].float(), -1)
print(json.dumps({"class": type(m).__name__, "logprobs": lp[:-1].gather(1, ids[0, 1:, None])[:, 0].tolist()}))
`;

function run(cmd: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: pythonEnv() });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-archs-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
if (!interopPython) console.log(`skipped: GGUF architectures against transformers (${interopSkipReason})`);

describe.skipIf(interopPython === null)('GGUF architectures against transformers\' GGUF loader', () => {
  // transformers' GGUF loader takes Qwen3's head_dim from its config default (128), not the file.
  const cases: { family: TinyFamily; tie: boolean; headDim: number }[] = [
    { family: 'llama', tie: false, headDim: 16 },
    { family: 'qwen2', tie: true, headDim: 16 },
    { family: 'qwen3', tie: false, headDim: 128 },
    { family: 'phi3', tie: false, headDim: 16 },
  ];

  /** Phi-3 without LongRoPE, partial rotation or sliding window, which transformers' GGUF loader does not read (above). */
  function plainPhi3(dir: string): void {
    const file = path.join(dir, 'config.json');
    const { partial_rotary_factor: _p, original_max_position_embeddings: _o, ...config } = JSON.parse(fs.readFileSync(file, 'utf8'));
    fs.writeFileSync(file, JSON.stringify({ ...config, rope_scaling: null, max_position_embeddings: 512, sliding_window: null }));
  }

  it(`gives transformers' log-probs within ${TOLERANCE} nats (F32 and Q8_0 files)`, async () => {
    const ours: Record<string, number[]> = {};
    for (const { family, tie, headDim } of cases) {
      const dir = path.join(tmp, family);
      writeTinyModel(dir, { family, tie, numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim, intermediateSize: 96, seed: 11 });
      if (family === 'phi3') plainPhi3(dir);
      for (const type of ['f32', 'q8_0'] as const) {
        const name = `${family}-${type}.gguf`;
        writeGguf(dir, path.join(tmp, name), { type });
        const model = await LocalModel.load(path.join(tmp, name));
        try {
          ours[name] = (await model.score([{ inputIds: IDS, responseStart: 1 }]))[0]!;
        } finally {
          await model.close();
        }
      }
    }
    const py = await run(interopPython!, ['-c', PY, tmp, JSON.stringify(IDS), ...Object.keys(ours)]);
    expect(py.status, py.stderr.slice(-2000)).toBe(0);
    const theirs = JSON.parse(py.stdout.trim().split('\n').pop()!) as Record<string, number[]>;
    for (const [name, lp] of Object.entries(ours)) {
      const worst = Math.max(...lp.map((v, i) => Math.abs(v - theirs[name]![i]!)));
      console.log(`transformers' GGUF loader vs Hindsight, ${name}: max |Δ log-prob| ${worst.toExponential(2)}`);
      expect(worst, name).toBeLessThan(TOLERANCE);
    }
  }, 600_000);

  /**
   * A tiny folder of `options` written as a Q8_0 GGUF, that GGUF made a folder again as a merged
   * model of it is (config.json from the metadata), and transformers' log-probs on that folder
   * (its class `cls`) against Hindsight's on the GGUF; returns the folder.
   */
  async function throughTheFolder(name: string, options: TinyModelOptions, cls: string): Promise<string> {
    const dir = path.join(tmp, name);
    writeTinyModel(dir, options);
    const file = path.join(tmp, `${name}.gguf`);
    writeGguf(dir, file, { type: 'q8_0' });
    const folder = writeMergedModel(Checkpoint.open(file), path.join(tmp, `${name}-folder`), { r: 1, alpha: 1, targets: [] }, [], new Map());
    const model = await LocalModel.load(file);
    let ours: number[];
    try {
      ours = (await model.score([{ inputIds: IDS, responseStart: 1 }]))[0]!;
    } finally {
      await model.close();
    }
    const py = await run(interopPython!, ['-c', PY_FOLDER, folder, JSON.stringify(IDS)]);
    expect(py.status, py.stderr.slice(-2000)).toBe(0);
    const theirs = JSON.parse(py.stdout.trim().split('\n').pop()!) as { class: string; logprobs: number[] };
    expect(theirs.class).toBe(cls);
    const worst = Math.max(...ours.map((v, i) => Math.abs(v - theirs.logprobs[i]!)));
    console.log(`transformers (the folder of a ${name} Q8_0 GGUF) vs Hindsight (the GGUF): max |Δ log-prob| ${worst.toExponential(2)}`);
    expect(worst).toBeLessThan(TOLERANCE);
    return folder;
  }

  it("reads a Phi-3 GGUF's LongRoPE and partial rotation as transformers runs the folder Hindsight writes for it", async () => {
    await throughTheFolder('phi3-longrope', { family: 'phi3', numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 11 }, 'Phi3ForCausalLM');
  }, 600_000);

  // transformers' GGUF loader keeps Gemma 2's default caps (50, 30) whatever the file says; the
  // folder Hindsight writes for the file carries them, as floats (transformers 5 refuses 1 for 1.0).
  it("reads a Gemma 2 GGUF's soft-caps and sliding layers as transformers runs the folder Hindsight writes for it", async () => {
    const folder = await throughTheFolder('gemma2', { family: 'gemma2', numLayers: 3, numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, queryPreAttnScalar: 16, seed: 11, tie: true }, 'Gemma2ForCausalLM');
    expect(fs.readFileSync(path.join(folder, 'config.json'), 'utf8')).toMatch(/"attn_logit_softcapping": 1\.0,/);
  }, 600_000);

  // transformers' GGUF loader has no glm4 mapping; the folder Hindsight writes for the file does.
  it("reads a GLM-4 GGUF's RoPE over adjacent pairs and fused gate/up as transformers runs the folder Hindsight writes for it", async () => {
    await throughTheFolder('glm4', { family: 'glm4', numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 11 }, 'Glm4ForCausalLM');
  }, 600_000);
});
