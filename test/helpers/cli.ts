/**
 * Runs `hindsight …` in the test's own process (src-main/cli.ts's `main`, the same dispatch as
 * bin/hindsight.mjs) with stdout and stderr captured for the length of the call, so a test
 * can check the exit status and exactly what the command printed.
 *
 *     const r = await runCli('stats', '--db', db, '--json');
 *     expect(r.code).toBe(0);
 *     expect(r.json()).toMatchObject({ sessions: 9 });
 */
import { vi } from 'vitest';
import { main } from '../../src-main/cli.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as one JSON value (what `--json` prints). */
  json: () => any;
}

export async function runCli(...argv: string[]): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => ((stdout += String(chunk)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  try {
    const code = await main(argv);
    return { code, stdout, stderr, json: () => JSON.parse(stdout) };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}
