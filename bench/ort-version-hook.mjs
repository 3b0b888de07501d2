/**
 * `node --import ./bench/ort-version-hook.mjs`: with BENCH_ORT_DIR set (a folder holding
 * node_modules/onnxruntime-node), the bare specifiers `onnxruntime-node` and
 * `onnxruntime-common` resolve there instead of the project's node_modules, so one source tree
 * runs against another ONNX Runtime (bench/ort-upgrade.ts). Without BENCH_ORT_DIR it does nothing.
 *
 * This file is both the preload (it registers itself) and the hooks module (loaded again by
 * Node's hooks thread with `?hooks`, which must not register again). Registered after tsx's
 * loader, it runs first in the chain and passes every other specifier on to tsx.
 */
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const dir = process.env.BENCH_ORT_DIR;
if (dir && !import.meta.url.endsWith('?hooks')) register(`${import.meta.url}?hooks`);

const MAPPED = new Set(['onnxruntime-node', 'onnxruntime-common']);
// Resolving as if imported from a file inside that folder finds its node_modules first.
const parentURL = dir ? pathToFileURL(path.join(path.resolve(dir), 'bench-ort-version-hook.js')).href : undefined;

export async function resolve(specifier, context, nextResolve) {
  if (parentURL && MAPPED.has(specifier)) return nextResolve(specifier, { ...context, parentURL });
  return nextResolve(specifier, context);
}
