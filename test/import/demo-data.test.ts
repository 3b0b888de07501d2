// The committed demo exports are exactly what scripts/make-demo-data.mjs writes, so they can be
// changed by editing the script and rerunning it, never by hand.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the demo data generator', () => {
  it('rewrites resources/samples/demo-* byte for byte', () => {
    const out = tempDir();
    execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'make-demo-data.mjs'), '--out', out]);
    const written = fs.readdirSync(out).sort();
    expect(written).toEqual(['demo-chatgpt.json', 'demo-claude.json', 'demo-sharegpt.json']);
    for (const name of written) {
      expect(fs.readFileSync(path.join(out, name)).equals(fs.readFileSync(path.join(ROOT, 'resources', 'samples', name))), name).toBe(true);
    }
  });
});
