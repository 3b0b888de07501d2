/**
 * ONNX Runtime sessions for graphs built with the IR, on the execution provider the user
 * asked for, and nothing else.
 *
 * - `cpu`: the CPU EP.
 * - `cuda`: the CUDA EP only. Its provider library is not in the npm package (it is too
 *   large for the registry), so `npm run setup:gpu` installs it. If it is missing, or the
 *   session cannot be created on CUDA, this throws a CudaUnavailableError (./cuda-errors.ts,
 *   a UserError) that says so; it never falls
 *   back to the CPU silently.
 * - `webgpu`: ONNX Runtime's WebGPU EP, which onnxruntime-node carries (Dawn, over Vulkan,
 *   Direct3D 12 or Metal). No adapter, or no session on it, throws a WebGpuUnavailableError
 *   (./webgpu-errors.ts). Nodes the WebGPU EP has no kernel for run on ONNX Runtime's CPU EP
 *   inside the same session, as ONNX Runtime places them (docs/design.md §Devices).
 *
 * Small graphs are handed to ONNX Runtime as one buffer. Graphs whose weights exceed
 * protobuf's 2 GiB cap are written with external data into a cache folder and loaded by path.
 * With `sharedWeights` (CPU), every session of one checkpoint reads its weights from one
 * memory-mapped file (./weight-file.ts, docs/design.md §Memory), kept in the graph cache
 * (./graph-cache.ts) unless that is off; a session with `keepGraph` loads its graph from the
 * cache when an earlier process built it.
 *
 * These calls block the calling thread while ONNX Runtime works: call them from a worker
 * (./model-worker.ts does), never from the main thread.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { threadId } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { CudaUnavailableError } from './cuda-errors.js';
import { WebGpuUnavailableError, webGpuProblemFrom } from './webgpu-errors.js';
import type { TrainDevice } from '../../src-shared/training.js';
import type { Graph } from '../graph/ir.js';
import { needsExternalData, saveModel, serializeModel } from '../graph/onnx.js';
import { placeWeights, weightFolder } from './weight-file.js';
import { cachedGraphFile, dropCachedGraph, openCacheFolder } from './graph-cache.js';

/**
 * ONNX Runtime itself (tensors, session types), for the modules that feed and read sessions.
 * This module is the only one that imports onnxruntime-node (test/graph/ort-import.test.ts
 * checks it), so the native binding is loaded from one place.
 */
export { ort };

export type Device = TrainDevice;

export interface SessionConfig {
  device: Device;
  /** Intra-op threads; default: ONNX Runtime's choice (all cores). */
  threads?: number;
  /** Where to write graphs too large to pass in memory; default: the OS temp folder. */
  cacheDir?: string;
  /** Always go through an .onnx + external data file (automatic above the 2 GiB protobuf cap). */
  externalData?: boolean;
  /**
   * The identity of the checkpoint whose weights the graph holds (WeightSource.identity):
   * the session then reads them from the process's one shared file (./weight-file.ts).
   */
  sharedWeights?: string;
  /**
   * Let ONNX Runtime repack matmul weights into its own layout at load (a private copy per
   * session, for speed). Default true; false reads them from the shared file as they are.
   */
  prepack?: boolean;
  /**
   * ONNX Runtime's memory-pattern planning (one block sized for the planned peak, reused
   * across runs of the same shapes). Default true; false allocates each value when it is made.
   */
  memoryPattern?: boolean;
  /**
   * The graph cache's folder (./graph-cache.ts); false: none, so shared weights live in a
   * per-process folder; default: HINDSIGHT_GRAPH_CACHE or the OS cache folder. CPU sessions
   * with `sharedWeights` only.
   */
  graphCache?: string | false;
  /** Keep this graph in the cache, to load it from there next time (inference graphs; the training step's are rebuilt). */
  keepGraph?: boolean;
  /**
   * ONNX Runtime's profiler for this session: the folder its trace goes to, one
   * `<graph>-<pid>-<thread>-<n>_<start time>.json` per session, written when the session is
   * released (every run's nodes with their op, provider and microseconds; bench/ort-profile.ts
   * sums them). false: off. Default: HINDSIGHT_ORT_PROFILE when set, so that a bench or a CLI
   * run is profiled without an option in every layer between it and here; else off.
   */
  profile?: string | false;
  /**
   * Outputs the run leaves in GPU memory, as GPU-resident tensors another run takes as inputs
   * (the decode cache, ./device-kv-cache.ts); WebGPU only ({@link holdsTensorsOnDevice}).
   */
  deviceOutputs?: string[];
}

