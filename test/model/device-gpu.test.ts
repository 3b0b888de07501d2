// --device webgpu and --device cuda (docs/design.md §Devices). Where the GPU path can run, the
// model runs there and, in fp32, gives the CPU's results: the golden story token for token, a
// training step's loss and gradient norm, a QLoRA (int4) step's as the CPU's int4 step; in fp16 (CUDA's default, docs/design.md §Precision)
// close ones. Where it cannot (the build machines: no NVIDIA GPU; WebGPU without a Vulkan
// driver), each surface fails in one line that names what is missing, and nothing runs on the
// CPU instead. Mesa's lavapipe is a WebGPU adapter on a CPU (slow: up to some 25 s per test on
// 2 cores while Mesa's shader cache is cold, 3 to 5 s after).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import { WebGpuUnavailableError, webGpuProblemFrom } from '../../src-main/model/webgpu-errors.js';
import { CudaUnavailableError } from '../../src-main/model/cuda-errors.js';
import type { Device } from '../../src-main/model/ort-session.js';
import { defaultPrecision, type Precision, type Quantize } from '../../src-shared/training.js';
import { errorPayload } from '../../src-main/model/worker-serve.js';
import { reviveError } from '../../src-main/model/worker-host.js';
import { createTrainStep } from '../../src-main/train/step-engine.js';
import type { StepMetrics } from '../../src-main/train/training-step.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { runCli } from '../helpers/cli.js';
import { adamw, LORA, lossConfig, tinyBatch } from '../train/step-helpers.js';

const STORIES = path.resolve('resources/models/stories260K');
const reference = JSON.parse(fs.readFileSync(path.join(STORIES, 'reference_greedy.json'), 'utf8')) as { bos_greedy_200_ids: number[] };

/** Each GPU path: the one line it fails with where it cannot run (after the command's name), and its error class. */
const GPUS = [
  {
    device: 'webgpu' as const,
    refusal: /^--device webgpu: (WebGPU found no GPU \(.+\); it needs the GPU's Vulkan driver on Linux|ONNX Runtime's WebGPU provider is not part of its)/,
    error: WebGpuUnavailableError,
  },
  {
    device: 'cuda' as const,
    refusal: /^--device cuda: (the ONNX Runtime CUDA provider is not installed|ONNX Runtime could not create a CUDA session|--device cuda needs Linux x64)/,
    error: CudaUnavailableError,
  },
];

/**
 * Says once per device, in the test log, that this machine checked the refusal and not the GPU
 * run. For WebGPU, Mesa's lavapipe (software Vulkan; Mesa 25.0's, Dawn refuses Debian 12's
 * 22.3) makes the GPU branch run on a CPU-only machine (.ci/run installs it; README, "WebGPU:
 * no set-up"); CUDA's runs only on an NVIDIA GPU after `npm run setup:gpu`.
 */
const saidNoGpu = new Set<string>();
function noGpuHere(device: string, line: string): void {
  if (saidNoGpu.has(device)) return;
  saidNoGpu.add(device);
  console.info(`device-gpu: ${device} cannot run here, so only its refusal is checked: ${line}`);
}

/** A first training step of the demo model: its loss and gradient norm. */
async function firstStep(device: Device, precision?: Precision, quantize?: Quantize): Promise<StepMetrics> {
  const config = Checkpoint.open(STORIES).config;
  const step = await createTrainStep(STORIES, { lora: LORA, loss: lossConfig('combine'), optimizer: adamw(1e-3), device, precision, quantize });
  try {
    const weights = initLora(loraSpecs(config, LORA.targets), LORA.r, 1);
    const batch = tinyBatch('combine', config.vocabSize, 3);
    return (await step.step(batch, weights, { step: 0, m: new Map(), v: new Map() })).metrics;
  } finally {
    await step.close();
  }
}

