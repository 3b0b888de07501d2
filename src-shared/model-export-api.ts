/**
 * "Use in Ollama / llama.cpp" (docs/design.md §GGUF adapters): a finished run's adapter as a
 * GGUF LoRA, an Ollama Modelfile and optionally a merged GGUF — what `hindsight export-model`
 * writes (src-main/train/model-export.ts). Node-free: the contract spreads MODEL_EXPORT_CALLS
 * into its calls, and the renderer reads the types.
 */
import { call, returns } from './call-spec.js';
import { boolean, object, oneOf, optional, string } from './validate.js';

export const MERGED_GGUF_TYPES = ['f16', 'q8_0'] as const;
export type MergedGgufType = (typeof MERGED_GGUF_TYPES)[number];

export interface ModelExportResult {
  /** The adapter as llama.cpp's GGUF LoRA (`llama-cli --lora`, Ollama's ADAPTER). */
  adapterGguf: string;
  modelfile: string;
  /** With `merged`: base + adapter as one GGUF. */
  mergedGguf?: string;
  /** `ollama create <name> -f <Modelfile>`: what makes the Ollama model. */
  ollamaCommand: string;
  ollamaName: string;
  /** llama.cpp's command line for the base with the adapter. */
  llamaCppCommand: string;
  architecture: string;
  tensors: number;
  /** What the user should know: a template left out, a base that is not a GGUF … */
  notes: string[];
}

const dir = string({ min: 1, max: 4096 });

export const MODEL_EXPORT_CALLS = {
  exportModel: call(
    "Writes a run's adapter as a GGUF LoRA adapter and an Ollama Modelfile (and with `merged` a merged GGUF) into `outDir` (default: <adapterDir>/gguf); with `lessons`, the database's lessons are the Modelfile's SYSTEM.",
    object({ adapterDir: dir, modelDir: dir, outDir: optional(dir), merged: optional(oneOf(MERGED_GGUF_TYPES)), lessons: optional(boolean()) }),
    returns<ModelExportResult>(),
  ),
};
