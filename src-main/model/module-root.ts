/**
 * Module paths between the decoder's names and a Hugging Face model whose decoder sits under
 * another root (ModelConfig.moduleRoot: Gemma 3's multimodal folders, `model.language_model`).
 * Inside, Hindsight names every layer `model.layers.N…`; PEFT adapters name the modules as the
 * loaded model does. Without a root both are the same.
 */
import type { ModelConfig } from './model-config.js';

/** `model.layers.N…` → `<root>.layers.N…` (any suffix kept: `.lora_A.weight`). */
export function hfModulePathOf(path: string, config: Pick<ModelConfig, 'moduleRoot'> | undefined): string {
  const root = config?.moduleRoot;
  return root && path.startsWith('model.layers.') ? `${root}${path.slice('model'.length)}` : path;
}

/** `<root>.layers.N…` (transformers 5's `model.language_model`, 4.5x's `language_model.model`) → `model.layers.N…`. */
export function decoderModulePathOf(path: string, config: Pick<ModelConfig, 'moduleRoot'>): string {
  if (!config.moduleRoot) return path;
  return path.replace(/^(?:model\.language_model|language_model\.model)\.layers\./, 'model.layers.');
}

/** PEFT's target_modules for a decoder under a root: a full-match pattern, so that a vision tower's q_proj and the like are not adapted. */
export function rootTargetPattern(root: string, modules: readonly string[]): string {
  return `${root.replace(/\./g, '\\.')}\\.layers\\.\\d+\\.(?:self_attn|mlp)\\.(?:${modules.join('|')})`;
}