/** The folder holding onnxruntime-node's native libraries for this platform. */
export function ortBinaryDir(): string {
  const require = createRequire(import.meta.url);
  const pkgRoot = path.dirname(require.resolve('onnxruntime-node/package.json'));
  return path.join(pkgRoot, 'bin', 'napi-v6', process.platform, process.arch);
}

export const CUDA_PROVIDER_LIBS = ['libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_shared.so'];

/** Throws a CudaUnavailableError unless the CUDA provider can be loaded on this machine. */
export function assertCudaAvailable(): void {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new CudaUnavailableError({ kind: 'platform', platform: `${process.platform}/${process.arch}` });
  }
  const dir = ortBinaryDir();
  const missing = CUDA_PROVIDER_LIBS.filter((f) => !fs.existsSync(path.join(dir, f)));
  if (missing.length) throw new CudaUnavailableError({ kind: 'not-installed', missing, dir });
}

/** Throws a WebGpuUnavailableError unless this platform's onnxruntime-node carries the WebGPU EP. */
export function assertWebGpuAvailable(): void {
  const bundled = ort.listSupportedBackends().some((b) => b.name === 'webgpu' && b.bundled);
  if (!bundled) throw new WebGpuUnavailableError({ kind: 'platform', platform: `${process.platform}/${process.arch}` });
}

/**
 * ONNX Runtime's fused ops that inference graphs use on each device (docs/design.md §Devices);
 * the training step's graph, which autodiff differentiates, uses none. The names are
 * ./decoder.ts's options.
 * - `fusedScores`: attention's q·kᵀ as FusedMatMul, in every inference graph (the trainer's
 *   forward-only ones too). WebGPU's provider has no kernel for it and would hand each layer's
 *   attention scores to the CPU.
 * - `fusedNorms`: each RMSNorm as SimplifiedLayerNormalization, one kernel instead of seven (with
 *   the residual add before it, SkipSimplifiedLayerNormalization: ./norms.ts), and
 * - `fusedRope`: RoPE as RotaryEmbedding, one kernel instead of five (./rope.ts), in the model
 *   engine's graphs (scoring, generation). A WebGPU decode step is bound by how many kernels it
 *   dispatches.
 * - `fusedLora`: a live adapter's branch on each projection as two Gemms instead of six kernels
 *   (./lora-inputs.ts loraInputHook), in the model engine's graphs. ONNX Runtime's CPU and CUDA
 *   providers fold the Transposes into their matmuls themselves; WebGPU's does not.
 * The CPU keeps the standard ops the training graph has, so its scores are the trainer's to the
 * last bit; CUDA keeps them until the fused ones have been measured there.
 */
export interface InferenceFusions {
  fusedScores: boolean;
  fusedNorms: boolean;
  fusedRope: boolean;
  fusedLora: boolean;
}

const INFERENCE_FUSIONS: Record<Device, InferenceFusions> = {
  cpu: { fusedScores: true, fusedNorms: false, fusedRope: false, fusedLora: false },
  cuda: { fusedScores: true, fusedNorms: false, fusedRope: false, fusedLora: false },
  webgpu: { fusedScores: false, fusedNorms: true, fusedRope: true, fusedLora: true },
};

/** The fused ops inference graphs on `device` use ({@link INFERENCE_FUSIONS}). */
export function inferenceFusions(device: Device): InferenceFusions {
  return INFERENCE_FUSIONS[device];
}

/** Whether inference graphs on `device` take attention's q·kᵀ as FusedMatMul (the trainer's forward-only graphs ask). */
export function fusesMatMul(device: Device): boolean {
  return INFERENCE_FUSIONS[device].fusedScores;
}

/**
 * Whether a run's outputs can stay on `device` for the next run: onnxruntime-node's binding
 * has GPU-resident tensors ('gpu-buffer') for WebGPU only; on CUDA every output comes back to
 * host memory (docs/design.md §Devices).
 */
export function holdsTensorsOnDevice(device: Device): boolean {
  return device === 'webgpu';
}

/** Fails now, with the reason in the user's terms, if `device` cannot be had on this machine. */
export function assertDeviceAvailable(device: Device): void {
  if (device === 'cuda') assertCudaAvailable();
  if (device === 'webgpu') assertWebGpuAvailable();
}

/** The folder `option` (SessionConfig.profile) resolves to; undefined: profiling off. */
export function profileFolder(option?: string | false): string | undefined {
  if (option === false) return undefined;
  const folder = option || process.env.HINDSIGHT_ORT_PROFILE;
  return folder ? path.resolve(folder) : undefined;
}

/** Numbers this process's sessions, so each one's files (a profile, a shared-weights graph) have names of their own. */
let sessionCount = 0;

