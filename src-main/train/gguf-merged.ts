/**
 * The merged GGUF (`export-model --merged f16|q8_0`): the base GGUF with W' = W + s·B·A in
 * every adapted linear, for tools that take no adapters. The base's metadata (architecture,
 * hyper-parameters, tokenizer, chat template) is copied key by key with the types it was
 * written with; general.file_type says the new precision and a split base's split.* keys go
 * (the merged model is one file). Every matrix is written in the chosen type (Q8_0 needs rows
 * that are a multiple of 32; a matrix whose rows are not falls back to F16), one-dimensional
 * tensors (norms, biases) stay F32. An adapted weight is dequantised, merged in Hugging Face's
 * layout (./merge.ts's mergeInto), and permuted back into llama.cpp's order for Llama's q/k.
 * Phi-3's fused attn_qkv and ffn_up, which the reader cuts into parts (../model/fused-projections.ts),
 * are written whole: each adapted part's update goes into its own rows of the fused tensor.
 * Tensors are produced one at a time, so memory stays at about the largest tensor in fp32.
 */
import { UserError } from '../../src-shared/types.js';
import { MERGED_GGUF_TYPES, type MergedGgufType } from '../../src-shared/model-export-api.js';
import type { Checkpoint } from '../model/hf-checkpoint.js';
import { encodeF16, encodeF32, encodeQ8_0 } from '../model/gguf/encode.js';
import { permuteRows, readGgufTensor, type GgufTensor } from '../model/gguf/model.js';
import { entriesOf, writeGgufFile, type GgufTensorOut } from '../model/gguf/writer.js';
import { GGUF_TYPE } from '../model/gguf/writer.js';
import { PEFT_PREFIX, loraAKey, loraBKey } from './lora.js';
import { mergeInto } from './merge.js';
import type { LoadedAdapter } from './peft-read.js';

export type MergedType = MergedGgufType;
export const MERGED_TYPES: readonly MergedType[] = MERGED_GGUF_TYPES;

const GGML = { f32: 0, f16: 1, q8_0: 8 } as const;
/** llama_ftype: LLAMA_FTYPE_MOSTLY_F16, LLAMA_FTYPE_MOSTLY_Q8_0. */
const FILE_TYPE: Record<MergedType, number> = { f16: 1, q8_0: 7 };

/** Writes the merged model as one GGUF file (atomic, 0600); the base must be a GGUF. */
export function writeMergedGguf(file: string, ckpt: Checkpoint, adapter: LoadedAdapter, type: MergedType): { tensors: number; bytes: number } {
  const g = ckpt.gguf;
  if (!g) throw new UserError(`a merged GGUF (--merged) needs a GGUF base: ${ckpt.dir} is a Hugging Face folder (merge it into a folder with the app's merged export, or convert it with llama.cpp's convert_hf_to_gguf.py first)`);
  const { lora } = adapter;
  const scaling = lora.alpha / lora.r;
  const bySpec = new Map(adapter.specs.map((s) => [`${s.module.slice(PEFT_PREFIX.length)}.weight`, s]));
  // The file's tensors by name → the Hugging Face tensors in them: one, or a fused tensor's parts.
  const hfOf = new Map<string, { hf: string; t: GgufTensor }[]>();
  for (const [hf, t] of g.tensors) hfOf.set(t.info.name, [...(hfOf.get(t.info.name) ?? []), { hf, t }]);
  const entries = entriesOf(g.gguf, (key) => key.startsWith('split.') || key === 'general.file_type');
  entries.push({ key: 'general.file_type', type: GGUF_TYPE.u32, value: FILE_TYPE[type] });

  const tensors: GgufTensorOut[] = g.gguf.tensors.map((info) => {
    const found = hfOf.get(info.name) ?? [];
    const matrix = info.dims.length === 2;
    const out = !matrix ? 'f32' : type === 'q8_0' && info.dims[0]! % 32 === 0 ? 'q8_0' : 'f16';
    return {
      name: info.name,
      dims: info.dims,
      type: GGML[out],
      data: () => {
        // A tensor read as one (rope_freqs and the like, which have no Hugging Face name, as
        // stored), or a fused tensor whole, its parts being runs of its rows.
        const whole: GgufTensor = found.length === 1 && found[0]!.t.info.begin === info.begin && found[0]!.t.info.end === info.end ? found[0]!.t : { info, shape: [...info.dims].reverse() };
        // Gemma's norms are read as the file stores them (1 + w): nothing merges into them.
        let values = readGgufTensor({ ...whole, minusOne: false });
        const cols = info.dims[0]!, rowBytes = (info.end - info.begin) / (info.dims[1] ?? 1);
        for (const { hf, t } of found) {
          const spec = bySpec.get(hf);
          if (!spec) continue;
          const start = (t.info.begin - info.begin) / rowBytes;
          const rows = values.subarray(start * cols, (start + spec.outFeatures) * cols);
          mergeInto(rows, adapter.weights.get(loraAKey(spec))!, adapter.weights.get(loraBKey(spec))!, lora.r, spec.inFeatures, spec.outFeatures, scaling);
        }
        if (whole.permuteHeads) values = permuteRows(values, whole.permuteHeads, cols);
        return out === 'q8_0' ? encodeQ8_0(values) : out === 'f16' ? encodeF16(values) : encodeF32(values);
      },
    };
  });
  const bytes = writeGgufFile(file, entries, tensors);
  return { tensors: tensors.length, bytes };
}
