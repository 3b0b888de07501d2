// `hindsight samples [--session ID]` — one JSON line per sample (JSONL on stdout, with or
// without --json): {session_id, response_turn, feedback_turn, response, feedback, reward,
// hint, label_source}.
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, type Command } from './args.js';

export const spec = {
  name: 'samples',
  synopsis: '[options]',
  about: 'Prints one JSON line per sample: session_id, response_turn, feedback_turn, response, feedback,\n' +
    'reward, hint and label_source. (`export --format samples` writes the full records, context included.)',
  options: {
    session: { type: 'string', value: 'ID', help: 'only the samples of this session', otherwise: 'every session' },
    ...DB_OPTION,
    ...jsonOption('accepted for symmetry: the output is JSON lines either way'),
  },
} as const;

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const samples = await withWorkspace(values.db ?? defaultDbPath(), (ws) => ws.listSamples(values.session), { access: 'read' });
  let out = '';
  for (const s of samples) {
    out +=
      JSON.stringify({
        session_id: s.sessionId,
        response_turn: s.responseTurn,
        feedback_turn: s.feedbackTurn,
        response: s.response,
        feedback: s.feedback,
        reward: s.label.reward,
        hint: s.label.hint,
        label_source: s.label.source,
      }) + '\n';
  }
  process.stdout.write(out);
  return 0;
};
