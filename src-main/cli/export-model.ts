// `hindsight export-model --run DIR --model BASE --out DIR [--merged f16|q8_0] [--name NAME]`
// (docs/design.md §GGUF adapters): a fine-tune back into the tools people run models with — the
// adapter as a GGUF LoRA that llama.cpp loads with --lora, an Ollama Modelfile, and optionally
// a merged GGUF — and the `ollama create` command to run. With --lessons, the database's lessons
// (`hindsight lessons`, docs/design.md §Lessons) become the Modelfile's SYSTEM.
import { exportModel } from '../train/model-export.js';
import { modelFlag } from './model-flags.js';
import { MERGED_TYPES, type MergedType } from '../train/gguf-merged.js';
import { UserError } from '../../src-shared/types.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

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
    lessons: { type: 'boolean', default: false, help: "write the database's lessons (hindsight lessons) as the Modelfile's SYSTEM prompt" },
    db: { ...DB_OPTION.db, help: 'the database whose lessons --lessons writes' },
    ...jsonOption('print the paths, the commands and the notes as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

/** The database's lessons, or one line saying there are none. */
async function storedLessons(db: string): Promise<string> {
  const text = await withWorkspace(db, (ws) => ws.lessons()?.text, { access: 'read' }).catch((err: unknown) => {
    throw new UserError(`--lessons: cannot read the lessons of ${db}: ${(err as Error).message}`);
  });
  if (!text) throw new UserError(`--lessons: ${db} has no lessons yet (hindsight lessons --regenerate --db ${db})`);
  return text;
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  if (!values.run || !values.model || !values.out) throw new UsageError(`--run, --model and --out are required\n${USAGE}`);
  if (values.merged !== undefined && !MERGED_TYPES.includes(values.merged as MergedType)) throw new UsageError(`--merged must be one of ${MERGED_TYPES.join(', ')}, got '${values.merged}'\n${USAGE}`);
  if (values.db !== undefined && !values.lessons) throw new UsageError(`--db goes with --lessons\n${USAGE}`);
  const system = values.lessons ? await storedLessons(values.db ?? defaultDbPath()) : undefined;
  const r = exportModel({
    run: values.run, model: modelFlag(values.model, '--model', values.db), out: values.out, ...(values.merged ? { merged: values.merged as MergedType } : {}), ...(values.name ? { name: values.name } : {}), ...(system ? { system } : {}),
  });
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
