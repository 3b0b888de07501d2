import os from 'node:os';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

// One test command for everything (`npm test`): unit, integration and the browser e2e tests.
// Tests that build models or spawn processes take seconds, not milliseconds, on 2 cores, and
// minutes under load: the limits only catch hangs (tests wait on states, never on time).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts', 'test/run-temp.ts'],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    // The graph cache (docs/design.md §Graph cache) of every model a test loads goes to the
    // temp folder, not the user's cache; folders of deleted test models are pruned as it goes.
    env: { HINDSIGHT_GRAPH_CACHE: path.join(os.tmpdir(), 'hindsight-test-graph-cache') },
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
