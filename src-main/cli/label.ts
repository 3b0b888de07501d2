// `hindsight label <session_id> <response_turn> --reward 1|-1|0 [--hint TEXT] [--repair TEXT] [--notes TEXT]`
// A manual label: it always wins over judge and heuristic labels and survives re-judging
// and re-importing. `--hint ''` clears the hint.
import type { LabelPatch } from '../../src-shared/views.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'label',
  synopsis: '<session_id> <response_turn> [--reward 1|-1|0] [--hint TEXT] [--repair TEXT] [--notes TEXT] [options]',
  about: 'Sets a manual label on one reply (at least one of --reward, --hint, --repair, --notes). A manual\n' +
    'label always wins over judge labels and survives re-judging and re-importing.',
  positionals: true,
  options: {
    reward: { type: 'string', value: '1|-1|0', help: 'the reward', otherwise: 'unchanged' },
    hint: { type: 'string', value: 'TEXT', help: "what the reply should have done (OPD's hint); '' clears it", otherwise: 'unchanged' },
    repair: { type: 'string', value: 'TEXT', help: 'a better reply (sft and dpo exports use it)', otherwise: 'unchanged' },
    notes: { type: 'string', value: 'TEXT', help: 'a free-text note', otherwise: 'unchanged' },
    ...DB_OPTION,
    ...jsonOption('print the label as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

/** Lets `--reward -1` through: node's parseArgs would read `-1` as an unknown flag. */
function joinNegativeValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--reward' && i + 1 < argv.length && /^-\d/.test(argv[i + 1])) {
      out.push(`--reward=${argv[i + 1]}`);
      i++;
    } else out.push(argv[i]);
  }
  return out;
}

export const command: Command = async (argv) => {
  const { values, positionals } = parseCommandArgs(joinNegativeValues(argv), spec);
  if (positionals.length !== 2) throw new UsageError(`expected <session_id> <response_turn>\n${USAGE}`);
  const [sessionId, turnText] = positionals;
  const responseTurn = Number(turnText);
  if (!Number.isInteger(responseTurn) || responseTurn < 0) throw new UsageError(`<response_turn> must be a turn index (0, 1, …), got '${turnText}'`);
  const patch: LabelPatch = {};
  if (values.reward !== undefined) {
    if (!['1', '+1', '-1', '0'].includes(values.reward)) throw new UsageError(`--reward must be 1, -1 or 0, got '${values.reward}'`);
    patch.reward = Number(values.reward) as 1 | -1 | 0;
  }
  if (values.hint !== undefined) patch.hint = values.hint;
  if (values.repair !== undefined) patch.repair = values.repair;
  if (values.notes !== undefined) patch.notes = values.notes;
  if (Object.keys(patch).length === 0) throw new UsageError(`give at least one of --reward, --hint, --repair, --notes\n${USAGE}`);
  const label = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.setLabel(sessionId, responseTurn, patch));
  if (values.json) printJson({ session_id: sessionId, response_turn: responseTurn, ...label });
  else process.stdout.write(`labelled ${sessionId} turn ${responseTurn}: reward ${label.reward ?? 'unset'}${label.hint ? `, hint "${label.hint}"` : ''} (manual)\n`);
  return 0;
};
