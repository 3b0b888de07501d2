/**
 * What a model on disk is, from its headers only (docs/design.md §Model catalog): a GGUF file's
 * metadata and tensor infos (./gguf/reader.ts, long arrays stepped over, so a 5 GB file with a
 * 150k-token vocabulary takes milliseconds), or a checkpoint folder's config.json and its
 * safetensors headers. Whether Hindsight can load it is checked by its loaders' own rules (a
 * GGUF's layout by ./gguf/model.ts ggufModelLayout, a folder's by readModelConfig), then the
 * tensor types and the tokenizer. Nothing here throws: a broken file is a description with
 * `loadable: false` and the one-line reason.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { CatalogModel } from '../../src-shared/models-api.js';
import { canDequantize } from './gguf/dequantize.js';
import { ggmlTypeName } from './gguf/ggml-types.js';
import { ggufModelLayout } from './gguf/model.js';
import { GGUF_PRE_TOKENIZERS } from './gguf/tokenizer-json.js';
import { readGgufHeader, type GgufFile } from './gguf/reader.js';
import { readModelConfig } from './hf-checkpoint.js';
import { readSafetensorsHeader, type TensorEntry } from './safetensors.js';
import { shapeOf } from './host-memory.js';
import { answersHere } from './inference-fit.js';

/** A catalog entry less what its place gives it (name, source, path). */
export type ModelFacts = Omit<CatalogModel, 'name' | 'source' | 'path'>;

/** llama.cpp's `llama_ftype` (llama.h), which GGUF stores as general.file_type. */
const FILE_TYPES: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K', 11: 'Q3_K_S', 12: 'Q3_K_M', 13: 'Q3_K_L',
  14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K', 19: 'IQ2_XXS', 20: 'IQ2_XS', 21: 'Q2_K_S', 22: 'IQ3_XS',
  23: 'IQ3_XXS', 24: 'IQ1_S', 25: 'IQ4_NL', 26: 'IQ3_S', 27: 'IQ3_M', 28: 'IQ2_S', 29: 'IQ2_M', 30: 'IQ4_XS', 31: 'IQ1_M',
  32: 'BF16', 36: 'TQ1_0', 37: 'TQ2_0', 38: 'MXFP4_MOE',
};
const GGUF_TOKENIZERS = ['gpt2', 'llama'];
const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

const EMPTY: ModelFacts = { format: null, architecture: null, parameters: null, bytes: null, quantization: null, contextLength: null, loadable: false, reason: null, answers: null };

/** The message of an error, on one line, without the path the entry already shows. */
export function oneLine(err: unknown, file?: string): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return 'a symbolic link loop';
  if (code === 'ENOENT') return 'missing (a broken link or a removed file)';
  if (code === 'EACCES' || code === 'EPERM') return 'not readable (permission denied)';
  let text = ((err as Error).message ?? String(err)).split('\n')[0]!;
  if (file) text = text.split(`${file}: `).join('').split(file).join('the file');
  return text;
}

/** Which type holds most of the bytes of a list of (type, bytes). */
function dominant(items: Iterable<[string, number]>): string | null {
  const bytes = new Map<string, number>();
  for (const [type, n] of items) bytes.set(type, (bytes.get(type) ?? 0) + n);
  let best: string | null = null;
  for (const [type, n] of bytes) if (best === null || n > bytes.get(best)!) best = type;
  return best;
}

/** The parts of a GGUF model: the file, or every part of a split one (any part given). */
export function ggufParts(file: string): string[] {
  const m = SPLIT.exec(path.basename(file));
  if (!m) return [file];
  return Array.from({ length: Number(m[3]) }, (_, i) => path.join(path.dirname(file), `${m[1]}-${String(i + 1).padStart(5, '0')}-of-${m[3]}.gguf`));
}

/** A GGUF model from its headers. */
export function inspectGguf(file: string): ModelFacts {
  const facts: ModelFacts = { ...EMPTY, format: 'gguf' };
  const parts = ggufParts(file);
  let headers: GgufFile[];
  try {
    for (const p of parts) if (!fs.existsSync(p)) return { ...facts, reason: `part ${path.basename(p)} of the split model is missing` };
    facts.bytes = parts.reduce((a, p) => a + fs.statSync(p).size, 0);
    headers = parts.map((p) => readGgufHeader(p, { skipArrays: true }));
  } catch (err) {
    return { ...facts, reason: oneLine(err, file) };
  }
  const meta = headers[0]!.metadata;
  const tensors = headers.flatMap((h) => h.tensors);
  const arch = meta.get('general.architecture');
  facts.architecture = typeof arch === 'string' ? arch : null;
  facts.parameters = tensors.reduce((a, t) => a + t.dims.reduce((x, d) => x * d, 1), 0);
  const fileType = meta.get('general.file_type');
  const weights = tensors.filter((t) => t.dims.length >= 2);
  facts.quantization = (typeof fileType === 'number' ? FILE_TYPES[fileType] : undefined) ?? dominant(weights.map((t) => [ggmlTypeName(t.type), t.end - t.begin]));
  const ctx = meta.get(`${String(arch)}.context_length`);
  facts.contextLength = typeof ctx === 'number' ? ctx : null;
  // Loadable as openGgufModel would load it: the same layout rules on the skimmed header, then
  // what it checks later (the tensors' types, the tokenizer).
  let layout: ReturnType<typeof ggufModelLayout>;
  try {
    layout = ggufModelLayout({ ...headers[0]!, tensors }, file);
  } catch (err) {
    return { ...facts, loadable: false, reason: oneLine(err, file).split(`${path.basename(file)}: `).join('') };
  }
  // The context Hindsight runs it at (Phi-3's LongRoPE and window cap it).
  facts.contextLength = layout.config.maxPositionEmbeddings;
  const loadable = ggufLoadable(meta, tensors);
  return { ...facts, ...loadable, answers: loadable.loadable ? answersHere(shapeOf(layout.config)) : null };
}

