// WebGPU's inference graphs (src-main/model/ort-session.ts, INFERENCE_FUSIONS: fused norms and
// RoPE, a live adapter's branch as two Gemms, no FusedMatMul) against the CPU's standard ones,
// across devices: scores of rows long
// enough to cross the kernels' tiles (40 tokens; ONNX Runtime's WebGPU MultiHeadAttention, tried
// for the same purpose, went wrong from the 9th, docs/design.md §Devices), for grouped and plain
// attention and two head sizes; and sampled generation, one long prompt's n sequences and two
// prompts left-padded together; the same with an adapter on all seven projections. The other WebGPU tests compare WebGPU with itself (host cache
// and GPU cache) or with a short golden story, so a kernel wrong on longer inputs passes them.
// Runs where a WebGPU adapter answers (Mesa's lavapipe on the build machines, which .ci/run
// installs); elsewhere it says so and skips.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelEngine, type BatchPrompt } from '../../src-main/model/inference-engine.js';
import { inferenceFusions } from '../../src-main/model/ort-session.js';
import { webGpuAnswers } from '../helpers/webgpu.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { maxAbsDiff } from '../helpers/numbers.js';
import type { LoraShape } from '../../src-main/model/lora-inputs.js';
import { randomAdapter } from '../../tools/random-adapter.js';

const hasWebGpu = await webGpuAnswers('webgpu-fusions', 'nothing is checked');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-webgpu-fusions-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** The same requests on the CPU (its own graphs) and on WebGPU (its fused ones), with `adapter`'s weights where given. */
async function onBoth<T>(dir: string, run: (engine: ModelEngine) => Promise<T>, adapter?: { lora: LoraShape; seed: number }): Promise<{ cpu: T; webgpu: T }> {
  const results = {} as { cpu: T; webgpu: T };
  for (const device of ['cpu', 'webgpu'] as const) {
    const engine = ModelEngine.open(dir, { device, graphCache: false, ...(adapter ? { lora: adapter.lora } : {}) });
    try {
      if (adapter) engine.setLora(randomAdapter(engine.config, adapter.lora, adapter.seed));
      results[device] = await run(engine);
    } finally {
      await engine.close();
    }
  }
  return results;
}

