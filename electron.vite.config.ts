// electron-vite builds the three parts of the desktop app into out/:
//   out/main/index.js      the main process (ESM; dependencies stay in node_modules)
//   out/preload/index.cjs  the sandboxed preload (sandboxed preloads must be CommonJS)
//   out/renderer/          the Vue UI, also served by `hindsight serve`
import { resolve } from 'node:path';
import vue from '@vitejs/plugin-vue';
import { defineConfig, externalizeDepsPlugin } from 'electron-vite';
import { cspMetaPlugin, rendererBaseConfig } from './src-main/api/renderer-build.js';

export default defineConfig({
  main: {
    plugins: [externalizeDepsPlugin()],
    build: {
      outDir: 'out/main',
      // The input key names the output: out/main/index.js, package.json's "main".
      rollupOptions: { input: { index: resolve('src-main/app/main.ts') }, output: { format: 'es' } },
    },
  },
  preload: {
    // Bundle everything (the contract) so the preload needs no require() beyond electron.
    build: {
      outDir: 'out/preload',
      rollupOptions: { input: { index: resolve('src-main/app/preload.ts') }, output: { format: 'cjs', entryFileNames: '[name].cjs' } },
    },
  },
  renderer: {
    // Paths from the working directory: this file is bundled before it runs.
    ...rendererBaseConfig(resolve('.')),
    plugins: [vue(), cspMetaPlugin()],
  },
});
