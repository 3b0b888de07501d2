import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The project's test config (vitest.config.ts) without its global set-up, which builds the UI:
// the GPU machine of bench/gpu-session.sh carries no renderer toolchain, and the GPU tests it
// runs need no UI.
export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    env: { HINDSIGHT_GRAPH_CACHE: path.join(os.tmpdir(), 'hindsight-test-graph-cache') },
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
