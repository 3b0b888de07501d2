/**
 * `npx tsx bench/fused-norms.ts` — decoding with each RMSNorm as ONNX Runtime's
 * SimplifiedLayerNormalization (one kernel) beside the same norm in seven standard ops, on the
 * device where the table in src-main/model/ort-session.ts (INFERENCE_FUSIONS) fuses them:
 * WebGPU (docs/design.md §Devices, "One kernel per norm on WebGPU"). Two engines of one model in
 * one process, alternating run by run, so other work on the machine loads both alike.
 *
 * Models: the demo model (stories260K) and a random Qwen3 (hidden 256, 8 layers, four norms a
 * layer), written to a temp folder. Each: BENCH_NEW_TOKENS (64) greedy tokens after a 7-token
 * prompt, BENCH_REPEATS (7) runs of each engine after a warm-up; prints ms a token (median, min)
 * for each, their ratio, whether the tokens agree and the largest |Δ log-prob| between them.
 *
 * Options (env): BENCH_DEVICE (webgpu), BENCH_NEW_TOKENS (64), BENCH_REPEATS (7), BENCH_MODEL
 * (a checkpoint folder measured after those two: on a GPU, bench:gpu's bench/output/qwen3-0.6b;
 * bench/gpu-session.sh's `norms` stage). Without a WebGPU adapter it says so and stops (Mesa's
 * lavapipe is one on a CPU).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import type { Device } from '../src-main/model/ort-session.js';
import { writeTinyModel } from '../tools/tiny-models.js';

const device = (process.env.BENCH_DEVICE ?? 'webgpu') as Device;
const newTokens = Number(process.env.BENCH_NEW_TOKENS ?? 64);
const repeats = Number(process.env.BENCH_REPEATS ?? 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(label: string, dir: string, prompt: number[]): Promise<void> {
  const engines = {
    standard: ModelEngine.open(dir, { device, graphCache: false, fusedNorms: false }),
    fused: ModelEngine.open(dir, { device, graphCache: false, fusedNorms: true }),
  };
  try {
    const request = { maxNewTokens: newTokens, stopTokenIds: [] };
    const [a, b] = [await engines.standard.generate(prompt, request), await engines.fused.generate(prompt, request)]; // warm-up
    const sameTokens = a.tokens.length === b.tokens.length && a.tokens.every((t, i) => t === b.tokens[i]);
    const drift = Math.max(...a.logprobs.map((l, i) => Math.abs(l - b.logprobs[i]!)));
    const times: Record<keyof typeof engines, number[]> = { standard: [], fused: [] };
    for (let r = 0; r < repeats; r++) {
      for (const [name, engine] of Object.entries(engines) as [keyof typeof engines, ModelEngine][]) {
        const start = performance.now();
        const out = await engine.generate(prompt, request);
        times[name].push((performance.now() - start) / out.tokens.length);
      }
    }
    const line = (name: keyof typeof engines) => `${median(times[name]).toFixed(1)} ms a token (min ${Math.min(...times[name]).toFixed(1)})`;
    console.log(`${label}, ${device}: fused ${line('fused')}; standard ops ${line('standard')}; ×${(median(times.standard) / median(times.fused)).toFixed(2)} the speed; tokens ${sameTokens ? 'the same' : 'DIFFER'}, max |Δ log-prob| ${drift.toExponential(1)}`);
  } finally {
    for (const engine of Object.values(engines)) await engine.close();
  }
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-fused-norms-'));
try {
  console.log(`load ${os.loadavg()[0]!.toFixed(1)}`);
  await measure('stories260K', path.resolve('resources/models/stories260K'), [1, 403, 407, 261, 166, 13, 13]);
  const qwen3 = writeTinyModel(path.join(tmp, 'qwen3'), { family: 'qwen3', seed: 5, hiddenSize: 256, intermediateSize: 512, numLayers: 8, numHeads: 8, numKvHeads: 4, headDim: 32, std: 0.05, tie: true }).dir;
  await measure('random Qwen3 (hidden 256, 8 layers)', qwen3, [5, 9, 40, 41, 42, 7, 3]);
  const extra = process.env.BENCH_MODEL;
  if (extra && !fs.existsSync(path.join(extra, 'config.json'))) throw new Error(`BENCH_MODEL ${extra} holds no config.json (bench:gpu writes bench/output/qwen3-0.6b)`);
  if (extra) await measure(path.basename(extra), path.resolve(extra), [5, 9, 40, 41, 42, 7, 3]);
  console.log(`load ${os.loadavg()[0]!.toFixed(1)}`);
} catch (error) {
  console.error(`fused-norms: ${(error as Error).message.split('\n')[0]}`);
  process.exitCode = 1;
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
