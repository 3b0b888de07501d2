// `hindsight split [--show] [--hold-out ID…] [--train ID…] [--reset] [--percent P]`
// (docs/design.md §Evaluation): shows the held-out split, and moves sessions in or out of it.
// The user's choice for a session wins over the rule; --reset forgets every choice.
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import type { SplitView } from '../../src-shared/views.js';
import { MIN_HELD_OUT_SAMPLES } from '../../src-shared/eval-stats.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, numberFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

export const spec = {
  name: 'split',
  synopsis: '[--show] [--hold-out ID…] [--train ID…] [--reset] [--percent P]',
  about: 'Shows which sessions are held out: kept for evaluation and never trained on. A session is held out\n' +
    'when a hash of its id falls below the held-out percentage, or, once two sessions have samples and none\n' +
    'does, the one with the smallest hash; your own choice for a session always wins. With no option, shows\n' +
    'the split.',
  options: {
    show: { type: 'boolean', default: false, help: 'print the split (after any change asked for)' },
    'hold-out': { type: 'string', multiple: true, value: 'ID', help: 'hold this session out of training', otherwise: 'unchanged' },
    train: { type: 'string', multiple: true, value: 'ID', help: 'train on this session (it is no longer held out)', otherwise: 'unchanged' },
    reset: { type: 'boolean', default: false, help: 'forget every choice made with --hold-out and --train: the rule decides again' },
    percent: { type: 'string', value: 'P', help: 'hold out about P% of the samples in whole sessions (those whose hash, mod 100, is below P, topped up to 20 samples)', otherwise: 'unchanged (10 at first)' },
    ...DB_OPTION,
    ...jsonOption('print the split as one JSON object'),
  },
} as const;

const WHY: Record<SplitView['listed'][number]['why'], string> = { rule: 'by the rule', minimum: 'added to reach the minimum held-out samples', 'too-large': 'too large to hold out whole; trained on', user: 'your choice' };

export function splitText(view: SplitView): string {
  const lines = [
    `held out: ${view.heldOut.sessions} of ${view.sessions} sessions with samples, ${view.heldOut.samples} of ${view.samples} samples (rule: about ${view.percent}% of the samples, at least ${MIN_HELD_OUT_SAMPLES} when there are enough)`,
  ];
  for (const s of view.listed) lines.push(`  ${s.heldOut ? 'held out' : 'trained '}  ${s.id}  ${s.samples} samples  (${WHY[s.why]})  ${s.title}`);
  return lines.join('\n') + '\n';
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  const holdOut = v['hold-out'] ?? [];
  const train = v.train ?? [];
  const both = holdOut.find((id) => train.includes(id));
  if (both !== undefined) throw new UsageError(`session ${both} is given to both --hold-out and --train`);
  const changes = holdOut.length > 0 || train.length > 0 || v.reset || v.percent !== undefined;
  const db = v.db ?? defaultDbPath();
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first`);
  const view = await withWorkspace(db, (ws) => {
    if (v.reset) process.stderr.write(`forgot ${ws.resetSplit()} choice(s)\n`);
    if (v.percent !== undefined) ws.setHeldOutPercent(numberFlag('percent', v.percent, 0));
    if (holdOut.length) ws.setHeldOut(holdOut, true);
    if (train.length) ws.setHeldOut(train, false);
    return ws.split();
  }, { access: changes ? 'write' : 'read' });
  if (v.json) printJson(view);
  else process.stdout.write(splitText(view));
  return 0;
};
