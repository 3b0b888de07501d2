/**
 * The merged GGUF (`export-model --merged f16|q8_0`): the base GGUF with W' = W + s·B·A in
 * every adapted linear, for tools that take no adapters. The base's metadata (architecture,
 * hyper-parameters, tokenizer, chat template) is copied key by key with the types it was
 * written with; general.file_type says the new precision and a split base's split.* keys go
 * (the merged model is one file). Every matrix is written in the chosen type (Q8_0 needs rows
 * that are a multiple of 32; a matrix whose rows are not falls back to F16), one-dimensional
 * tensors (norms, biases) stay F32. An adapted weight is dequantised, merged in Hugging Face's
 * layout (./merge.ts's mergeInto), and permuted back into llama.cpp's order for Llama's q/k.
 * Tensors are produced one at a time, so memory stays at about the largest tensor in fp32.
 */
import { UserError } from '../../src-shared/types.js';
import { MERGED_GGUF_TYPES, type MergedGgufType } from '../../src-shared/model-export-api.js';
import type { Checkpoint } from '../model/hf-checkpoint.js';
import { encodeF16, encodeF32, encodeQ8_0 } from '../model/gguf/encode.js';
import { permuteRows, readGgufTensor } from '../model/gguf/model.js';
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
  const hfOf = new Map([...g.tensors].map(([hf, t]) => [t.info.name, { hf, t }]));
  const entries = entriesOf(g.gguf, (key) => key.startsWith('split.') || key === 'general.file_type');
  entries.push({ key: 'general.file_type', type: GGUF_TYPE.u32, value: FILE_TYPE[type] });

  const tensors: GgufTensorOut[] = g.gguf.tensors.map((info) => {
    const found = hfOf.get(info.name);
    const matrix = info.dims.length === 2;
    const out = !matrix ? 'f32' : type === 'q8_0' && info.dims[0]! % 32 === 0 ? 'q8_0' : 'f16';
    return {
      name: info.name,
      dims: info.dims,
      type: GGML[out],
      data: () => {
        // rope_freqs and the like have no Hugging Face name: read them as stored (ggml order).
        const t = found?.t ?? { info, shape: [...info.dims].reverse() };
        let values = readGgufTensor(t);
        const spec = found ? bySpec.get(found.hf) : undefined;
        if (spec) {
          mergeInto(values, adapter.weights.get(loraAKey(spec))!, adapter.weights.get(loraBKey(spec))!, lora.r, spec.inFeatures, spec.outFeatures, scaling);
        }
        if (found?.t.permuteHeads) values = permuteRows(values, found.t.permuteHeads, info.dims[0]!);
        return out === 'q8_0' ? encodeQ8_0(values) : out === 'f16' ? encodeF16(values) : encodeF32(values);
      },
    };
  });
  const bytes = writeGgufFile(file, entries, tensors);
  return { tensors: tensors.length, bytes };
}