for (const gpu of GPUS) {
  describe(`--device ${gpu.device}`, () => {
    it('generate: the golden story in fp32 on the GPU (and fp16 says so), or one line naming what is missing and no reply', async () => {
      const generate = (...more: string[]) => runCli('generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '20', '--device', gpu.device, '--json', ...more);
      const r = await generate('--precision', 'fp32');
      if (r.code === 0) {
        expect(r.json().execution_provider).toBe(gpu.device);
        expect(r.json().precision).toBe('fp32');
        expect(r.json().tokens).toEqual(reference.bos_greedy_200_ids.slice(5, 25));
        expect((await generate()).json().precision).toBe(defaultPrecision(gpu.device));
        const half = await generate('--precision', 'fp16');
        expect(half.json().precision).toBe('fp16');
        const same = half.json().tokens.filter((t: number, i: number) => t === reference.bos_greedy_200_ids[5 + i]).length;
        console.info(`device-gpu: ${gpu.device} fp16 greedy story: ${same}/20 tokens as fp32's`);
        return;
      }
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]!.replace(/^hindsight generate: /, '')).toMatch(gpu.refusal);
      noGpuHere(gpu.device, lines[0]!);
    });

    it('a training step: the CPU step\'s loss within 1e-5 and gradient norm within 1e-4 relative in fp32 (fp16 near), or the device\'s error', async () => {
      const cpu = await firstStep('cpu');
      const fp32: StepMetrics | Error = await firstStep(gpu.device, 'fp32').catch((e: Error) => e);
      if (fp32 instanceof Error) {
        expect(fp32).toBeInstanceOf(gpu.error);
        expect(fp32.message).toMatch(gpu.refusal);
        noGpuHere(gpu.device, fp32.message);
        return;
      }
      expect(Math.abs(fp32.loss - cpu.loss)).toBeLessThan(1e-5);
      expect(Math.abs(fp32.gradNorm - cpu.gradNorm) / cpu.gradNorm).toBeLessThan(1e-4);
      const fp16 = await firstStep(gpu.device, 'fp16');
      console.info(`device-gpu: ${gpu.device} first step: loss cpu ${cpu.loss}, fp32 ${fp32.loss}, fp16 ${fp16.loss}; gradient norm cpu ${cpu.gradNorm}, fp32 ${fp32.gradNorm}, fp16 ${fp16.gradNorm}`);
      expect(Math.abs(fp16.loss - cpu.loss)).toBeLessThan(1e-3);
      expect(Math.abs(fp16.gradNorm - cpu.gradNorm) / cpu.gradNorm).toBeLessThan(2e-2);
    });

    it('a QLoRA (int4) training step: the CPU\'s int4 loss within 1e-5 and gradient norm within 1e-4 relative, or the device\'s error', async () => {
      const cpu = await firstStep('cpu', 'fp32', 'int4');
      const gpuStep: StepMetrics | Error = await firstStep(gpu.device, 'fp32', 'int4').catch((e: Error) => e);
      if (gpuStep instanceof Error) {
        expect(gpuStep).toBeInstanceOf(gpu.error);
        expect(gpuStep.message).toMatch(gpu.refusal);
        noGpuHere(gpu.device, gpuStep.message);
        return;
      }
      console.info(`device-gpu: ${gpu.device} int4 first step: loss cpu ${cpu.loss}, gpu ${gpuStep.loss}; gradient norm cpu ${cpu.gradNorm}, gpu ${gpuStep.gradNorm}`);
      expect(Math.abs(gpuStep.loss - cpu.loss)).toBeLessThan(1e-5);
      expect(Math.abs(gpuStep.gradNorm - cpu.gradNorm) / cpu.gradNorm).toBeLessThan(1e-4);
    });
  });
}

describe('WebGPU problems, in each surface\'s words', () => {
  // ONNX Runtime's own error when Dawn finds no adapter (seen on a machine without a GPU driver).
  const ORT_NO_ADAPTER = '/onnxruntime_src/onnxruntime/core/providers/webgpu/webgpu_context.cc:87 onnxruntime::webgpu::WebGpuContext::Initialize(…) '
    + 'status == wgpu::RequestAdapterStatus::Success was false. Failed to get a WebGPU adapter: No supported adapters\n';

  it('a missing adapter is the user\'s situation, named in one line; any other failure keeps ONNX Runtime\'s first line', () => {
    expect(webGpuProblemFrom(ORT_NO_ADAPTER)).toEqual({ kind: 'no-adapter', reason: 'No supported adapters' });
    expect(webGpuProblemFrom('Could not find an implementation for Foo(1) node\nmore')).toEqual({ kind: 'no-session', reason: 'Could not find an implementation for Foo(1) node' });
    const err = new WebGpuUnavailableError(webGpuProblemFrom(ORT_NO_ADAPTER));
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toBe("--device webgpu: WebGPU found no GPU (No supported adapters); it needs the GPU's Vulkan driver on Linux (libvulkan1 and the vendor's driver), Direct3D 12 on Windows, Metal on macOS; use --device cpu");
    expect(err.message).not.toContain('\n');
  });

  it('the app names its Device field, not the flag, also after the trip out of a worker', () => {
    const err = reviveError(errorPayload(new WebGpuUnavailableError({ kind: 'platform', platform: 'linux/arm64' })));
    expect(err).toBeInstanceOf(UserError);
    expect(err.message).toBe("--device webgpu: ONNX Runtime's WebGPU provider is not part of its linux/arm64 build; use --device cpu");
    expect(err).toBeInstanceOf(SurfaceError);
    const app = (err as SurfaceError).forApp();
    expect(app).toBe("ONNX Runtime's WebGPU provider is not part of its linux/arm64 build. Set the Device field to CPU.");
    expect(new WebGpuUnavailableError({ kind: 'no-adapter', reason: 'No supported adapters' }).forApp()).toMatch(/\. Install the driver and restart Hindsight, or set the Device field to CPU\.$/);
    expect(app).not.toMatch(/--device/);
  });
});
