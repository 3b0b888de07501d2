// `hindsight export-model --run DIR --model BASE --out DIR [--merged f16|q8_0] [--name NAME]`
// (docs/design.md §GGUF adapters): a fine-tune back into the tools people run models with — the
// adapter as a GGUF LoRA that llama.cpp loads with --lora, an Ollama Modelfile, and optionally
// a merged GGUF — and the `ollama create` command to run.
import { exportModel } from '../train/model-export.js';
import { modelFlag } from './model-flags.js';
import { MERGED_TYPES, type MergedType } from '../train/gguf-merged.js';
import { jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'export-model',
  synopsis: '--run DIR --model BASE --out DIR [options]',
  about: "Writes a training run's LoRA adapter as a GGUF adapter (llama.cpp's --lora, Ollama's ADAPTER) and an\n" +
    'Ollama Modelfile into --out, and prints the `ollama create` command that makes the model.',
  options: {
    run: { type: 'string', value: 'DIR', help: 'the training run folder (train --out), or any PEFT adapter folder', required: true },
    model: { type: 'string', value: 'BASE', help: "the base model the adapter was trained on (a .gguf file, a model folder, or a name 'hindsight models' lists)", required: true },
    out: { type: 'string', value: 'DIR', help: 'where to write the files', required: true },
    merged: { type: 'string', value: 'f16|q8_0', help: 'also write the merged model as one GGUF of this type (needs a GGUF base)', otherwise: 'no merged file' },
    name: { type: 'string', value: 'NAME', help: 'the Ollama model name', otherwise: 'hindsight-<run folder name>' },
    ...jsonOption('print the paths, the commands and the notes as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  if (!values.run || !values.model || !values.out) throw new UsageError(`--run, --model and --out are required\n${USAGE}`);
  if (values.merged !== undefined && !MERGED_TYPES.includes(values.merged as MergedType)) throw new UsageError(`--merged must be one of ${MERGED_TYPES.join(', ')}, got '${values.merged}'\n${USAGE}`);
  const r = exportModel({ run: values.run, model: modelFlag(values.model), out: values.out, ...(values.merged ? { merged: values.merged as MergedType } : {}), ...(values.name ? { name: values.name } : {}) });
  if (values.json) {
    printJson(r);
    return 0;
  }
  const lines = [
    `adapter   ${r.adapterGguf}  (GGUF LoRA, ${r.architecture}, ${r.tensors} tensors)`,
    `Modelfile ${r.modelfile}`,
    ...(r.mergedGguf ? [`merged    ${r.mergedGguf}`] : []),
    ...r.notes.map((n) => `note: ${n}`),
    '',
    'Ollama:',
    `  ${r.ollamaCommand}`,
    `  ollama run ${r.ollamaName}`,
    'llama.cpp:',
    `  ${r.llamaCppCommand}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
};
