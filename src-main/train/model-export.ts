/**
 * `hindsight export-model` and the Training page's "Use in Ollama / llama.cpp" (docs/design.md
 * §GGUF adapters): a finished run's adapter back into the tools people run models with.
 *
 *   <out>/<name>.lora.gguf        the adapter as llama.cpp's GGUF LoRA (./gguf-adapter.ts)
 *   <out>/Modelfile               FROM the base, ADAPTER that file, template, stops (../model/ollama-modelfile.ts)
 *   <out>/<name>.merged.<t>.gguf  with --merged f16|q8_0: base + adapter in one file (./gguf-merged.ts)
 *
 * The run is a training run's folder (its final adapter) or any PEFT adapter folder (a
 * checkpoint's); the base is the model it was trained on, a GGUF file or a folder. The adapter
 * is read against the base's config, so an adapter for another model is one line naming the
 * tensor whose shape differs. Every file is written under a temporary name and renamed, 0600.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import type { ModelExportResult } from '../../src-shared/model-export-api.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { buildModelfile } from '../model/ollama-modelfile.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { findChatTemplate } from '../model/chat-templates.js';
import { ggufTokenizer } from '../model/gguf/tokenizer-json.js';
import { ggufArchitecture, writeGgufAdapter } from './gguf-adapter.js';
import { writeMergedGguf, type MergedType } from './gguf-merged.js';
import { ADAPTER_CONFIG, readAdapter } from './peft-read.js';
import { CHECKPOINTS_DIR } from './run-checkpoint.js';

export interface ModelExportOptions {
  /** A training run's folder or a PEFT adapter folder. */
  run: string;
  /** The base model: a .gguf file or a Hugging Face folder. */
  model: string;
  out: string;
  merged?: MergedType;
  /** The Ollama model name; default `hindsight-<run folder name>`. */
  name?: string;
  /** A system prompt for the Modelfile's SYSTEM: the lessons (docs/design.md §Lessons). */
  system?: string;
}

export type { ModelExportResult };

/** The adapter folder of a run folder (or the folder itself when it is an adapter), or one line saying why there is none. */
export function adapterFolderOf(run: string): string {
  if (!fs.existsSync(run) || !fs.statSync(run).isDirectory()) throw new UserError(`run folder not found: ${run}`);
  if (fs.existsSync(path.join(run, ADAPTER_CONFIG))) return run;
  const hint = fs.existsSync(path.join(run, CHECKPOINTS_DIR)) ? ` (the run has not finished; a checkpoint's folder under ${path.join(run, CHECKPOINTS_DIR)} is an adapter too)` : '';
  throw new UserError(`${run}: holds no adapter (no ${ADAPTER_CONFIG})${hint}`);
}

/** A name Ollama takes: lower case letters, digits, '-', '_' and '.'. */
export function ollamaModelName(run: string): string {
  const base = path.basename(path.resolve(run)).toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[-._]+|[-._]+$/g, '');
  return `hindsight-${base || 'adapter'}`;
}

function chatTemplateOf(model: string, ckpt: Checkpoint): string | undefined {
  if (ckpt.gguf) return ggufTokenizer(ckpt.gguf.gguf).chatTemplate;
  const file = path.join(model, 'tokenizer_config.json');
  const config = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
  return findChatTemplate(model, config);
}

function stopTokens(model: string): string[] {
  try {
    const tok = ChatTokenizer.load(model);
    return tok.eosTokenIds.map((id) => tok.idToToken(id)).filter((t): t is string => t !== undefined);
  } catch {
    return []; // a model without a loadable tokenizer: Ollama's own stop tokens apply
  }
}

const shellQuote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export function exportModel(o: ModelExportOptions): ModelExportResult {
  const adapterDir = adapterFolderOf(o.run);
  const ckpt = Checkpoint.open(o.model);
  const adapter = readAdapter(adapterDir, ckpt.config);
  const name = o.name ?? ollamaModelName(o.run);
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new UserError(`--name ${name}: Ollama model names are lower case letters, digits, '.', '_' and '-'`);
  if (fs.existsSync(o.out) && !fs.statSync(o.out).isDirectory()) throw new UserError(`--out ${o.out}: is a file, not a folder`);
  fs.mkdirSync(o.out, { recursive: true });

  const adapterGguf = path.resolve(o.out, `${name}.lora.gguf`);
  const written = writeGgufAdapter(adapterGguf, ckpt, adapter, name);
  const notes: string[] = [];
  if (!ckpt.gguf) notes.push(`the base is a Hugging Face folder: llama.cpp needs it as a GGUF (convert_hf_to_gguf.py), and the adapter only loads on a GGUF of that same model`);

  const mf = buildModelfile({ base: o.model, adapter: adapterGguf, chatTemplate: chatTemplateOf(o.model, ckpt), stopTokens: stopTokens(o.model), ...(o.system ? { system: o.system } : {}) });
  notes.push(...mf.notes);
  const modelfile = path.resolve(o.out, 'Modelfile');
  const temp = `${modelfile}.tmp-${process.pid}`;
  fs.writeFileSync(temp, mf.text, { mode: 0o600 });
  fs.renameSync(temp, modelfile);

  let mergedGguf: string | undefined;
  if (o.merged) {
    mergedGguf = path.resolve(o.out, `${name}.merged.${o.merged}.gguf`);
    writeMergedGguf(mergedGguf, ckpt, adapter, o.merged);
  }
  const base = ckpt.gguf ? path.resolve(o.model) : '<the base as GGUF>';
  return {
    adapterGguf,
    modelfile,
    ...(mergedGguf ? { mergedGguf } : {}),
    ollamaCommand: `ollama create ${name} -f ${shellQuote(modelfile)}`,
    ollamaName: name,
    llamaCppCommand: `llama-cli -m ${shellQuote(base)} --lora ${shellQuote(adapterGguf)}`,
    architecture: ggufArchitecture(ckpt),
    tensors: written.tensors,
    notes,
  };
}
