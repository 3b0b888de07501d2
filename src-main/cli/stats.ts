// `hindsight stats` — counts of sessions, turns, samples and labels, and the sessions that
// yield no sample (each with its reason).
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, type Command } from './args.js';

export const spec = {
  name: 'stats',
  synopsis: '[options]',
  about: 'Counts the sessions, turns, samples and labels, and lists the sessions that yield no sample, each with its reason.',
  options: { ...DB_OPTION, ...jsonOption('print the counts as one JSON object') },
} as const;

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const report = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.checks(), { access: 'read' });
  const s = report.stats;
  if (values.json) {
    printJson(s);
    return 0;
  }
  const lines = [
    `sessions  ${s.sessions}`,
    `turns     ${s.turns}`,
    `samples   ${s.samples}  (+1: ${s.labeled.pos}, −1: ${s.labeled.neg}, 0: ${s.labeled.neutral}, unlabeled: ${s.labeled.unlabeled})`,
    `sessions without samples  ${s.sessions_without_samples}`,
    ...report.sessionsWithoutSamples.map((x) => `  ${x.id}  ${x.title}: ${x.reason}`),
    ...report.warnings.map((w) => `note: ${w}`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
};
