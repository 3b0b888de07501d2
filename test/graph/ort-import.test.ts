// onnxruntime-node is imported by one module only, the session factory: every other module
// takes ONNX Runtime from there, so the native binding has one loader.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src-main', import.meta.url));
const ONLY_IMPORTER = 'model/ort-session.ts';

/** Static imports and re-exports, dynamic import() and require() of the package itself. */
const IMPORT_OF_ORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s+)['"]onnxruntime-node['"]/;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return /\.(ts|mts|cts|js|mjs|cjs)$/.test(e.name) ? [full] : [];
  });
}

describe('onnxruntime-node imports', () => {
  it(`only ${ONLY_IMPORTER} imports onnxruntime-node`, () => {
    const importers = sourceFiles(SRC)
      .filter((f) => IMPORT_OF_ORT.test(fs.readFileSync(f, 'utf8')))
      .map((f) => path.relative(SRC, f).split(path.sep).join('/'));
    expect(importers).toEqual([ONLY_IMPORTER]);
  });

  it('the pattern sees every form of import', () => {
    for (const line of [
      "import ort from 'onnxruntime-node';",
      'import * as ort from "onnxruntime-node";',
      "import type { Tensor } from 'onnxruntime-node';",
      "export { Tensor } from 'onnxruntime-node';",
      "const ort = await import('onnxruntime-node');",
      "const ort = require('onnxruntime-node');",
      "import 'onnxruntime-node';",
    ]) expect(IMPORT_OF_ORT.test(line), line).toBe(true);
    expect(IMPORT_OF_ORT.test("require.resolve('onnxruntime-node/package.json')")).toBe(false);
  });
});
