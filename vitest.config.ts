import { defineConfig } from 'vitest/config';

// One test command for everything (`npm test`): unit, integration and the browser e2e tests.
// Tests that build models or spawn processes take seconds, not milliseconds, on 2 cores.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
