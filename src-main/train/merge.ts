/**
 * Using an adapter without the trainer:
 *
 * - {@link writeMergedModel}: the optional merged export, W' = W + s·B·A for every adapted
 *   linear (s = alpha / r), written as a Hugging Face folder (fp32 `model.safetensors`,
 *   `config.json` with dtype and torch_dtype float32, tokenizer files copied) that any tool, and
 *   Hindsight's own `score`/`generate`, loads as a plain model. Every tensor is held in
 *   memory while writing, so this is meant for models that fit in RAM in fp32.
 * - {@link adapterScoreGraph} / {@link scoreWithAdapter}: the decoder with LoRA applied
 *   unmerged (y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ) through the decoder builder's linear hook — an
 *   implementation independent of the training graph, used to check that an exported
 *   adapter scores as the trained one did.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { configJsonText, writeGgufCompanionFiles } from '../model/gguf/folder-files.js';
import { checkpointWeights, decoderGraph, transpose2dF32, type LinearHook } from '../model/decoder.js';
import { f32Tensor, type Graph } from '../graph/ir.js';
import { createSession, type Device } from '../model/ort-session.js';
import { scoreRows, type ScoreRow } from '../model/score-feeds.js';
import { writeSafetensorsAtomic, writeTextAtomic } from './files.js';
import { loraAKey, loraBKey } from './lora.js';
import { joinFusedTensors } from '../model/fused-projections.js';
import { readAdapter } from './peft.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights } from './training-step.js';
import type { TensorToWrite } from '../model/safetensors.js';

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'generation_config.json', 'chat_template.jinja', 'tokenizer.model'];

/** W [out, in] += s·B [out, r]·A [r, in], in float64 accumulation. */
export function mergeInto(w: Float32Array, a: Float32Array, b: Float32Array, r: number, inF: number, outF: number, scaling: number): void {
  const row = new Float64Array(inF);
  for (let o = 0; o < outF; o++) {
    row.fill(0);
    for (let k = 0; k < r; k++) {
      const bk = b[o * r + k]!;
      if (bk === 0) continue;
      const aRow = k * inF;
      for (let i = 0; i < inF; i++) row[i]! += bk * a[aRow + i]!;
    }
    for (let i = 0; i < inF; i++) w[o * inF + i] = w[o * inF + i]! + scaling * row[i]!;
  }
}

export function writeMergedModel(ckpt: Checkpoint, dir: string, lora: LoraConfig, specs: readonly LoraTensorSpec[], weights: LoraWeights): string {
  fs.mkdirSync(dir, { recursive: true });
  const scaling = lora.alpha / lora.r;
  const byWeight = new Map(specs.map((s) => [`${s.module.replace(/^base_model\.model\./, '')}.weight`, s]));
  const tensors: Record<string, TensorToWrite> = {};
  for (const name of ckpt.tensorNames.sort()) {
    const entry = ckpt.entry(name);
    if (entry.dtype !== 'F32' && entry.dtype !== 'F16' && entry.dtype !== 'BF16' && entry.dtype !== 'F64') continue;
    const data = ckpt.readFloat32(name, entry.shape).slice();
    const spec = byWeight.get(ckpt.decoderName(name)); // written back under the stored name (a multimodal folder's root)
    if (spec) mergeInto(data, weights.get(loraAKey(spec))!, weights.get(loraBKey(spec))!, lora.r, spec.inFeatures, spec.outFeatures, scaling);
    tensors[name] = { dtype: 'F32', shape: entry.shape, data };
  }
  joinFusedTensors(ckpt.config, tensors); // Phi-3's q/k/v and gate/up stored fused again, as its config.json expects
  writeSafetensorsAtomic(path.join(dir, 'model.safetensors'), tensors, { format: 'pt' });
  if (ckpt.gguf) {
    writeGgufCompanionFiles(ckpt.gguf, dir); // a GGUF base: config.json and tokenizer files from its metadata
    return dir;
  }
  const config = JSON.parse(fs.readFileSync(path.join(ckpt.dir, 'config.json'), 'utf8'));
  // transformers ≥ 5 names the dtype `dtype` (and loads in it by default), older ones `torch_dtype`:
  // both say float32, or a bf16 base's merged copy would load rounded back to bf16.
  writeTextAtomic(path.join(dir, 'config.json'), configJsonText({ ...config, torch_dtype: 'float32', dtype: 'float32' }));
  for (const f of TOKENIZER_FILES) if (fs.existsSync(path.join(ckpt.dir, f))) fs.copyFileSync(path.join(ckpt.dir, f), path.join(dir, f));
  return dir;
}

/** The score graph (output `logprobs`) with LoRA applied through the linear hook. */
export function adapterScoreGraph(ckpt: Checkpoint, lora: LoraConfig, specs: readonly LoraTensorSpec[], weights: LoraWeights): Graph {
  const byModule = new Map(specs.map((s) => [s.module.replace(/^base_model\.model\./, ''), s]));
  const hook: LinearHook = (b, site, base) => {
    const spec = byModule.get(site.module);
    if (!spec) return base;
    const aT = b.initializer(`${site.module}.lora_A.T`, f32Tensor([spec.inFeatures, lora.r], transpose2dF32(weights.get(loraAKey(spec))!, lora.r, spec.inFeatures)));
    const bT = b.initializer(`${site.module}.lora_B.T`, f32Tensor([lora.r, spec.outFeatures], transpose2dF32(weights.get(loraBKey(spec))!, spec.outFeatures, lora.r)));
    const delta = b.mul(b.matmul(b.matmul(site.input, aT), bT), b.scalar(lora.alpha / lora.r));
    return b.add(base, delta);
  };
  return decoderGraph(checkpointWeights(ckpt), { output: 'target_logprobs', linear: hook }, 'score_lora').graph;
}

/**
 * Log-probs of each row's response tokens under base + adapter (a PEFT folder), through the
 * adapter baked into the graph: the tests' check on the other paths (`score --adapter` runs the
 * model engine's LoRA inputs). One row at a time, blocking the calling thread.
 */
export async function scoreWithAdapter(modelDir: string, adapterDir: string, rows: ScoreRow[], device: Device = 'cpu'): Promise<number[][]> {
  const ckpt = Checkpoint.open(modelDir);
  const adapter = readAdapter(adapterDir, ckpt.config);
  const { session } = await createSession(adapterScoreGraph(ckpt, adapter.lora, adapter.specs, adapter.weights), { device });
  try {
    const out: number[][] = [];
    for (const r of rows) out.push((await scoreRows((feeds) => session.run(feeds), [r]))[0]!);
    return out;
  } finally {
    await session.release();
  }
}
