/**
 * The demo exports shipped in resources/samples/ (written by scripts/make-demo-data.mjs; see
 * resources/samples/README.md): "Load sample data" in the app and `hindsight demo` import all
 * of them, in name order.
 */
import fs from 'node:fs';
import path from 'node:path';

const DEMO_EXPORT = /^demo-[\w-]+\.jsonl?$/;

/** Paths of the demo exports in `samplesDir`; empty when the folder or the files are missing. */
export function demoExportFiles(samplesDir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(samplesDir);
  } catch {
    return [];
  }
  return names.filter((name) => DEMO_EXPORT.test(name)).sort().map((name) => path.join(samplesDir, name));
}