function sessionOptions(config: SessionConfig, graphName: string): ort.InferenceSession.SessionOptions {
  const profile = profileFolder(config.profile);
  if (profile) fs.mkdirSync(profile, { recursive: true });
  return {
    executionProviders: [config.device],
    graphOptimizationLevel: 'all',
    ...(config.threads ? { intraOpNumThreads: config.threads } : {}), // the binding rejects undefined
    interOpNumThreads: 1,
    logSeverityLevel: 3,
    ...(config.memoryPattern === false ? { enableMemPattern: false } : {}),
    ...(config.prepack === false ? { extra: { session: { disable_prepacking: '1' } } } : {}),
    // A prefix of its own per session: ONNX Runtime adds only its start time, to the millisecond.
    ...(profile ? { enableProfiling: true, profileFilePrefix: path.join(profile, `${graphName}-${process.pid}-${threadId}-${sessionCount++}`) } : {}),
    ...(config.deviceOutputs?.length ? { preferredOutputLocation: Object.fromEntries(config.deviceOutputs.map((name) => [name, 'gpu-buffer' as const])) } : {}),
  };
}

/** Creates a session for `graph` on `config.device`; reports the EP it runs on. */
export async function createSession(graph: Graph, config: SessionConfig): Promise<{ session: ort.InferenceSession; executionProvider: Device }> {
  assertDeviceAvailable(config.device);
  if (config.deviceOutputs?.length && !holdsTensorsOnDevice(config.device)) throw new Error(`deviceOutputs: ${config.device} cannot hold outputs on the device`);
  const options = sessionOptions(config, graph.name);
  let cleanup: (() => void) | undefined;
  try {
    let session: ort.InferenceSession;
    const cacheFolder = config.sharedWeights && config.device === 'cpu' ? openCacheFolder(config.graphCache, config.sharedWeights) : undefined;
    if (cacheFolder && config.keepGraph) {
      session = await cachedSession(graph, cacheFolder, options);
    } else if (config.sharedWeights && config.device === 'cpu') {
      const dir = cacheFolder ?? weightFolder(config.sharedWeights, config.cacheDir);
      const onnxPath = path.join(dir, `${graph.name}-${process.pid}-${threadId}-${sessionCount++}.onnx`);
      cleanup = () => {
        try {
          for (const f of [onnxPath, onnxPath + '.data']) fs.rmSync(f, { force: true });
        } catch {
          // Windows keeps memory-mapped files locked; the folder goes when the process exits.
        }
      };
      saveModel(graph, onnxPath, placeWeights(dir, graph));
      session = await ort.InferenceSession.create(onnxPath, options);
    } else if (config.externalData || needsExternalData(graph)) {
      const dir = fs.mkdtempSync(path.join(config.cacheDir ?? os.tmpdir(), 'hindsight-graph-'));
      cleanup = () => {
        try {
          fs.rmSync(dir, { recursive: true, force: true });
        } catch {
          // Windows keeps memory-mapped files locked; the OS temp cleaner gets them later.
        }
      };
      const { onnxPath } = saveModel(graph, path.join(dir, `${graph.name}.onnx`));
      session = await ort.InferenceSession.create(onnxPath, options);
    } else {
      session = await ort.InferenceSession.create(serializeModel(graph), options);
    }
    return { session, executionProvider: config.device };
  } catch (err) {
    if (config.device === 'cuda') {
      throw new CudaUnavailableError({ kind: 'no-session', reason: (err as Error).message.split('\n')[0] ?? '' });
    }
    if (config.device === 'webgpu') throw new WebGpuUnavailableError(webGpuProblemFrom((err as Error).message));
    throw err;
  } finally {
    // ONNX Runtime holds the weights by now (read, or mapped: unlinking a mapped file is safe on POSIX).
    cleanup?.();
  }
}

/** A session of `graph` from its file in the graph cache, written first if it is not there. */
async function cachedSession(graph: Graph, dir: string, options: ort.InferenceSession.SessionOptions): Promise<ort.InferenceSession> {
  const { onnxPath, cached } = cachedGraphFile(dir, graph);
  try {
    return await ort.InferenceSession.create(onnxPath, options);
  } catch (err) {
    if (!cached) throw err;
    // A cached file that no longer loads (its folder emptied or damaged under it): build it again, once.
    dropCachedGraph(onnxPath);
    return ort.InferenceSession.create(cachedGraphFile(dir, graph).onnxPath, options);
  }
}

export function int64Tensor(values: ArrayLike<number>, dims: number[]): ort.Tensor {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]!);
  return new ort.Tensor('int64', data, dims);
}

export function float32Tensor(data: Float32Array, dims: number[]): ort.Tensor {
  return new ort.Tensor('float32', data, dims);
}
