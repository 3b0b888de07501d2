// Hindsight's GGUF dequantisation against llama.cpp's own Python reference (gguf-py's
// gguf.quants): for each supported type, blocks made by gguf.quants.quantize (the types it can
// quantise) or random blocks with sane scales (the k-quants, which it only dequantises) must
// dequantise to the same fp32 values, bit for bit; and Hindsight's Q8_0 / Q4_0 encoders must
// write gguf.quants.quantize's bytes. Skips where the Python environment is missing.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dequantize } from '../../src-main/model/gguf/dequantize.js';
import { encodeQ4_0, encodeQ8_0 } from '../../src-main/model/gguf/encode.js';
import { seededRandom } from '../../tools/tiny-models.js';
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

/** gguf.quants.quantize of the fp32 rows read from stdin, for each type named, one after another on stdout. */
const QUANTIZE_SCRIPT = String.raw`
import sys, numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType as T
x = np.frombuffer(sys.stdin.buffer.read(), dtype=np.float32).reshape(8, -1)
for name in sys.argv[1:]:
    sys.stdout.buffer.write(quants.quantize(x, T[name]).tobytes())
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

  it("encodes Q8_0 and Q4_0 to gguf.quants.quantize's bytes", () => {
    const rand = seededRandom(11);
    const x = Float32Array.from({ length: 8 * 512 }, () => 0.1 * (rand() + rand() + rand() - 1.5));
    x.fill(0, 0, 64); // zero blocks
    x.fill(1e-8, 512, 544); // a tiny one
    x[1029] = 3; // an outlier
    for (let i = 0; i < 32; i++) x[1536 + i] = (i - 16) / 8; // values on Q4_0's half-step boundaries (d = −2 / −8)
    const encoders = { Q8_0: encodeQ8_0, Q4_0: encodeQ4_0 };
    const r = spawnSync(interopPython!, ['-c', QUANTIZE_SCRIPT, ...Object.keys(encoders)], { input: Buffer.from(x.buffer), env: pythonEnv() });
    expect(r.status, r.stderr?.toString()).toBe(0);
    let at = 0;
    for (const [name, encode] of Object.entries(encoders)) {
      const ours = encode(x), theirs = new Uint8Array(r.stdout.subarray(at, at + ours.length));
      at += ours.length;
      let differ = 0;
      for (let i = 0; i < ours.length; i++) if (ours[i] !== theirs[i]) differ++;
      expect(`${name}: ${differ} of ${ours.length} bytes differ`).toBe(`${name}: 0 of ${ours.length} bytes differ`);
    }
  });
});
