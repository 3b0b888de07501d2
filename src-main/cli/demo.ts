// `hindsight demo [--db PATH] [--out FILE]` — the app's core path, from the command line.
// It imports the bundled demo exports (resources/samples/demo-*.json, see the README there)
// into a database (a fresh temporary one unless --db is given), runs the heuristic judge
// with hints, prints the stats and the first samples, and writes a KTO export beside the
// database (or to --out). It prints each step as it does it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UserError } from '../../src-shared/types.js';
import { withWorkspace } from '../workspace/workspace.js';
import { runJudge } from '../judge/runner.js';
import { HeuristicJudge } from '../judge/verdicts.js';
import { demoExportFiles } from '../import/demo-data.js';
import { DB_OPTION, jsonOption, parseCommandArgs, printJson, type Command } from './args.js';

export const spec = {
  name: 'demo',
  synopsis: '[options]',
  about: 'Runs the app\'s core path on the bundled demo exports: import, the heuristic judge with hints,\n' +
    'stats, the first samples, and a KTO export, printing each step.',
  options: {
    db: { ...DB_OPTION.db, otherwise: 'a new temporary database' },
    out: { type: 'string', value: 'FILE', help: 'where to write the KTO export', otherwise: 'demo-kto.jsonl beside the database' },
    ...jsonOption('print the whole report as one JSON object instead of the steps'),
  },
} as const;

const SAMPLES_DIR = fileURLToPath(new URL('../../resources/samples/', import.meta.url));

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const demoFiles = demoExportFiles(SAMPLES_DIR);
  if (demoFiles.length === 0) throw new UserError(`${SAMPLES_DIR}: the bundled demo exports are missing from this install`);
  const dbPath = values.db ?? path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-demo-')), 'demo.db');
  const outPath = values.out ?? path.join(path.dirname(path.resolve(dbPath)), 'demo-kto.jsonl');
  const say = (line: string) => {
    if (!values.json) process.stdout.write(line + '\n');
  };

  const report = await withWorkspace(dbPath, async (ws) => {
    say(`Hindsight demo: the steps the app takes (npm start), run from the command line.`);
    say(`1. Database: ${ws.dbPath}${values.db ? '' : ' (a new temporary one)'}`);
    const imported = await ws.importFiles(demoFiles);
    const names = demoFiles.map((f) => path.basename(f)).join(', ');
    say(`2. Imported the demo exports in ${path.relative(process.cwd(), SAMPLES_DIR) || '.'} (${names}): ${imported.sessions_added} session${imported.sessions_added === 1 ? '' : 's'} added, ` +
      `${imported.sessions_unchanged} unchanged, ${imported.turns} turns, ${imported.samples} samples.`);
    for (const w of imported.warnings) say(`   warning: ${w}`);
    const judged = await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
    say(`3. Ran the heuristic judge with hints: ${judged.judged} sample${judged.judged === 1 ? '' : 's'} judged, ${judged.skippedManual} manual label${judged.skippedManual === 1 ? '' : 's'} left alone.`);
    const stats = ws.stats();
    say(`4. Stats: ${stats.sessions} session${stats.sessions === 1 ? '' : 's'}, ${stats.turns} turns, ${stats.samples} samples ` +
      `(+1: ${stats.labeled.pos}, −1: ${stats.labeled.neg}, 0: ${stats.labeled.neutral}, unlabeled: ${stats.labeled.unlabeled}); ` +
      `${stats.sessions_without_samples} session${stats.sessions_without_samples === 1 ? '' : 's'} without samples.`);
    const samples = ws.listSamples().slice(0, 3);
    say(`5. The first ${samples.length} sample${samples.length === 1 ? '' : 's'}:`);
    for (const s of samples) {
      say(`   [${s.sessionId} turn ${s.responseTurn}] reply: ${JSON.stringify(s.response.slice(0, 70))}`);
      say(`      next state (${s.nextStateRole}): ${JSON.stringify((s.feedback ?? '').slice(0, 70))} → reward ${s.label.reward}` +
        `${s.label.hint ? `, hint ${JSON.stringify(s.label.hint)}` : ', no hint'} (${s.label.source})`);
      const why = s.label.votes[0]?.raw;
      if (why) say(`      why: ${why}`);
    }
    const exported = await ws.exportJsonl('kto', outPath);
    say(`6. Wrote the KTO export: ${exported.lines} line${exported.lines === 1 ? '' : 's'} to ${exported.path}.`);
    if (exported.lines === 0) {
      say(`   KTO takes only replies judged +1 or −1; the heuristic found no clear praise or correction in these chats, so it scored their replies 0.`);
      say(`   Label one yourself and export again:`);
      if (samples[0]) say(`    npm run cli -- label ${samples[0].sessionId} ${samples[0].responseTurn} --reward 1 --db ${ws.dbPath}`);
    }
    say(`Next: npm run cli -- stats --db ${ws.dbPath}   ·   npm run cli -- export --format samples --out samples.jsonl --db ${ws.dbPath}`);
    return { db: ws.dbPath, imported, judged, stats, samples, export: exported };
  });
  if (values.json) printJson(report);
  return 0;
};