describe.runIf(hasWebGpu)('WebGPU\'s fused graphs against the CPU\'s', () => {
  it('are what the table says: fused norms and RoPE, LoRA as Gemms, no FusedMatMul', () => {
    expect(inferenceFusions('webgpu')).toEqual({ fusedScores: false, fusedNorms: true, fusedRope: true, fusedLora: true });
  });

  it.each([
    { label: 'grouped attention (rep 2), head size 8', numKvHeads: 2, headDim: 8 },
    { label: 'plain attention, head size 16', numKvHeads: 4, headDim: 16 },
  ])('score 40-token rows as the CPU does: $label', async ({ label, numKvHeads, headDim }) => {
    const dir = writeTinyModel(path.join(root, label.replace(/\W+/g, '-')), { family: 'qwen3', seed: 5, hiddenSize: 4 * headDim, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads, headDim, std: 0.3, tie: true }).dir;
    const rows = [0, 1].map((r) => ({ inputIds: Array.from({ length: 40 - 9 * r }, (_, i) => (i * 7 + 3 + r) % 50), responseStart: 1 }));
    const { cpu, webgpu } = await onBoth(dir, (engine) => engine.score(rows, { batchSize: 2 }));
    webgpu.forEach((row, i) => {
      expect(row).toHaveLength(cpu[i]!.length);
      expect(maxAbsDiff(row, cpu[i]!)).toBeLessThan(1e-4);
    });
  });

  // Phi-3: LongRoPE's attention factor on the fused op's cos and sin (the whole head turned), and
  // Phi-4-mini's partial rotation (the op's rotary_embedding_dim).
  it.each([
    { label: 'Phi-3, LongRoPE, the whole head turned', partial: 1 },
    { label: 'Phi-4-mini, half of each head turned', partial: 0.5 },
  ])('score 40-token rows as the CPU does: $label', async ({ label, partial }) => {
    const model = writeTinyModel(path.join(root, label.replace(/\W+/g, '-')), { family: 'phi3', seed: 7, hiddenSize: 64, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, std: 0.3 });
    const config = model.config as { rope_scaling: { short_factor: number[]; long_factor: number[] } };
    const pairs = (16 * partial) / 2;
    const factors = Array.from({ length: pairs }, (_, i) => 1 + 0.4 * i);
    fs.writeFileSync(path.join(model.dir, 'config.json'), JSON.stringify({ ...config, partial_rotary_factor: partial, rope_scaling: { ...config.rope_scaling, short_factor: factors, long_factor: factors } }));
    const rows = [0, 1].map((r) => ({ inputIds: Array.from({ length: 40 - 9 * r }, (_, i) => (i * 7 + 3 + r) % 50), responseStart: 1 }));
    const { cpu, webgpu } = await onBoth(model.dir, (engine) => engine.score(rows, { batchSize: 2 }));
    webgpu.forEach((row, i) => expect(maxAbsDiff(row, cpu[i]!)).toBeLessThan(1e-4));
  });

  // GLM-4: the fused op turning adjacent pairs (interleaved) of half of each head, q/k/v biases,
  // gate/up fused, four norms a layer.
  it('GLM-4: scores 40-token rows as the CPU does', async () => {
    const dir = writeTinyModel(path.join(root, 'glm4'), { family: 'glm4', seed: 9, hiddenSize: 64, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, std: 0.3 }).dir;
    const rows = [0, 1].map((r) => ({ inputIds: Array.from({ length: 40 - 9 * r }, (_, i) => (i * 7 + 3 + r) % 50), responseStart: 1 }));
    const { cpu, webgpu } = await onBoth(dir, (engine) => engine.score(rows, { batchSize: 2 }));
    webgpu.forEach((row, i) => expect(maxAbsDiff(row, cpu[i]!)).toBeLessThan(1e-4));
  });

  // Gemma 3: four fused norms a layer (two of them after a branch), GELU, two RoPE tables, and sliding
  // layers whose window (8 positions here) is counted from the mask (CumSum), in scores and in
  // generation over the GPU-resident cache with two prompts left-padded together.
  it('Gemma 3: scores 40-token rows and generates, sampled, as the CPU does', async () => {
    const dir = writeTinyModel(path.join(root, 'gemma3'), { family: 'gemma3', seed: 8, hiddenSize: 64, intermediateSize: 64, numLayers: 3, numHeads: 4, numKvHeads: 2, headDim: 16, std: 0.3, tie: true }).dir;
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, sliding_window: 8 }));
    const rows = [0, 1].map((r) => ({ inputIds: Array.from({ length: 40 - 9 * r }, (_, i) => (i * 7 + 3 + r) % 50), responseStart: 1 }));
    const prompts: BatchPrompt[] = [{ promptIds: rows[0]!.inputIds.slice(0, 14), seeds: [7] }, { promptIds: rows[1]!.inputIds.slice(0, 5), seeds: [8] }];
    const { cpu, webgpu } = await onBoth(dir, async (engine) => ({
      scores: await engine.score(rows, { batchSize: 2 }),
      outs: (await engine.generateBatch(prompts, { temperature: 1, maxNewTokens: 16, stopTokenIds: [] })).flat(),
    }));
    webgpu.scores.forEach((row, i) => expect(maxAbsDiff(row, cpu.scores[i]!)).toBeLessThan(1e-4));
    webgpu.outs.forEach((out, j) => {
      expect(out.tokens).toEqual(cpu.outs[j]!.tokens);
      expect(maxAbsDiff(out.logprobs, cpu.outs[j]!.logprobs)).toBeLessThan(1e-4);
    });
  });

  it('generate, sampled, what the CPU generates: a 22-token prompt\'s 4 sequences, and two prompts padded together', async () => {
    const prompt = [1, 410, 471, 419, 285, 467, 403, 407, 261, 378, 410, 475, 13, 13, 447, 419, 419, 293, 413, 303, 413, 467];
    const batches: BatchPrompt[][] = [
      [{ promptIds: prompt, seeds: [100, 101, 102, 103] }],
      [{ promptIds: prompt, seeds: [7] }, { promptIds: prompt.slice(0, 9), seeds: [8] }],
    ];
    const request = { temperature: 1, maxNewTokens: 24, stopTokenIds: [] };
    const { cpu, webgpu } = await onBoth(path.resolve('resources/models/stories260K'), async (engine) => {
      const outs = [];
      for (const batch of batches) outs.push((await engine.generateBatch(batch, request)).flat());
      return outs.flat();
    });
    expect(webgpu).toHaveLength(6);
    webgpu.forEach((out, j) => {
      expect(out.tokens).toEqual(cpu[j]!.tokens);
      expect(maxAbsDiff(out.logprobs, cpu[j]!.logprobs)).toBeLessThan(1e-4);
    });
  });

  it('with an adapter on all seven projections: scores and sampled generation as the CPU\'s', async () => {
    const lora: LoraShape = { r: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] };
    const dir = writeTinyModel(path.join(root, 'adapted'), { family: 'qwen3', seed: 6, hiddenSize: 32, intermediateSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8, std: 0.3, tie: true }).dir;
    const rows = [{ inputIds: Array.from({ length: 40 }, (_, i) => (i * 5 + 2) % 50), responseStart: 1 }];
    const run = async (engine: ModelEngine) => ({
      scores: await engine.score(rows),
      sampled: (await engine.generateBatch([{ promptIds: [1, 7, 9, 11], seeds: [3, 4] }], { temperature: 1, maxNewTokens: 16, stopTokenIds: [] })).flat(),
    });
    const { cpu, webgpu } = await onBoth(dir, run, { lora, seed: 11 });
    const base = await onBoth(dir, run);
    expect(maxAbsDiff(webgpu.scores[0]!, cpu.scores[0]!)).toBeLessThan(1e-4);
    expect(maxAbsDiff(webgpu.scores[0]!, base.webgpu.scores[0]!)).toBeGreaterThan(1e-2); // the adapter moves the scores
    webgpu.sampled.forEach((out, j) => {
      expect(out.tokens).toEqual(cpu.sampled[j]!.tokens);
      expect(maxAbsDiff(out.logprobs, cpu.sampled[j]!.logprobs)).toBeLessThan(1e-4);
    });
  });
});
