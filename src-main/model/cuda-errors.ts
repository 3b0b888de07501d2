// Why CUDA cannot run, said once, and what to do about it said per surface: the command line
// names its `--device` flag, the app names its Device field. The error carries the problem,
// not the advice, so it survives the trip out of a worker thread (worker-serve.ts) and the
// app can word it for its own page (api/training-service.ts). See docs/design.md §Surfaces.
//
// Node-free and free of ONNX Runtime on purpose: the app's services import it at start-up.
import { SurfaceError } from '../../src-shared/types.js';

export type CudaProblem =
  /** CUDA provider builds exist for Linux x64 only. */
  | { kind: 'platform'; platform: string }
  /** The provider's libraries are not beside onnxruntime-node's binding. */
  | { kind: 'not-installed'; missing: string[]; dir: string }
  /** The libraries are there, but ONNX Runtime could not start a session on the GPU. */
  | { kind: 'no-session'; reason: string };

/** Where the user chose the device. */
export type DeviceSurface = 'cli' | 'app';

const SETUP_OFFLINE = '`npm run setup:gpu -- --from <the onnxruntime-gpu wheel or Microsoft.ML.OnnxRuntime.Gpu.Linux nupkg of onnxruntime-node\'s version>` offline';

/** The problem in words that name neither a flag nor a field. */
export function describeCudaProblem(problem: CudaProblem): string {
  switch (problem.kind) {
    case 'platform':
      return `CUDA needs Linux x64 (this is ${problem.platform})`;
    case 'not-installed':
      return `the ONNX Runtime CUDA provider is not installed (${problem.missing.join(', ')} missing in ${problem.dir})`;
    case 'no-session':
      return `ONNX Runtime could not create a CUDA session (${problem.reason}); check the NVIDIA driver and CUDA 13 / cuDNN 9 libraries`;
  }
}

function cliMessage(problem: CudaProblem): string {
  if (problem.kind === 'platform') return `--device cuda needs Linux x64 (this is ${problem.platform}); use --device cpu`;
  const or = problem.kind === 'no-session' ? ', or' : ';';
  return `--device cuda: ${describeCudaProblem(problem)}${or} run \`npm run setup:gpu\` (or ${SETUP_OFFLINE}), or use --device cpu`;
}

function appMessage(problem: CudaProblem): string {
  const what = describeCudaProblem(problem);
  const sentence = what[0]!.toUpperCase() + what.slice(1);
  if (problem.kind === 'platform') return `${sentence}: set the Device field to CPU.`;
  return `${sentence}. Run \`npm run setup:gpu\` in the Hindsight folder and restart Hindsight, or set the Device field to CPU.`;
}

/** The whole message for one surface: the problem, then what to do there. */
export function cudaMessage(problem: CudaProblem, surface: DeviceSurface): string {
  return surface === 'cli' ? cliMessage(problem) : appMessage(problem);
}

/** CUDA was asked for and cannot run. Its message is the command line's; `forApp()` is the app's. */
export class CudaUnavailableError extends SurfaceError {
  constructor(readonly problem: CudaProblem) {
    super(cudaMessage(problem, 'cli'), cudaMessage(problem, 'app'));
  }
}
