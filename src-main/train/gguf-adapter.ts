/**
 * A PEFT LoRA adapter as llama.cpp's GGUF LoRA adapter (docs/design.md §GGUF adapters), the
 * format convert_lora_to_gguf.py writes and src/llama-adapter.cpp loads (`llama-cli --lora`,
 * node-llama-cpp's `lora`, Ollama's `ADAPTER`):
 *
 *   general.type "adapter", adapter.type "lora", general.architecture (the base's: llama,
 *   qwen2, qwen3, phi3, granite — llama.cpp refuses an adapter whose architecture differs), adapter.lora.alpha
 *   (f32); tensors `<base tensor>.lora_a` with ggml dims [in, r] (PEFT's A [r, in] row-major)
 *   and `<base tensor>.lora_b` with dims [r, out] (B [out, r]), e.g. blk.3.attn_q.weight.lora_a.
 *
 * llama.cpp applies y += scale·B·(A·x) with scale = alpha / r, r being lora_b's ne[0]: the
 * adapter as ./peft-read.ts reads it (per-module ranks and rsLoRA already folded into one r and
 * alpha with alpha / r the scaling) is written as it is, fp32.
 *
 * Llama's attn_q / attn_k rows are stored permuted in a GGUF (convert_hf_to_gguf.py's
 * LlamaModel.permute: per head, rotate-half order → interleaved pairs), and the converter
 * permutes a LoRA's B the same way (B's rows are the projection's output rows; A is untouched).
 * Granite's are too (its converter is Llama's); Qwen2, Qwen3 and Phi-3 are not permuted.
 *
 * Phi-3 (a model with fused projections, ../model/fused-projections.ts): llama.cpp adapts its
 * attn_qkv and ffn_up as single matrices, so the parts' pairs go out as one fused pair each
 * (./fused-adapter.ts writtenPairs: A stacked, B block-diagonal, rank n·r for n parts), named
 * blk.N.attn_qkv.weight.lora_a/_b and blk.N.ffn_up.weight.lora_a/_b. llama.cpp scales every
 * pair by alpha over its own rank (llama_adapter_lora_weight::get_scale: alpha / b->ne[0]) with
 * one alpha for the file, so a fused pair would get alpha / (n·r): its B is multiplied by n to
 * keep alpha / r, the scaling the parts were trained with.
 */
import type { Checkpoint } from '../model/hf-checkpoint.js';
import { OWN_MODEL_TYPES } from '../model/model-config.js';
import { fusedProjectionsOf } from '../model/fused-projections.js';
import { encodeF32 } from '../model/gguf/encode.js';
import { ROPE_PERMUTED_ARCHITECTURES, permuteRows } from '../model/gguf/model.js';
import { f32, str, writeGgufFile, type GgufEntry, type GgufTensorOut } from '../model/gguf/writer.js';
import { UserError } from '../../src-shared/types.js';
import { PEFT_PREFIX } from './lora.js';
import type { LoadedAdapter } from './peft-read.js';
import { writtenPairs, type WrittenPair } from './fused-adapter.js';

const GGML_F32 = 0;

/** Hugging Face projection → llama.cpp's tensor name within a block. */
const GGUF_PROJECTION: Record<string, string> = {
  'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
  'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
};

export interface GgufTarget {
  /** The base weight's GGUF name (blk.N.attn_q.weight). */
  name: string;
  /** Heads whose rows llama.cpp stores permuted (Llama's q and k), else undefined. */
  permuteHeads?: number;
}

/** A LoRA module as written: its PEFT path and its base weight's sizes. */
type WrittenModule = Pick<WrittenPair, 'module' | 'inFeatures' | 'outFeatures'>;

