// `hindsight judge --backend heuristic|local|openai …`: runs a judge over the samples
// through the one judge runner (src-main/judge/runner.ts): incremental (only unlabelled or
// stale labels; --force re-judges all but manual ones), resumable after a kill, cancellable
// with Ctrl+C (what was judged is kept), with a progress bar on stderr when it is a TTY.
import path from 'node:path';
import { withWorkspace } from '../workspace/workspace.js';
import { openJudgeBackend, type JudgeBackendSpec } from '../judge/backends.js';
import { runJudge, type JudgeProgress } from '../judge/runner.js';
import { DEFAULT_TIMEOUT_MS } from '../judge/openai-client.js';
import { defaultDbPath, intFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const BACKENDS = ['heuristic', 'local', 'openai'] as const;
type BackendName = (typeof BACKENDS)[number];

const USAGE = `usage: hindsight judge --backend heuristic|local|openai [options] [--db PATH] [--json]
  --hints              also ask for hindsight hints (OPD)
  --votes N            votes per sample for LLM judges (default 3; majority, tie → 0)
  --force              re-judge samples already judged by this backend, model and prompt
  --concurrency N      samples judged at once (default 1 local, 4 openai)
  --max-tokens N       token limit of each judge answer (default 512)
 local:
  --model DIR          the model folder (Hugging Face checkpoint) that judges
  --device cpu|cuda    where it runs (default cpu)
 openai (any OpenAI-compatible server: Ollama, llama.cpp, vLLM, hindsight serve):
  --endpoint URL       base URL up to /v1 (default http://127.0.0.1:11434/v1, Ollama)
  --judge-model NAME   the model name the server knows, e.g. qwen2.5:7b-instruct
  --api-key K          bearer key (or env HINDSIGHT_JUDGE_API_KEY)
  --timeout-ms N       per-request limit (default ${DEFAULT_TIMEOUT_MS})`;

function backendSpec(name: BackendName, values: Record<string, string | boolean | undefined>): JudgeBackendSpec {
  const str = (k: string) => values[k] as string | undefined;
  const maxTokens = str('max-tokens') === undefined ? undefined : intFlag('max-tokens', str('max-tokens'), 512, 1);
  if (name === 'heuristic') return { backend: 'heuristic' };
  if (name === 'local') {
    const model = str('model');
    if (!model) throw new UsageError('--backend local needs --model DIR (the model folder that judges)');
    const device = str('device') ?? 'cpu';
    if (device !== 'cpu' && device !== 'cuda') throw new UsageError(`--device must be cpu or cuda, got '${device}'`);
    return { backend: 'local', modelDir: path.resolve(model), device, maxTokens };
  }
  const judgeModel = str('judge-model');
  if (!judgeModel) throw new UsageError('--backend openai needs --judge-model NAME (the model name the server serves)');
  return {
    backend: 'openai',
    baseUrl: str('endpoint') ?? 'http://127.0.0.1:11434/v1',
    model: judgeModel,
    apiKey: str('api-key') ?? process.env.HINDSIGHT_JUDGE_API_KEY,
    timeoutMs: intFlag('timeout-ms', str('timeout-ms'), DEFAULT_TIMEOUT_MS, 1),
    concurrency: intFlag('concurrency', str('concurrency'), 4, 1),
    maxTokens,
  };
}

/** A one-line bar redrawn in place; only on a TTY. */
function progressBar(p: JudgeProgress): string {
  const width = 24;
  const filled = p.total ? Math.round((p.done / p.total) * width) : width;
  const rate = p.judged ? p.elapsedMs / p.judged : 0;
  const left = p.total - p.done;
  const eta = rate && left ? ` · ETA ${Math.ceil((rate * left) / 1000)} s` : '';
  return `\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${p.done}/${p.total} · ${p.judged} judged${rate ? ` · ${(rate / 1000).toFixed(2)} s/sample` : ''}${eta}\x1b[K`;
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, {
    backend: { type: 'string', default: 'heuristic' },
    model: { type: 'string' },
    endpoint: { type: 'string' },
    'api-key': { type: 'string' },
    'judge-model': { type: 'string' },
    votes: { type: 'string' },
    hints: { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
    device: { type: 'string' },
    concurrency: { type: 'string' },
    'timeout-ms': { type: 'string' },
    'max-tokens': { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const name = values.backend as BackendName;
  if (!BACKENDS.includes(name)) throw new UsageError(`--backend must be one of ${BACKENDS.join(', ')}, got '${values.backend}'`);
  const votes = intFlag('votes', values.votes, 3, 1);
  const spec = backendSpec(name, values);
  const concurrency = intFlag('concurrency', values.concurrency, name === 'openai' ? 4 : 1, 1);

  const tty = process.stderr.isTTY && !values.json;
  const abort = new AbortController();
  const onSigint = () => {
    if (abort.signal.aborted) process.exit(130); // a second Ctrl+C: stop now
    process.stderr.write('\nhindsight judge: cancelling (Ctrl+C again to quit at once); judged samples are kept\n');
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  let lastLine = -1;
  const opened = await openJudgeBackend(spec);
  try {
    const summary = await withWorkspace(values.db ?? defaultDbPath(), (ws) =>
      runJudge(ws, opened.judge, {
        hints: values.hints,
        votes,
        force: values.force,
        concurrency,
        signal: abort.signal,
        onProgress: (p) => {
          if (tty) process.stderr.write(progressBar(p) + (p.done === p.total ? '\n' : ''));
          else if (!values.json && p.total > 0 && p.judged > 0) {
            const tenth = Math.floor((p.done / p.total) * 10);
            if (tenth !== lastLine) process.stderr.write(`judged ${p.done}/${p.total}\n`);
            lastLine = tenth;
          }
        },
      }),
    );
    if (values.json) printJson(summary);
    else {
      const model = summary.model ? ` (${summary.model})` : '';
      process.stdout.write(
        `${name} judge${model}: ${summary.judged} sample(s) judged${values.hints ? ' with hints' : ''}${summary.cancelled ? ' before cancelling' : ''}; ` +
          `skipped ${summary.skippedManual} manual, ${summary.skippedHigher} with an LLM judge's label, ${summary.skippedUnchanged} already judged` +
          (summary.judged ? `; ${(summary.msPerSample / 1000).toFixed(2)} s per sample` : '') +
          '\n',
      );
    }
    return summary.cancelled ? 130 : 0;
  } finally {
    process.off('SIGINT', onSigint);
    await opened.close();
  }
};
