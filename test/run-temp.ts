// Global set-up: the test run gets a temp folder of its own, removed when the run ends. Tests make
// their databases, models and servers' folders under os.tmpdir() and many leave them there (a
// workspace still open, a child still writing): full runs left hundreds of folders in /tmp each
// time (5.5 GB on the build machine after two days). The test workers, and every process they
// start, inherit TMPDIR (TMP and TEMP on Windows), which os.tmpdir() reads. The graph cache stays
// outside it (vitest.config.ts), so later runs keep reusing the graphs they built.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export default function setup(): () => void {
  const runTemp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-test-run-'));
  for (const name of ['TMPDIR', 'TMP', 'TEMP']) process.env[name] = runTemp;
  return () => fs.rmSync(runTemp, { recursive: true, force: true, maxRetries: 3 });
}
