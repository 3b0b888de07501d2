/**
 * Child processes for the benches that measure memory: each runs alone, and one whose
 * resident memory passes a limit is stopped before it can push a shared machine into swap
 * or the OOM killer (Linux: read from /proc/<pid>/status every 200 ms; elsewhere unwatched).
 */
import fs from 'node:fs';
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

/** The Python that imports torch (Debian's python3-torch), preferring /usr/bin/python3. */
export function findTorchPython(): string | undefined {
  for (const py of ['/usr/bin/python3', 'python3']) {
    if (spawnSync(py, ['-c', 'import torch, numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}
