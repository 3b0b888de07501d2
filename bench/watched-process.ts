/**
 * Child processes for the benches that measure memory: each runs alone, and one whose
 * resident memory passes a limit is stopped before it can push a shared machine into swap
 * or the OOM killer (Linux: read from /proc/<pid>/status every 200 ms; elsewhere unwatched).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn, spawnSync } from 'node:child_process';

export interface Watched {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Set when the child was stopped: the RSS it had passed, in MB. */
  stoppedAtMb?: number;
}

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export function runWatched(command: string, args: string[], env: NodeJS.ProcessEnv, limitMb: number): Promise<Watched> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    let stoppedAtMb: number | undefined;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    const timer = setInterval(() => {
      const rss = child.pid ? rssMb(child.pid) : 0;
      if (rss > limitMb && stoppedAtMb === undefined) {
        stoppedAtMb = rss;
        child.kill('SIGKILL');
      }
    }, 200);
    child.on('error', (err) => (clearInterval(timer), reject(err)));
    child.on('close', (status, signal) => {
      clearInterval(timer);
      resolve({ status, signal, stdout, stderr, stoppedAtMb });
    });
  });
}

/** A child's result: the last line of its stdout that is a JSON object; an Error naming `what` when it failed. */
export function parseLast<T>(w: Watched, what: string): T {
  const line = w.stdout.split('\n').reverse().find((l) => l.startsWith('{'));
  if (w.status !== 0 || !line) throw new Error(`${what} failed (${w.status ?? w.signal}): ${w.stderr.slice(-3000)}`);
  return JSON.parse(line) as T;
}

/**
 * The Python whose torch anchors the benches: the interoperability tests' environment first
 * (.python/, or the folder HINDSIGHT_PYTHON_ENV names: PyPI's torch 2.x pinned in
 * test/interop/requirements.txt, what users run), Debian's python3-torch only where that is
 * missing. BENCH_PYTHON names another. A row's "PyTorch x.y" says which one ran. With `cuda`,
 * the first whose torch sees a CUDA GPU (PyPI's Linux wheel does; its CPU-only build does not).
 */
export function findTorchPython(device: 'cpu' | 'cuda' = 'cpu'): string | undefined {
  const check = device === 'cuda' ? 'import sys, torch, numpy; sys.exit(0 if torch.cuda.is_available() else 1)' : 'import torch, numpy';
  const env = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', process.env.HINDSIGHT_PYTHON_ENV ?? '.python');
  const candidates = [process.env.BENCH_PYTHON, path.join(env, 'bin', 'python'), '/usr/bin/python3', 'python3'];
  for (const py of candidates) {
    if (py && spawnSync(py, ['-c', check], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}

/**
 * A torch child's thread budget, the same as Hindsight's: torch.set_num_threads in the scripts,
 * and here OpenMP's pool and the BLAS under it (MKL in PyPI's wheel, OpenBLAS in Debian's).
 */
export function torchThreadEnv(threads: number): NodeJS.ProcessEnv {
  const n = String(threads);
  return { ...process.env, OMP_NUM_THREADS: n, MKL_NUM_THREADS: n, OPENBLAS_NUM_THREADS: n };
}
