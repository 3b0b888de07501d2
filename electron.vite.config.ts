// electron-vite builds the three parts of the desktop app into out/:
//   out/main/index.js      the main process (ESM; dependencies stay in node_modules)
//   out/preload/index.cjs  the sandboxed preload (sandboxed preloads must be CommonJS)
//   out/renderer/          the Vue UI, also served by `hindsight serve`
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import vue from '@vitejs/plugin-vue';
import { defineConfig, externalizeDepsPlugin } from 'electron-vite';
import { cspMetaPlugin, rendererBaseConfig } from './src-main/api/renderer-build.js';

/** The main-process entries, resolved; a missing source (a renamed worker) fails the build here. */
function mainEntries(entries: Record<string, string>): Record<string, string> {
  for (const file of Object.values(entries)) if (!existsSync(file)) throw new Error(`electron.vite.config.ts: entry ${file} does not exist`);
  return Object.fromEntries(Object.entries(entries).map(([name, file]) => [name, resolve(file)]));
}

export default defineConfig({
  main: {
    plugins: [externalizeDepsPlugin()],
    build: {
      outDir: 'out/main',
      rollupOptions: {
        // Input keys name the outputs: out/main/index.js is package.json's "main". The worker
        // threads are entries of their own, and every chunk sits flat in out/main, so the
        // `new URL('./model-worker.js' | './trainer-worker.js' | './eval-worker.js' | './onpolicy-worker.js',
        // import.meta.url)` lookups in model/local-model.ts, train/, eval/run-in-worker.ts and
        // onpolicy/onpolicy-thread.ts find them next to the code that starts them.
        input: mainEntries({
          index: 'src-main/app/main.ts',
          'model-worker': 'src-main/model/model-worker.ts',
          'trainer-worker': 'src-main/train/trainer-worker.ts',
          'eval-worker': 'src-main/eval/eval-worker.ts',
          'onpolicy-worker': 'src-main/onpolicy/onpolicy-worker.ts',
        }),
        output: { format: 'es', entryFileNames: '[name].js', chunkFileNames: '[name]-[hash].js' },
      },
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
