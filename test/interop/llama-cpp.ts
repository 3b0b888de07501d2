// Real llama.cpp for the tests: node-llama-cpp (pinned in bench/llama-cpp.ts, prebuilt CPU
// binary, installed on demand into .cache/llama-cpp/ — .ci/run installs it beforehand) run in a
// child process (./llama-cpp-logprobs.mjs) for teacher-forced log-probs and greedy tokens.
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeLlamaCpp } from '../../bench/llama-cpp.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The node-llama-cpp entry module, or why it cannot be used here (installed, then loaded once in a child). */
export function llamaCppModule(): { module: string | null; reason: string } {
  let module: string;
  try {
    module = ensureNodeLlamaCpp(() => {});
  } catch (err) {
    return { module: null, reason: `node-llama-cpp could not be installed: ${(err as Error).message.split('\n')[0]}` };
  }
  const r = spawnSync(process.execPath, [path.join(here, 'llama-cpp-logprobs.mjs'), JSON.stringify({ module, probe: true })], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) return { module: null, reason: `node-llama-cpp's binary does not load here: ${(r.stderr || r.stdout || String(r.error)).trim().split('\n').slice(-1)[0]}` };
  return { module, reason: '' };
}

export interface LlamaCppRows {
  model: string;
  lora?: string;
  rows: { ids: number[]; start: number }[];
  prompt: number[];
  greedy: number;
}

/** llama.cpp's log-probs of each row's tokens from `start`, and its greedy tokens after `prompt`. */
export function llamaCppLogprobs(module: string, request: LlamaCppRows): Promise<{ logprobs: number[][]; greedy: number[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(here, 'llama-cpp-logprobs.mjs'), JSON.stringify({ module, ...request })]);
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => {
      if (status !== 0) reject(new Error(`llama.cpp child exited ${status}: ${stderr.slice(-2000)}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()!));
    });
  });
}

export function meanAbsDiff(a: number[][], b: number[][]): number {
  let s = 0, n = 0;
  a.forEach((row, i) => row.forEach((v, j) => { s += Math.abs(v - b[i]![j]!); n++; }));
  return s / n;
}
