// The interoperability tests' Python: the venv scripts/python-env.sh makes in .python/ (or the
// folder HINDSIGHT_PYTHON_ENV names) with test/interop/requirements.txt's pinned torch,
// transformers, peft, trl, accelerate and datasets. Where it is missing (a user's machine
// without Python) the tests skip with the one reason printed here; CI always makes it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const envDir = path.resolve(repoRoot, process.env.HINDSIGHT_PYTHON_ENV ?? '.python');
const candidate = path.join(envDir, 'bin', 'python');

function probe(): { python: string | null; reason: string } {
  if (!existsSync(candidate)) {
    return { python: null, reason: `no Python environment at ${path.relative(repoRoot, envDir) || envDir} (make it with: bash scripts/python-env.sh)` };
  }
  const r = spawnSync(candidate, ['-c', 'import torch, transformers, peft, trl, accelerate, datasets'], { encoding: 'utf8' });
  if (r.status !== 0) {
    const last = (r.stderr || r.stdout || '').trim().split('\n').pop() ?? '';
    return { python: null, reason: `the Python environment at ${envDir} cannot import its libraries (${last}); remake it with: bash scripts/python-env.sh` };
  }
  return { python: candidate, reason: '' };
}

const found = probe();

/** The environment's python, or null when the interoperability tests must skip. */
export const interopPython: string | null = found.python;
/** Why they skip ('' when they run). */
export const interopSkipReason: string = found.reason;

if (!interopPython) console.log(`skipped: the interoperability tests (${interopSkipReason})`);

/**
 * Environment for a Python child: one thread each side (the tests compare numbers, not speed),
 * never the Hub (every model and tokenizer here is a local folder), no telemetry.
 */
export function pythonEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    OMP_NUM_THREADS: '1',
    MKL_NUM_THREADS: '1',
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    HF_DATASETS_OFFLINE: '1',
    HF_HUB_DISABLE_TELEMETRY: '1',
    TOKENIZERS_PARALLELISM: 'false',
    PYTHONDONTWRITEBYTECODE: '1',
    ...extra,
  };
}
