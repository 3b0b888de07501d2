import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import project from '../vitest.config.js';

// The project's test config (vitest.config.ts) without its global set-up, which builds the UI:
// the GPU machine of bench/gpu-session.sh carries no renderer toolchain, and the GPU tests it
// runs need no UI.
export default defineConfig({
  ...project,
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: { ...project.test, globalSetup: [] },
});
