// Why WebGPU cannot run, worded per surface as cuda-errors.ts words CUDA's problems: the
// command line names its `--device` flag, the app its Device field (docs/design.md §Devices).
// A SurfaceError carries both wordings out of a worker thread (worker-serve.ts), so this
// needs no transport of its own.
//
// Node-free and free of ONNX Runtime on purpose, like cuda-errors.ts.
import { SurfaceError } from '../../src-shared/types.js';

export type WebGpuProblem =
  /** This platform's onnxruntime-node build does not carry the WebGPU provider. */
  | { kind: 'platform'; platform: string }
  /** The provider is there, but no GPU adapter answered (no Vulkan / Direct3D 12 / Metal driver). */
  | { kind: 'no-adapter'; reason: string }
  /** An adapter answered, but ONNX Runtime could not create the session on it. */
  | { kind: 'no-session'; reason: string };

/** The problem in words that name neither a flag nor a field. */
export function describeWebGpuProblem(problem: WebGpuProblem): string {
  switch (problem.kind) {
    case 'platform':
      return `ONNX Runtime's WebGPU provider is not part of its ${problem.platform} build`;
    case 'no-adapter':
      return `WebGPU found no GPU (${problem.reason}); it needs the GPU's Vulkan driver on Linux (libvulkan1 and the vendor's driver), Direct3D 12 on Windows, Metal on macOS`;
    case 'no-session':
      return `ONNX Runtime could not create a WebGPU session (${problem.reason})`;
  }
}

function sentence(text: string): string {
  return text[0]!.toUpperCase() + text.slice(1);
}

/** What the app's user can do: a missing driver can be installed; otherwise only the CPU is left. */
function appAdvice(problem: WebGpuProblem): string {
  return problem.kind === 'no-adapter' ? 'Install the driver and restart Hindsight, or set the Device field to CPU.' : 'Set the Device field to CPU.';
}

/** WebGPU was asked for and cannot run. Its message is the command line's; `forApp()` is the app's. */
export class WebGpuUnavailableError extends SurfaceError {
  constructor(readonly problem: WebGpuProblem) {
    const what = describeWebGpuProblem(problem);
    super(`--device webgpu: ${what}; use --device cpu`, `${sentence(what)}. ${appAdvice(problem)}`);
  }
}

/**
 * The problem in ONNX Runtime's error from creating a WebGPU session: its adapter request
 * failing is the user's situation (no driver), anything else is the session's.
 */
export function webGpuProblemFrom(message: string): WebGpuProblem {
  const adapter = /Failed to get a WebGPU adapter:?\s*([^\n]*)/.exec(message);
  if (adapter) return { kind: 'no-adapter', reason: adapter[1]!.trim() || 'no adapter' };
  return { kind: 'no-session', reason: message.split('\n')[0] ?? '' };
}
