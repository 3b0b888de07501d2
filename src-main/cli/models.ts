// `hindsight models [--add DIR] [--remove DIR]` (docs/design.md §Model catalog): lists the
// models on this machine (Ollama's store, LM Studio's models folder, the Hugging Face cache and
// the folders added here), each with its architecture, size, quantisation and context length,
// whether Hindsight can load it, and the form it would answer in here (model/inference-fit.ts);
// --model takes its name or the path shown.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { answersText, formatBytes, formatParameters, MODEL_SOURCE_NAMES, type ModelCatalog } from '../../src-shared/models-api.js';
import { UserError } from '../../src-shared/types.js';
import { scanModels } from '../model/model-catalog.js';
import { SettingsStore } from '../store/settings-file.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, tableLines, type Command } from './args.js';

export const spec = {
  name: 'models',
  synopsis: '[--add DIR] [--remove DIR] [--json]',
  about: "Lists the models on this machine: Ollama's store (OLLAMA_MODELS or ~/.ollama/models), LM Studio's models\n" +
    'folder (~/.lmstudio/models), the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub)\n' +
    'and the folders you added, each with its architecture, parameters, size on disk, quantisation, context\n' +
    'length and whether Hindsight can load it (the reason when not). --model takes its name or the path shown.\n' +
    'Only headers are read, so a large file lists at once.',
  options: {
    add: { type: 'string', multiple: true, value: 'DIR', help: 'also look in this folder (kept in the settings of the database)', otherwise: 'your folders stay as they are' },
    remove: { type: 'string', multiple: true, value: 'DIR', help: 'stop looking in a folder added with --add', otherwise: 'none removed' },
    ...DB_OPTION,
    ...jsonOption('print the catalog as one JSON object: models, the places searched, your folders'),
  },
} as const;

/** The demo model the settings default to (as the app's service names it). */
const DEMO_MODEL_DIR = fileURLToPath(new URL('../../resources/models/stories260K', import.meta.url));

export function catalogText(catalog: ModelCatalog): string {
  const lines: string[] = [];
  const rows = catalog.models.map((m) => [
    m.loadable ? '✓' : '✗', m.name, MODEL_SOURCE_NAMES[m.source], m.architecture ?? '?', formatParameters(m.parameters), formatBytes(m.bytes),
    m.quantization ?? '?', m.contextLength === null ? '?' : String(m.contextLength), answersText(m) || '-',
  ]);
  if (rows.length) {
    const table = tableLines([['', 'NAME', 'SOURCE', 'ARCHITECTURE', 'PARAMS', 'SIZE', 'QUANT', 'CONTEXT', 'ANSWERS HERE'], ...rows]);
    lines.push(table[0]!);
    catalog.models.forEach((m, i) => {
      lines.push(table[i + 1]!, `     ${m.path}`);
      if (!m.loadable) lines.push(`     cannot load: ${m.reason}`);
    });
    const n = catalog.models.filter((m) => m.loadable).length;
    lines.push('', `${catalog.models.length} model(s), ${n} Hindsight can load: give its name or path to --model.`);
    lines.push('ANSWERS HERE: the form of its weights a chat takes on this machine now (fp32 where it fits the memory available, else int8, else int4), the memory that needs,');
    lines.push('and, where the memory holds a shorter chat than the model\'s context, how long a chat fits.');
  } else lines.push('No models found.');
  lines.push('', 'Looked in:', ...catalog.searched.map((l) => `  ${MODEL_SOURCE_NAMES[l.source].padEnd(18)} ${l.path}${l.exists ? '' : '  (not there)'}`));
  if (!catalog.folders.length) lines.push('', 'Add a folder of your own with: hindsight models --add DIR');
  return lines.join('\n') + '\n';
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  const settings = SettingsStore.forDatabase(v.db ?? defaultDbPath(), DEMO_MODEL_DIR);
  const add = (v.add ?? []).map((f) => path.resolve(f));
  const remove = (v.remove ?? []).map((f) => path.resolve(f));
  if (add.length || remove.length) {
    let folders = [...settings.raw.modelFolders];
    for (const f of add) {
      if (!fs.existsSync(f)) throw new UserError(`--add ${f}: no such folder`);
      if (!folders.includes(f)) folders.push(f);
    }
    for (const f of remove) {
      if (!folders.includes(f)) throw new UserError(`--remove ${f}: not one of your folders (${folders.length ? folders.join(', ') : 'none added'})`);
      folders = folders.filter((x) => x !== f);
    }
    settings.setModelFolders(folders);
    for (const f of add) process.stderr.write(`added ${f}\n`);
    for (const f of remove) process.stderr.write(`removed ${f}\n`);
  }
  const catalog = scanModels({ folders: settings.raw.modelFolders });
  if (v.json) printJson(catalog);
  else process.stdout.write(catalogText(catalog));
  return 0;
};
