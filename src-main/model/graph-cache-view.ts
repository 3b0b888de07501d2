/**
 * The graph cache as Settings and `hindsight cache` show it (docs/design.md §Graph cache): its
 * folders (./graph-cache.ts graphCacheInfo), each named as the model catalog names its model
 * (`qwen3:8b` rather than an Ollama blob's sha256 path) where the catalog lists it.
 */
import path from 'node:path';
import type { GraphCacheView } from '../../src-shared/models-api.js';
import { graphCacheInfo, GRAPH_CACHE_UNUSED_DAYS } from './graph-cache.js';
import { scanModels } from './model-catalog.js';

export function graphCacheView(modelFolders: readonly string[]): GraphCacheView {
  const info = graphCacheInfo();
  const names = new Map(scanModels({ folders: modelFolders }).models.map((m) => [path.resolve(m.path), m.name]));
  return { ...info, folders: info.folders.map((f) => ({ ...f, name: f.model ? names.get(f.model) ?? null : null })), unusedDays: GRAPH_CACHE_UNUSED_DAYS };
}
