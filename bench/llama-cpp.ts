/**
 * llama.cpp as the benches' reference for decoding (bench/real-shapes.ts), through
 * node-llama-cpp's prebuilt CPU binary. node-llama-cpp is not a dependency of the project (its
 * builds for every platform come to about 700 MB): the bench installs the one pinned version
 * into `.cache/llama-cpp/` (git-ignored) on first use, with the prebuilt binary of this
 * platform only, and never builds from source or downloads anything at run time.
 *
 * Each measurement runs in a child process of its own (bench/llama-cpp-child.mjs), so its
 * load time is a new process's and its peak RSS is llama.cpp's alone: load + first token,
 * then greedy decoding (`repeats` runs of `newTokens` tokens after the prompt, each timed from
 * the prompt, as Hindsight's decode is), with CPU seconds beside wall seconds.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

export const NODE_LLAMA_CPP_VERSION = '3.22.1';
const ROOT = path.resolve('.cache/llama-cpp');

/** node-llama-cpp's package of prebuilt binaries for this platform (the CPU build). */
function platformPackage(): string {
  const key = `${process.platform}-${process.arch}`;
  const name: Record<string, string> = {
    'linux-x64': 'linux-x64', 'linux-arm64': 'linux-arm64', 'darwin-arm64': 'mac-arm64-metal', 'darwin-x64': 'mac-x64', 'win32-x64': 'win-x64', 'win32-arm64': 'win-arm64',
  };
  if (!name[key]) throw new Error(`node-llama-cpp has no prebuilt binary for ${key}`);
  return `@node-llama-cpp/${name[key]}`;
}

/** Installs node-llama-cpp (pinned) into .cache/llama-cpp if it is not there; returns its entry module. */
export function ensureNodeLlamaCpp(log: (line: string) => void = (l) => console.error(l)): string {
  const pkg = path.join(ROOT, 'node_modules', 'node-llama-cpp');
  const installed = fs.existsSync(path.join(pkg, 'package.json')) && JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version === NODE_LLAMA_CPP_VERSION;
  if (!installed) {
    log(`installing node-llama-cpp@${NODE_LLAMA_CPP_VERSION} with its ${platformPackage()} binary into ${ROOT} (once) …`);
    fs.mkdirSync(ROOT, { recursive: true });
    // --omit=optional skips every platform's binaries; the one for this platform is named instead.
    // --ignore-scripts: no post-install download or build from source.
    const args = ['install', '--prefix', ROOT, '--no-save', '--no-package-lock', '--ignore-scripts', '--omit=optional', '--no-audit', '--no-fund',
      `node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`, `${platformPackage()}@${NODE_LLAMA_CPP_VERSION}`];
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const r = spawnSync(npm, args, { encoding: 'utf8', env: { ...process.env, NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' } });
    if (r.status !== 0) throw new Error(`npm ${args.join(' ')} failed: ${(r.stderr || r.stdout).slice(-2000)}`);
  }
  return path.join(pkg, 'dist', 'index.js');
}

export interface LlamaCppRequest {
  /** The GGUF file (bench/gguf-writer.ts). */
  model: string;
  threads: number;
  prompt: number[];
  newTokens: number;
  repeats: number;
  contextSize: number;
}

export interface LlamaCppRun {
  tokens: number[];
  firstMs: number;
  wallS: number;
  cpuS: number;
}

export interface LlamaCppResult {
  /** Import of node-llama-cpp, its binary, the model (mapped) and a context. */
  importAndLoadMs: number;
  /** The prompt's prefill and the first greedy token, in the new process. */
  firstTokenMs: number;
  /** From this process's start (Node's time origin) to its first token. */
  processStartToFirstTokenMs: number;
  runs: LlamaCppRun[];
  peakRssMb: number;
  threads: number;
}

/** Loads `request.model` in a new process and measures it (see the file comment). */
export function runLlamaCpp(request: LlamaCppRequest): LlamaCppResult {
  const module = ensureNodeLlamaCpp();
  const child = path.resolve('bench/llama-cpp-child.mjs');
  const env = { ...process.env, NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' };
  const r = spawnSync(process.execPath, [child, JSON.stringify({ ...request, module })], { encoding: 'utf8', env, maxBuffer: 1 << 24 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`llama.cpp child failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return JSON.parse(line) as LlamaCppResult;
}
