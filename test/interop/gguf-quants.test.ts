// Hindsight's GGUF dequantisation against llama.cpp's own Python reference (gguf-py's
// gguf.quants): for each supported type, blocks made by gguf.quants.quantize (the types it can
// quantise) or random blocks with sane scales (the k-quants, which it only dequantises) must
// dequantise to the same fp32 values, bit for bit. Skips where the Python environment is missing.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dequantize } from '../../src-main/model/gguf/dequantize.js';
import { interopPython, interopSkipReason, pythonEnv } from './python.js';

const TYPES: Record<string, number> = { F32: 0, F16: 1, BF16: 30, Q8_0: 8, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q4_K: 12, Q5_K: 13, Q6_K: 14 };

const SCRIPT = String.raw`
import sys, numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES
out = sys.argv[1]
rng = np.random.default_rng(7)
x = (rng.standard_normal((8, 512)) * 0.05).astype(np.float32)
x[0, :64] = 0; x[1, :32] = 1e-8; x[2, 5] = 3.0  # zero blocks, tiny ones, an outlier
for name in sys.argv[2:]:
    t = T[name]
    try:
        q = quants.quantize(x, t)
    except NotImplementedError:
        block, size = GGML_QUANT_SIZES[t]
        n = x.size // block
        q = rng.integers(0, 256, (n, size), dtype=np.uint8)
        halves = [0, 2] if name in ('Q4_K', 'Q5_K') else [size - 2]
        for at in halves:
            q[:, at:at + 2] = (rng.standard_normal(n) * 0.01).astype(np.float16).view(np.uint8).reshape(n, 2)
        q = q.reshape(8, -1)
    q.tofile(f'{out}/{name}.bin')
    quants.dequantize(q, t).astype(np.float32).tofile(f'{out}/{name}.f32')
`;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-quants-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function ggufReason(): string {
  if (!interopPython) return interopSkipReason;
  const r = spawnSync(interopPython, ['-c', 'import gguf'], { encoding: 'utf8', env: pythonEnv() });
  return r.status === 0 ? '' : 'the Python environment lacks gguf (pinned in test/interop/requirements.txt); remake it with: bash scripts/python-env.sh';
}
const reason = ggufReason();
if (reason && interopPython) console.log(`skipped: GGUF against gguf-py (${reason})`);

describe.skipIf(reason !== '')('GGUF dequantisation against gguf-py', () => {
  it('gives gguf.quants.dequantize\'s values bit for bit, for every supported type', () => {
    const r = spawnSync(interopPython!, ['-c', SCRIPT, dir, ...Object.keys(TYPES)], { encoding: 'utf8', env: pythonEnv() });
    expect(r.status, r.stderr).toBe(0);
    for (const [name, type] of Object.entries(TYPES)) {
      const src = new Uint8Array(fs.readFileSync(path.join(dir, `${name}.bin`)));
      const expected = new Float32Array(new Uint8Array(fs.readFileSync(path.join(dir, `${name}.f32`))).buffer);
      const got = dequantize(src, type, expected.length, name);
      let mismatches = 0;
      for (let i = 0; i < expected.length; i++) if (!Object.is(got[i], expected[i])) mismatches++;
      expect(`${name}: ${mismatches} of ${expected.length} differ`).toBe(`${name}: 0 of ${expected.length} differ`);
    }
  });
});
