/**
 * Projections a checkpoint stores as one matrix (Phi-3: q, k and v as `self_attn.qkv_proj`,
 * gate and up as `mlp.gate_up_proj`; GLM-4: gate and up; llama.cpp keeps them fused too, as
 * `attn_qkv` and `ffn_up`), by architecture ({@link fusedProjectionsOf}).
 *
 * The decoder reads them as the separate projections it builds for Llama: each part is a run of
 * the fused matrix's rows, which in a safetensors or GGUF file is a run of its bytes, so a part
 * is the fused tensor's byte range cut, read lazily like any other tensor (no copy, and a GGUF's
 * quantised blocks stay usable as they are). LoRA trains one pair per part; an adapter is written
 * for the fused module again (train/fused-adapter.ts), as PEFT and llama.cpp name it.
 */
import { UserError } from '../../src-shared/types.js';
// The decoder's LinearTarget is the same union; named from src-shared so that this file, which the checkpoint imports, does not import the decoder back.
import type { LoraTarget as LinearTarget } from '../../src-shared/training.js';
import type { ModelConfig } from './model-config.js';

export interface FusedProjection {
  /** The fused module within a layer, as Hugging Face names it. */
  module: string;
  /** llama.cpp's tensor name within a block. */
  gguf: string;
  /** The parts in row order. */
  parts: readonly LinearTarget[];
}

const QKV: FusedProjection = { module: 'self_attn.qkv_proj', gguf: 'attn_qkv', parts: ['q', 'k', 'v'] };
const GATE_UP: FusedProjection = { module: 'mlp.gate_up_proj', gguf: 'ffn_up', parts: ['gate', 'up'] };

/** Every fused projection a checkpoint may have; the parts' rows in this order (transformers' Phi3Attention and Phi3MLP, Glm4MLP split them so). */
export const FUSED_PROJECTIONS: readonly FusedProjection[] = [QKV, GATE_UP];

/** A fused projection's module name within its block, as PEFT's target lists name it (`qkv_proj`). */
export const fusedModuleName = (f: FusedProjection): string => f.module.split('.').at(-1)!;

/** The architectures whose checkpoints (and llama.cpp's files of them) fuse projections, and which. */
const FUSED_BY_ARCHITECTURE: Readonly<Record<string, readonly FusedProjection[]>> = {
  Phi3ForCausalLM: [QKV, GATE_UP],
  Glm4ForCausalLM: [GATE_UP],
};

/** The projections this model's checkpoint fuses (none for most). */
export function fusedProjectionsOf(config: Pick<ModelConfig, 'architecture'>): readonly FusedProjection[] {
  return FUSED_BY_ARCHITECTURE[config.architecture] ?? [];
}

/** Each projection's module within a layer, as the decoder (and PEFT) name it. */
export const PART_MODULES: Record<LinearTarget, string> = {
  q: 'self_attn.q_proj', k: 'self_attn.k_proj', v: 'self_attn.v_proj', o: 'self_attn.o_proj',
  gate: 'mlp.gate_proj', up: 'mlp.up_proj', down: 'mlp.down_proj',
};

/** The number of rows a part has in the fused matrix. */
export function partRows(config: ModelConfig, target: LinearTarget): number {
  switch (target) {
    case 'q': return config.numHeads * config.headDim;
    case 'k':
    case 'v': return config.numKvHeads * config.headDim;
    case 'gate':
    case 'up': return config.intermediateSize;
    default: throw new Error(`${target} is not part of a fused projection`);
  }
}

/** Each part's first row and row count within its fused matrix. */
export function partSpans(config: ModelConfig, fused: FusedProjection): { target: LinearTarget; start: number; rows: number }[] {
  let start = 0;
  return fused.parts.map((target) => {
    const rows = partRows(config, target);
    const span = { target, start, rows };
    start += rows;
    return span;
  });
}

/** The fused projection a target belongs to in this model, if its checkpoint fuses it. */
export function fusedProjectionOf(config: ModelConfig, target: LinearTarget): FusedProjection | undefined {
  return fusedProjectionsOf(config).find((f) => f.parts.includes(target));
}

/** The byte range of rows [start, start + rows) of a row-major tensor stored in [begin, end) with `total` rows. */
export function rowBytes(begin: number, end: number, total: number, start: number, rows: number): { begin: number; end: number } {
  const perRow = (end - begin) / total;
  if (!Number.isInteger(perRow)) throw new Error(`a tensor of ${end - begin} bytes does not hold ${total} whole rows`);
  return { begin: begin + start * perRow, end: begin + (start + rows) * perRow };
}

/**
 * Replaces each layer's fused tensors in `tensors` (by Hugging Face name) with their parts, each
 * `cut(tensor, part name, start, rows)`. `where` names the file in the error for a fused tensor
 * whose rows are not its parts'.
 */
export function splitFusedTensors<T>(config: ModelConfig, tensors: Map<string, T>, where: string, rowsOf: (t: T) => number, cut: (t: T, name: string, start: number, rows: number) => T): void {
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const fused of fusedProjectionsOf(config)) {
      const name = `model.layers.${layer}.${fused.module}.weight`;
      const whole = tensors.get(name);
      if (whole === undefined) continue;
      const spans = partSpans(config, fused);
      const expected = spans.reduce((n, s) => n + s.rows, 0);
      if (rowsOf(whole) !== expected) throw new UserError(`${where}: tensor '${name}' has ${rowsOf(whole)} rows, expected ${expected} (${fused.parts.join(', ')} from the model's sizes)`);
      tensors.delete(name);
      for (const { target, start, rows } of spans) {
        const part = `model.layers.${layer}.${PART_MODULES[target]}.weight`;
        tensors.set(part, cut(whole, part, start, rows));
      }
    }
  }
}

/**
 * The inverse of {@link splitFusedTensors} for tensors about to be written (a merged model's, by
 * Hugging Face name): each layer's parts concatenated, in row order, under the fused name.
 */
export function joinFusedTensors(config: ModelConfig, tensors: Record<string, { dtype: 'F32'; shape: number[]; data: Float32Array } | { dtype: string; shape: number[]; data: unknown }>): void {
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const fused of fusedProjectionsOf(config)) {
      const names = fused.parts.map((t) => `model.layers.${layer}.${PART_MODULES[t]}.weight`);
      const parts = names.map((n) => tensors[n]);
      if (!parts.every((p) => p?.dtype === 'F32')) continue;
      const arrays = parts.map((p) => p!.data as Float32Array);
      const data = new Float32Array(arrays.reduce((n, a) => n + a.length, 0));
      arrays.reduce((at, a) => (data.set(a, at), at + a.length), 0);
      for (const n of names) delete tensors[n];
      tensors[`model.layers.${layer}.${fused.module}.weight`] = { dtype: 'F32', shape: [parts.reduce((n, p) => n + p!.shape[0]!, 0), parts[0]!.shape[1]!], data };
    }
  }
}
