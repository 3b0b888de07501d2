// `hindsight samples [--session ID]` — one JSON line per sample (JSONL on stdout, with or
// without --json): {session_id, response_turn, feedback_turn, response, feedback, reward,
// hint, label_source}.
import { withWorkspace } from '../workspace/workspace.js';
import { defaultDbPath, parseCommandArgs, type Command } from './args.js';

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, { session: { type: 'string' } });
  if (values.help) {
    process.stdout.write('usage: hindsight samples [--session ID] [--db PATH] [--json]\n');
    return 0;
  }
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
