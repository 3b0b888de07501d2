// `hindsight judge --backend heuristic|local|openai [--model DIR] [--endpoint URL] [--votes N] [--hints] [--force]`
// Runs a judge over the samples. Manual labels are never touched; re-runs are incremental
// (samples already judged by the same backend, model and prompt are skipped unless --force).
// The LLM backends plug in through `loadBackend` once they exist (src-main/pipeline/).
import { UserError } from '../core/types.js';
import { withWorkspace } from '../core/workspace.js';
import { HeuristicJudge, type JudgeBackend } from '../pipeline/judge.js';
import { defaultDbPath, intFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const BACKENDS = ['heuristic', 'local', 'openai'] as const;
type BackendName = (typeof BACKENDS)[number];

const USAGE = 'usage: hindsight judge --backend heuristic|local|openai [--model DIR] [--endpoint URL] [--votes N] [--hints] [--force] [--db PATH] [--json]';

export interface LlmJudgeOptions {
  model?: string;
  endpoint?: string;
  apiKey?: string;
}

/**
 * THE PLUG for the LLM judges: `src-main/pipeline/llm-judge.ts`, once it exists, exports
 * `createJudgeBackend(kind: 'local' | 'openai', options: LlmJudgeOptions): Promise<JudgeBackend>`.
 * Until then (the module is absent) choosing those backends is a clear user error. Any
 * other failure while loading it is a real error and is not hidden.
 */
async function loadLlmJudgeModule(): Promise<{ createJudgeBackend(kind: 'local' | 'openai', options: LlmJudgeOptions): Promise<JudgeBackend> } | null> {
  const specifier = '../pipeline/llm-judge.js'; // not a literal: the module may not exist yet
  try {
    return await import(specifier);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ERR_MODULE_NOT_FOUND' && String(e.message).includes('llm-judge')) return null;
    throw err;
  }
}

/** The judge backend for a name. */
async function loadBackend(name: BackendName, options: LlmJudgeOptions): Promise<JudgeBackend> {
  if (name === 'heuristic') return new HeuristicJudge();
  const llm = await loadLlmJudgeModule();
  if (!llm) {
    throw new UserError(`the ${name === 'local' ? 'local-model' : 'OpenAI-compatible'} judge is not available in this build yet; use --backend heuristic`);
  }
  return llm.createJudgeBackend(name, options);
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, {
    backend: { type: 'string', default: 'heuristic' },
    model: { type: 'string' },
    endpoint: { type: 'string' },
    votes: { type: 'string' },
    hints: { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const name = values.backend as BackendName;
  if (!BACKENDS.includes(name)) throw new UsageError(`--backend must be one of ${BACKENDS.join(', ')}, got '${values.backend}'`);
  const votes = intFlag('votes', values.votes, 3, 1);
  const backend = await loadBackend(name, { model: values.model, endpoint: values.endpoint, apiKey: process.env.OPENAI_API_KEY });
  const summary = await withWorkspace(values.db ?? defaultDbPath(), (ws) =>
    ws.runJudge(backend, {
      hints: values.hints,
      votes,
      force: values.force,
      onProgress: (done, total) => {
        if (!values.json && (done === total || done % 500 === 0)) process.stderr.write(`judged ${done}/${total}\r${done === total ? '\n' : ''}`);
      },
    }),
  );
  if (values.json) printJson({ backend: name, ...summary });
  else
    process.stdout.write(
      `${name} judge: ${summary.judged} sample(s) judged${values.hints ? ' with hints' : ''}; skipped ${summary.skippedManual} manual, ` +
        `${summary.skippedHigher ?? 0} with an LLM judge's label, ${summary.skippedUnchanged ?? 0} already judged by this backend\n`,
    );
  return 0;
};