/** Where a LoRA module's base weight lives in llama.cpp's naming, checked against a GGUF base's own tensors. */
export function ggufTarget(ckpt: Checkpoint, spec: WrittenModule): GgufTarget {
  const hf = `${spec.module.slice(spec.module.startsWith(PEFT_PREFIX) ? PEFT_PREFIX.length : 0)}.weight`;
  const fused = /^model\.layers\.(\d+)\.([a-z_]+\.[a-z_]+)\.weight$/.exec(hf);
  const f = fused ? fusedProjectionsOf(ckpt.config).find((p) => p.module === fused[2]) : undefined;
  if (f) {
    // A fused module (Phi-3): the GGUF's own tensor, which the reader cut into parts, by its llama.cpp name.
    const name = `blk.${fused![1]}.${f.gguf}.weight`;
    const info = ckpt.gguf?.gguf.tensors.find((t) => t.name === name);
    if (ckpt.gguf && !info) throw new UserError(`${ckpt.dir}: has no tensor ${name} for the adapter's module ${hf}`);
    if (info && (info.dims[0] !== spec.inFeatures || info.dims[1] !== spec.outFeatures)) throw new UserError(`${ckpt.dir}: tensor '${name}' is [${[...info.dims].reverse()}], the adapter's ${hf} needs [${spec.outFeatures},${spec.inFeatures}]: is the adapter for another model?`);
    return { name };
  }
  if (ckpt.gguf) {
    const t = ckpt.gguf.tensors.get(hf);
    if (!t) throw new UserError(`${ckpt.dir}: has no tensor for the adapter's module ${hf}`);
    const [rows, cols] = t.shape;
    if (rows !== spec.outFeatures || cols !== spec.inFeatures) throw new UserError(`${ckpt.dir}: tensor '${t.info.name}' is [${t.shape}], the adapter's ${hf} needs [${spec.outFeatures},${spec.inFeatures}]: is the adapter for another model?`);
    return { name: t.info.name, ...(t.permuteHeads ? { permuteHeads: t.permuteHeads } : {}) };
  }
  const m = /^model\.layers\.(\d+)\.([a-z_]+\.[a-z_]+)\.weight$/.exec(hf);
  const proj = m ? GGUF_PROJECTION[m[2]!] : undefined;
  if (!m || !proj) throw new UserError(`adapter module ${hf} has no llama.cpp tensor name`);
  const c = ckpt.config;
  const permuted = ROPE_PERMUTED_ARCHITECTURES.has(ggufArchitecture(ckpt));
  const permuteHeads = permuted && (proj === 'attn_q' || proj === 'attn_k') ? (proj === 'attn_q' ? c.numHeads : c.numKvHeads) : undefined;
  return { name: `blk.${m[1]}.${proj}.weight`, ...(permuteHeads ? { permuteHeads } : {}) };
}

/**
 * The adapter's tensors under llama.cpp's names, B's rows permuted where the base's are; a fused
 * module's pair (rank n·r) with B multiplied by n (see the module comment).
 */
export function ggufAdapterTensors(ckpt: Checkpoint, adapter: LoadedAdapter): GgufTensorOut[] {
  const r = adapter.lora.r;
  // Separate projections pass through as they are; only a fused model's parts are joined.
  const pairs = writtenPairs(ckpt.config, adapter.specs, adapter.weights, r);
  const out: GgufTensorOut[] = [];
  for (const pair of pairs) {
    const target = ggufTarget(ckpt, pair);
    const { a, b, rank, parts } = pair;
    out.push({ name: `${target.name}.lora_a`, dims: [pair.inFeatures, rank], type: GGML_F32, data: () => encodeF32(a) });
    out.push({
      name: `${target.name}.lora_b`, dims: [rank, pair.outFeatures], type: GGML_F32,
      data: () => encodeF32(target.permuteHeads ? permuteRows(b, target.permuteHeads, rank) : parts ? b.map((v) => v * parts) : b),
    });
  }
  return out;
}

/** llama.cpp's name for the base's architecture (general.architecture; a folder's: its family's, or phi3, granite). */
export function ggufArchitecture(ckpt: Checkpoint): string {
  const arch = ckpt.gguf?.gguf.metadata.get('general.architecture');
  if (typeof arch === 'string') return arch;
  return OWN_MODEL_TYPES[ckpt.config.architecture] ?? ckpt.config.family;
}

/** Writes the adapter as a GGUF LoRA adapter file (atomic, 0600). */
export function writeGgufAdapter(file: string, ckpt: Checkpoint, adapter: LoadedAdapter, name: string): { tensors: number; bytes: number } {
  const { lora } = adapter;
  const entries: GgufEntry[] = [
    str('general.architecture', ggufArchitecture(ckpt)),
    str('general.type', 'adapter'),
    str('general.name', name),
    str('adapter.type', 'lora'),
    // alpha 0 means "no scaling" (scale 1) to llama.cpp; an alpha of 0 would scale by 0 in PEFT, so
    // such an adapter is written with zero B instead (below) and alpha = r.
    f32('adapter.lora.alpha', lora.alpha === 0 ? lora.r : lora.alpha),
  ];
  let tensors = ggufAdapterTensors(ckpt, adapter);
  if (lora.alpha === 0) tensors = tensors.map((t) => (t.name.endsWith('.lora_b') ? { ...t, data: () => new Uint8Array(t.dims[0]! * t.dims[1]! * 4) } : t));
  const bytes = writeGgufFile(file, entries, tensors);
  return { tensors: tensors.length, bytes };
}