/** What openGgufModel's layout does not check and loading does: the tensors' types and the tokenizer. */
function ggufLoadable(meta: GgufFile['metadata'], tensors: GgufFile['tensors']): { loadable: boolean; reason: string | null } {
  const no = (reason: string) => ({ loadable: false, reason });
  const odd = tensors.find((t) => !canDequantize(t.type));
  if (odd) return no(`tensor type ${ggmlTypeName(odd.type)} is not supported (tensor '${odd.name}')`);
  const tok = meta.get('tokenizer.ggml.model');
  if (typeof tok !== 'string') return no('has no tokenizer (tokenizer.ggml.model is missing)');
  if (!GGUF_TOKENIZERS.includes(tok)) return no(`tokenizer '${tok}' is not supported (supported: ${GGUF_TOKENIZERS.join(', ')})`);
  const pre = meta.get('tokenizer.ggml.pre') ?? 'default';
  if (tok === 'gpt2' && !GGUF_PRE_TOKENIZERS.includes(String(pre))) return no(`the pre-tokenizer '${String(pre)}' (tokenizer.ggml.pre) is not supported`);
  return { loadable: true, reason: null };
}

/** The safetensors files of a checkpoint folder (the index's shards, or every *.safetensors). */
function safetensorsFiles(dir: string): string[] {
  const index = path.join(dir, 'model.safetensors.index.json');
  if (fs.existsSync(index)) {
    const map = (JSON.parse(fs.readFileSync(index, 'utf8')) as { weight_map?: Record<string, string> }).weight_map ?? {};
    return [...new Set(Object.values(map))].map((f) => path.join(dir, f));
  }
  return fs.readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort().map((f) => path.join(dir, f));
}

/** A Hugging Face checkpoint folder from config.json and its safetensors headers. */
export function inspectCheckpoint(dir: string): ModelFacts {
  const facts: ModelFacts = { ...EMPTY, format: 'safetensors' };
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    if (typeof raw !== 'object' || raw === null) throw new Error('config.json is not a JSON object');
  } catch (err) {
    return { ...facts, reason: `config.json: ${oneLine(err, path.join(dir, 'config.json'))}` };
  }
  const archs = Array.isArray(raw.architectures) ? (raw.architectures as unknown[]).filter((a): a is string => typeof a === 'string') : [];
  facts.architecture = archs[0] ?? (typeof raw.model_type === 'string' ? raw.model_type : null);
  const text = (raw.text_config ?? raw) as Record<string, unknown>;
  facts.contextLength = typeof text.max_position_embeddings === 'number' ? text.max_position_embeddings : null;
  const dtype = raw.torch_dtype ?? raw.dtype;
  let reason: string | null = null;
  try {
    const files = safetensorsFiles(dir);
    if (!files.length) reason = 'no weights (no *.safetensors file)';
    const entries: TensorEntry[] = [];
    let bytes = 0;
    for (const f of files) {
      if (!fs.existsSync(f)) {
        reason = `shard ${path.basename(f)} is missing`;
        continue;
      }
      bytes += fs.statSync(f).size;
      entries.push(...readSafetensorsHeader(f).tensors);
    }
    facts.bytes = bytes;
    if (entries.length) facts.parameters = entries.reduce((a, e) => a + e.shape.reduce((x, d) => x * d, 1), 0);
    facts.quantization = dominant(entries.map((e) => [e.dtype, e.end - e.begin])) ?? (typeof dtype === 'string' ? dtype : null);
  } catch (err) {
    reason = oneLine(err, dir);
  }
  const quant = (raw.quantization_config as { quant_method?: unknown } | undefined)?.quant_method;
  if (!reason && quant !== undefined) reason = `quantised with ${String(quant)}, which Hindsight cannot read (it reads F32, F16 and BF16 safetensors)`;
  if (!reason) {
    try {
      // The context Hindsight runs the model at: a sliding window or LongRoPE's original context caps it (hf-checkpoint.ts contextCap).
      const config = readModelConfig(dir);
      facts.contextLength = config.maxPositionEmbeddings;
      facts.answers = answersHere(shapeOf(config));
    } catch (err) {
      reason = oneLine(err, path.join(dir, 'config.json'));
    }
  }
  if (!reason && !fs.existsSync(path.join(dir, 'tokenizer.json'))) reason = 'no tokenizer.json';
  return { ...facts, loadable: reason === null, reason, answers: reason === null ? facts.answers : null };
}

/** A .gguf file or a checkpoint folder, whichever `p` is. */
export function inspectModel(p: string): ModelFacts {
  try {
    if (fs.statSync(p).isDirectory()) return inspectCheckpoint(p);
  } catch (err) {
    return { ...EMPTY, reason: oneLine(err, p) };
  }
  return inspectGguf(p);
}
