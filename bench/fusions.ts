/**
 * `npx tsx bench/fusions.ts` — decoding with ONNX Runtime's fused ops beside the same graphs in
 * standard ops, on the device where the table in src-main/model/ort-session.ts
 * (INFERENCE_FUSIONS) uses them: WebGPU (docs/design.md §Devices, "Fewer kernels a decode step on
 * WebGPU"). Six engines of one model in one process, alternating run by run so that other work
 * on the machine loads them alike: standard ops; each RMSNorm one SimplifiedLayerNormalization;
 * RoPE one RotaryEmbedding; both (the device's default); and both with a live adapter (rank 16
 * on all seven projections, as after a fine-tune) whose branch is standard ops (two Transposes,
 * two MatMuls, a Mul and an Add each) or two Gemms (the device's default, `fusedLora`).
 *
 * Models: the demo model (stories260K) and a random Qwen3 (hidden 256, 8 layers, four norms and
 * two RoPEs a layer), written to a temp folder. Each: BENCH_NEW_TOKENS (64) greedy tokens after a
 * 7-token prompt, BENCH_REPEATS (7) runs of each engine after a warm-up; prints ms a token
 * (median, min) for each, its speed as a ratio of its group's first (standard ops; LoRA in
 * standard ops), the generate graph's node
 * count (a decode step's ops before ONNX Runtime's own rewrites: what a GPU's per-kernel overhead
 * scales with), whether the tokens agree and the largest |Δ log-prob| from that first one's.
 *
 * Options (env): BENCH_DEVICE (webgpu), BENCH_NEW_TOKENS (64), BENCH_REPEATS (7), BENCH_MODEL
 * (a checkpoint folder measured after those two: on a GPU, bench:gpu's bench/output/qwen3-0.6b;
 * bench/gpu-session.sh's `fusions` stage). Without a WebGPU adapter it says so and stops (Mesa's
 * lavapipe is one on a CPU).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../src-main/model/inference-engine.js';
import { checkpointWeights, decoderGraph } from '../src-main/model/decoder.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { liveNodes } from '../src-main/graph/onnx.js';
import type { Device } from '../src-main/model/ort-session.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { loraInputHook, type LoraShape } from '../src-main/model/lora-inputs.js';
import { randomAdapter } from '../tools/random-adapter.js';

const device = (process.env.BENCH_DEVICE ?? 'webgpu') as Device;
const newTokens = Number(process.env.BENCH_NEW_TOKENS ?? 64);
const repeats = Number(process.env.BENCH_REPEATS ?? 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Each engine measured: its fused ops, and whether it decodes with a live adapter (`ADAPTER`); each is compared with its group's `baseline`. */
const VARIANTS = {
  'standard ops': { fusions: { fusedNorms: false, fusedRope: false }, adapter: false, baseline: 'standard ops' },
  'norms': { fusions: { fusedNorms: true, fusedRope: false }, adapter: false, baseline: 'standard ops' },
  'RoPE': { fusions: { fusedNorms: false, fusedRope: true }, adapter: false, baseline: 'standard ops' },
  'both': { fusions: { fusedNorms: true, fusedRope: true }, adapter: false, baseline: 'standard ops' },
  'LoRA in standard ops': { fusions: { fusedNorms: true, fusedRope: true, fusedLora: false }, adapter: true, baseline: 'LoRA in standard ops' },
  'LoRA as Gemms': { fusions: { fusedNorms: true, fusedRope: true, fusedLora: true }, adapter: true, baseline: 'LoRA in standard ops' },
} as const;
type Variant = keyof typeof VARIANTS;

/** The adapter the LoRA variants decode with: rank 16 on all seven projections, B far from zero. */
const ADAPTER: LoraShape = { r: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] };
/** Nodes in the generate graph (a decode step's, before ONNX Runtime's own fusions), a device-independent count. */
function decodeStepNodes(dir: string, variant: (typeof VARIANTS)[Variant]): number {
  const { fusedLora, ...fusions } = { fusedLora: false, ...variant.fusions };
  const linear = variant.adapter ? loraInputHook(ADAPTER, undefined, fusedLora) : undefined;
  return liveNodes(decoderGraph(checkpointWeights(Checkpoint.open(dir)), { output: 'last_logprobs', kvCache: 'written', fusedScores: false, linear, ...fusions }).graph).length;
}

async function measure(label: string, dir: string, prompt: number[]): Promise<void> {
  const engines = Object.fromEntries(Object.entries(VARIANTS).map(([name, v]) => {
    const engine = ModelEngine.open(dir, { device, graphCache: false, fusions: v.fusions, ...(v.adapter ? { lora: ADAPTER } : {}) });
    if (v.adapter) engine.setLora(randomAdapter(engine.config, ADAPTER, 3, 0.02));
    return [name, engine];
  })) as Record<Variant, ModelEngine>;
  try {
    const request = { maxNewTokens: newTokens, stopTokenIds: [] };
    const warm = {} as Record<Variant, Awaited<ReturnType<ModelEngine['generate']>>>;
    for (const [name, engine] of Object.entries(engines) as [Variant, ModelEngine][]) warm[name] = await engine.generate(prompt, request); // warm-up
    const times = Object.fromEntries(Object.keys(engines).map((name) => [name, [] as number[]])) as Record<Variant, number[]>;
    for (let r = 0; r < repeats; r++) {
      for (const [name, engine] of Object.entries(engines) as [Variant, ModelEngine][]) {
        const start = performance.now();
        const out = await engine.generate(prompt, request);
        times[name].push((performance.now() - start) / out.tokens.length);
      }
    }
    console.log(`${label}, ${device}, ms a token (median, min); the LoRA rows with rank ${ADAPTER.r} on all seven projections:`);
    for (const name of Object.keys(engines) as Variant[]) {
      const out = warm[name], baseline = VARIANTS[name].baseline, reference = warm[baseline];
      const sameTokens = out.tokens.length === reference.tokens.length && out.tokens.every((t, i) => t === reference.tokens[i]);
      const drift = Math.max(...out.logprobs.map((l, i) => Math.abs(l - reference.logprobs[i]!)));
      console.log(`  ${name.padEnd(20)} ${median(times[name]).toFixed(1)} (min ${Math.min(...times[name]).toFixed(1)}); ×${(median(times[baseline]) / median(times[name])).toFixed(2)} the speed of ${baseline}; ${decodeStepNodes(dir, VARIANTS[name])} graph nodes; tokens ${sameTokens ? 'the same' : 'DIFFER'}, max |Δ log-prob| ${drift.toExponential(1)}`);
    }
  } finally {
    for (const engine of Object.values(engines)) await engine.close();
  }
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-fusions-'));
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
  console.error(`fusions: ${(error as Error).message.split('\n')[0]}`);
  process.exitCode = 1;
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
