/**
 * The models on this machine (docs/design.md §Model catalog): what `hindsight models` prints
 * and the model picker lists, found in Ollama's store, LM Studio's models folder, the Hugging
 * Face cache and the folders the user added (src-main/model/model-catalog.ts scans them).
 * Node-free: the contract spreads MODEL_CALLS into its calls, and the renderer reads the types.
 */
import { call, returns } from './call-spec.js';
import { object } from './validate.js';
import type { Quantize } from './training.js';
import { formatBytes as formatMemory } from './memory-verdict.js';
import { formName } from './inference-memory.js';

export const MODEL_SOURCES = ['ollama', 'lmstudio', 'huggingface', 'folder'] as const;
export type ModelSource = (typeof MODEL_SOURCES)[number];

/** How each source is named to the user. */
export const MODEL_SOURCE_NAMES: Record<ModelSource, string> = { ollama: 'Ollama', lmstudio: 'LM Studio', huggingface: 'Hugging Face cache', folder: 'Your folders' };

export interface CatalogModel {
  /** As its tool names it: `qwen2.5:7b-instruct` (Ollama), `publisher/repo/file.gguf` (LM Studio), `org/name` (Hugging Face). */
  name: string;
  source: ModelSource;
  /** What `--model` and every model field take: a .gguf file (an Ollama blob is one) or a checkpoint folder. */
  path: string;
  format: 'gguf' | 'safetensors' | null;
  /** GGUF's general.architecture (`qwen2`) or config.json's architecture (`Qwen2ForCausalLM`). */
  architecture: string | null;
  parameters: number | null;
  /** Bytes on disk (every part of a split GGUF, every safetensors shard). */
  bytes: number | null;
  /** GGUF's file type (`Q4_K_M`) or its dominant tensor type; a checkpoint's dtype (`BF16`). */
  quantization: string | null;
  contextLength: number | null;
  /** Whether Hindsight can load it; when not, `reason` says why in one line. */
  loadable: boolean;
  reason: string | null;
  /**
   * How it would answer on this machine when listed (src-main/model/inference-fit.ts): the form
   * of its weights a chat takes, the memory that needs, and the longest chat that fits beside it
   * (`contextTokens`, at most `contextLength`); `form` null where not even int4 fits (`bytes`: what
   * int4 needs; `contextTokens` null). Null where it cannot be loaded.
   */
  answers: { form: Quantize | null; bytes: number; contextTokens: number | null } | null;
}

/** A place the scan looked in, and whether it was there. */
export interface CatalogLocation {
  source: ModelSource;
  path: string;
  exists: boolean;
}

export interface ModelCatalog {
  models: CatalogModel[];
  searched: CatalogLocation[];
  /** The folders the user added (`hindsight models --add`), as stored. */
  folders: string[];
}

/** One model's converted weights and graphs in the graph cache (src-main/model/graph-cache.ts). */
export interface CachedModelFolder {
  folder: string;
  /** The model file or folder they were converted from; null for a folder of another Hindsight's format. */
  model: string | null;
  /** The form of the weights: fp32, int8 or int4 (null: unknown). */
  form: string | null;
  bytes: number;
  /** When it was last used, in ms since the epoch. */
  lastUsed: number;
}

export interface GraphCacheInfo {
  /** The cache folder; null where the cache is off (HINDSIGHT_GRAPH_CACHE=off). */
  root: string | null;
  /** Most recently used first. */
  folders: CachedModelFolder[];
  bytes: number;
}

/** The cache as Settings and `hindsight cache` show it: each folder with the model's name where the catalog lists it. */
export interface GraphCacheView extends GraphCacheInfo {
  folders: (CachedModelFolder & { name: string | null })[];
  /** Days after which an unused folder is removed (GRAPH_CACHE_UNUSED_DAYS). */
  unusedDays: number;
}

export const MODEL_CALLS = {
  listModels: call(
    "The models on this machine: Ollama's store, LM Studio's models folder, the Hugging Face cache and the user's folders, each with what Hindsight can tell from its headers.",
    object({}),
    returns<ModelCatalog>(),
  ),
  graphCache: call("The graph cache: each model's weights converted to the form it ran in, and its graphs, with their size and last use.", object({}), returns<GraphCacheView>()),
  clearGraphCache: call('Removes everything in the graph cache (a model loaded now keeps working).', object({}), returns<{ removed: number; bytes: number; kept: number }>()),
};

/** "7.6B", "135M", "260K": a parameter count as model names write it. */
export function formatParameters(n: number | null): string {
  if (n === null) return '?';
  const [div, unit] = n >= 1e9 ? [1e9, 'B'] : n >= 1e6 ? [1e6, 'M'] : n >= 1e3 ? [1e3, 'K'] : [1, ''];
  const v = n / div;
  return `${v >= 100 || div === 1 ? Math.round(v) : v.toFixed(1).replace(/\.0$/, '')}${unit}`;
}

/** "4.4 GB", "812 MB": bytes on disk, in decimal units as file managers show them. */
export function formatBytes(n: number | null): string {
  if (n === null) return '?';
  const [div, unit] = n >= 1e9 ? [1e9, 'GB'] : n >= 1e6 ? [1e6, 'MB'] : n >= 1e3 ? [1e3, 'kB'] : [1, 'B'];
  const v = n / div;
  return `${v >= 100 || div === 1 ? Math.round(v) : v.toFixed(1).replace(/\.0$/, '')} ${unit}`;
}

/**
 * How a listed model answers here, in words: "fp32, about 1.4 GB", "int4, about 7.5 GB, chats to
 * 8,608 tokens" (where memory holds a shorter chat than its context), "too big (int4: about 7.5
 * GB)"; '' when not known.
 */
export function answersText(m: Pick<CatalogModel, 'answers' | 'contextLength'>): string {
  if (!m.answers) return '';
  const { form, bytes, contextTokens } = m.answers;
  if (!form) return `too big (int4: about ${formatMemory(bytes)})`;
  const shorter = contextTokens !== null && m.contextLength !== null && contextTokens < m.contextLength;
  return `${formName(form)}, about ${formatMemory(bytes)}${shorter ? `, chats to ${contextTokens.toLocaleString('en-US')} tokens` : ''}`;
}
