// `hindsight cache [--clear]` (docs/design.md §Graph cache): what the graph cache holds, each
// model's converted weights and graphs with its form, size and last use, and --clear to remove
// them all. The same as Settings → Converted models.
import { formatBytes, type GraphCacheView } from '../../src-shared/models-api.js';
import { clearGraphCache, GRAPH_CACHE_UNUSED_DAYS } from '../model/graph-cache.js';
import { graphCacheView } from '../model/graph-cache-view.js';
import { SettingsStore } from '../store/settings-file.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, tableLines, type Command } from './args.js';

export const spec = {
  name: 'cache',
  synopsis: '[--clear] [--json]',
  about: "Lists the graph cache: for each model that answered or trained here, the copy of its weights in the form it\n" +
    'ran in (fp32, int8, int4) and its graphs, which a later load maps instead of converting the model again.\n' +
    `Its size, and when it was last used; a folder unused for ${GRAPH_CACHE_UNUSED_DAYS} days is removed on its own. The cache is\n` +
    'HINDSIGHT_GRAPH_CACHE, else ~/.cache/hindsight/graphs (the OS cache folder); it can be deleted at any time.',
  options: {
    clear: { type: 'boolean', default: false, help: 'remove everything in the cache (a model loaded now keeps working)' },
    ...DB_OPTION,
    ...jsonOption('print the cache as one JSON object (root, folders, bytes); with --clear, what was removed'),
  },
} as const;

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  if (v.clear) {
    const cleared = clearGraphCache();
    if (v.json) printJson(cleared);
    else process.stdout.write(`removed ${cleared.removed} folder(s), ${formatBytes(cleared.bytes)}${cleared.kept ? `; ${cleared.kept} in use kept` : ''}\n`);
    return 0;
  }
  const settings = SettingsStore.forDatabase(v.db ?? defaultDbPath(), '');
  const view = graphCacheView(settings.raw.modelFolders);
  if (v.json) printJson(view);
  else process.stdout.write(cacheFoldersText(view) + '\n');
  return 0;
};

/** The cache in a few lines: its folder and size, then one line a model. */
export function cacheFoldersText(view: GraphCacheView): string {
  if (!view.root) return 'The graph cache is off (HINDSIGHT_GRAPH_CACHE=off): every load converts its model again.';
  const head = `Graph cache: ${view.root} (${view.folders.length} folder${view.folders.length === 1 ? '' : 's'}, ${formatBytes(view.bytes)})`;
  if (!view.folders.length) return `${head}\nEmpty: a model's converted weights are kept here the first time it answers or trains.`;
  const rows = view.folders.map((f) => [f.form ?? '?', formatBytes(f.bytes), new Date(f.lastUsed).toISOString().slice(0, 10), f.name ?? f.model ?? "(another version's)"]);
  return [head, ...tableLines([['FORM', 'SIZE', 'LAST USED', 'MODEL'], ...rows]), `A folder unused for ${view.unusedDays} days is removed on its own; hindsight cache --clear removes them all.`].join('\n');
}
