// Building the renderer (Vue 3) with Vite, shared by electron.vite.config.ts (the desktop
// build) and `hindsight serve`, which builds it on demand so that a clean checkout can serve
// the UI (and the browser tests can run) without a separate build step.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Plugin, UserConfig } from 'vite';
import { CONTENT_SECURITY_POLICY_META } from './csp.js';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RENDERER_SRC = path.join(PROJECT_ROOT, 'src-renderer');
export const RENDERER_OUT = path.join(PROJECT_ROOT, 'out', 'renderer');

/** Puts the CSP in the built index.html too (dev builds keep Vite's inline HMR styles working). */
export function cspMetaPlugin(): Plugin {
  return {
    name: 'hindsight-csp-meta',
    apply: 'build',
    transformIndexHtml: () => [{ tag: 'meta', attrs: { 'http-equiv': 'Content-Security-Policy', content: CONTENT_SECURITY_POLICY_META }, injectTo: 'head-prepend' }],
  };
}

/** The renderer's Vite settings without plugins that need the devDependency plugin-vue. */
export function rendererBaseConfig(projectRoot = PROJECT_ROOT, outDir = path.join(projectRoot, 'out', 'renderer')): UserConfig {
  const src = path.join(projectRoot, 'src-renderer');
  return {
    root: src,
    // Relative asset URLs work from app://, file:// and http://127.0.0.1 alike.
    base: './',
    build: {
      outDir,
      emptyOutDir: true,
      // No inline module preload polyfill: the CSP forbids inline script.
      modulePreload: { polyfill: false },
      chunkSizeWarningLimit: 1500,
      rollupOptions: { input: path.join(src, 'index.html') },
    },
  };
}

function newestMtime(target: string): number {
  if (!fs.existsSync(target)) return 0;
  const stat = fs.statSync(target);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of fs.readdirSync(target)) {
    if (entry === 'node_modules') continue;
    newest = Math.max(newest, newestMtime(path.join(target, entry)));
  }
  return newest;
}

/** The renderer imports only src-shared/ and itself (test/layout/layers.test.ts), so those are its sources. */
function sourcesNewerThanBuild(): boolean {
  const built = path.join(RENDERER_OUT, 'index.html');
  if (!fs.existsSync(built)) return true;
  const sources = [RENDERER_SRC, path.join(PROJECT_ROOT, 'src-shared')];
  return Math.max(...sources.map(newestMtime)) > fs.statSync(built).mtimeMs;
}

/**
 * Builds out/renderer when it is missing or older than its sources. The build goes to a
 * private folder first and is swapped in with renames, so a concurrent reader never sees a
 * half-written UI.
 */
export async function ensureRendererBuilt(log: (line: string) => void = () => {}): Promise<string> {
  if (!sourcesNewerThanBuild()) return RENDERER_OUT;
  if (!fs.existsSync(RENDERER_SRC)) throw new Error(`the renderer sources are missing (${RENDERER_SRC})`);
  log('building the UI with Vite (first start or sources changed)…');
  const started = Date.now();
  const [{ build }, { default: vue }] = await Promise.all([import('vite'), import('@vitejs/plugin-vue')]);
  const staging = path.join(PROJECT_ROOT, 'out', `.renderer-build-${process.pid}`);
  const base = rendererBaseConfig(PROJECT_ROOT, staging);
  await build({ ...base, configFile: false, logLevel: 'warn', plugins: [vue(), cspMetaPlugin()] });
  // Stamped with the time the build started, not ended: a source saved while Vite was reading
  // the others is newer than the stamp, so the next start builds again instead of serving the
  // UI without that change.
  fs.utimesSync(path.join(staging, 'index.html'), started / 1000, started / 1000);
  const retired = path.join(PROJECT_ROOT, 'out', `.renderer-old-${process.pid}`);
  if (fs.existsSync(RENDERER_OUT)) fs.renameSync(RENDERER_OUT, retired);
  try {
    fs.renameSync(staging, RENDERER_OUT);
  } catch (err) {
    // Another process swapped its own build in between our two renames: it is built from the
    // same sources, so keep it and drop ours.
    if (!fs.existsSync(path.join(RENDERER_OUT, 'index.html'))) throw err;
    fs.rmSync(staging, { recursive: true, force: true });
  }
  fs.rmSync(retired, { recursive: true, force: true });
  log(`UI built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return RENDERER_OUT;
}
