// --device webgpu (docs/design.md §Devices). Where a GPU adapter answers, the model runs there
// and gives the CPU's results: the golden story token for token, a training step's loss and
// gradient norm. Where none answers (the build machines: no GPU), each surface fails in one
// line that names what is missing, and nothing runs on the CPU instead.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import { WebGpuUnavailableError, webGpuProblemFrom } from '../../src-main/model/webgpu-errors.js';
import { errorPayload } from '../../src-main/model/worker-serve.js';
import { reviveError } from '../../src-main/model/worker-host.js';
import { createTrainStep, type StepMetrics } from '../../src-main/train/training-step.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { runCli } from '../helpers/cli.js';
import { adamw, LORA, lossConfig, tinyBatch } from '../train/step-helpers.js';

const STORIES = path.resolve('resources/models/stories260K');
const reference = JSON.parse(fs.readFileSync(path.join(STORIES, 'reference_greedy.json'), 'utf8')) as { bos_greedy_200_ids: number[] };

/** The one line a missing adapter (or provider) gives, after the command's name. */
const NO_WEBGPU = /^--device webgpu: (WebGPU found no GPU \(.+\); it needs the GPU's Vulkan driver on Linux|ONNX Runtime's WebGPU provider is not part of its)/;

describe('--device webgpu', () => {
  it('generate: the golden story on the GPU, or one line naming the driver and no reply', async () => {
    const r = await runCli('generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '20', '--device', 'webgpu', '--json');
    if (r.code === 0) {
      expect(r.json().execution_provider).toBe('webgpu');
      expect(r.json().tokens).toEqual(reference.bos_greedy_200_ids.slice(5, 25));
      return;
    }
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.replace(/^hindsight generate: /, '')).toMatch(NO_WEBGPU);
  });

  it('a training step: the CPU step\'s loss and gradient norm on the GPU, or a WebGpuUnavailableError', async () => {
    const config = Checkpoint.open(STORIES).config;
    const run = async (device: 'cpu' | 'webgpu'): Promise<StepMetrics> => {
      const step = await createTrainStep(STORIES, { lora: LORA, loss: lossConfig('combine'), optimizer: adamw(1e-3), device });
      try {
        const weights = initLora(loraSpecs(config, LORA.targets), LORA.r, 1);
        const batch = tinyBatch('combine', config.vocabSize, 3);
        return (await step.step(batch, weights, { step: 0, m: new Map(), v: new Map() })).metrics;
      } finally {
        await step.close();
      }
    };
    const cpu = await run('cpu');
    const gpu: StepMetrics | Error = await run('webgpu').catch((e: Error) => e);
    if (gpu instanceof Error) {
      expect(gpu).toBeInstanceOf(WebGpuUnavailableError);
      expect(gpu.message).toMatch(NO_WEBGPU);
      return;
    }
    expect(gpu.loss).toBeCloseTo(cpu.loss, 5);
    expect(gpu.gradNorm).toBeCloseTo(cpu.gradNorm, 4);
  });
});

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
