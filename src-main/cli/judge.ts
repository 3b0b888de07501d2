// `hindsight judge --backend heuristic|local|openai …`: runs a judge over the samples
// through the one judge runner (src-main/judge/runner.ts): incremental (only unlabelled or
// stale labels; --force re-judges all but manual ones), resumable after a kill, cancellable
// with Ctrl+C (what was judged is kept), with a progress bar on stderr when it is a TTY.
import path from 'node:path';
import { withWorkspace } from '../workspace/workspace.js';
import { DEFAULT_JUDGE_URL, openJudgeBackend, type JudgeBackendSpec } from '../judge/backends.js';
import { runJudge, type JudgeProgress } from '../judge/runner.js';
import { DEFAULT_TIMEOUT_MS } from '../judge/openai-client.js';
import { DEFAULT_JUDGE_MAX_TOKENS } from '../judge/llm-judge.js';
import { DEFAULT_COMPOSITE_THRESHOLDS, thresholdProblem, type CompositeThresholds } from '../../src-shared/composite.js';
import { QUANTIZE_CHOICES } from '../model/quantize.js';
import { deviceFlag, loadQuantizeFlag, modelFlag } from './model-flags.js';
import { TRAIN_DEVICES } from '../../src-shared/training.js';
import { judgeRunNotes, rewardCountsText } from '../../src-shared/judge-notes.js';
import { DB_OPTION, defaultDbPath, intFlag, jsonOption, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const BACKENDS = ['heuristic', 'local', 'openai'] as const;
type BackendName = (typeof BACKENDS)[number];
const LOCAL = '--backend local';
const OPENAI = '--backend openai (any OpenAI-compatible server: Ollama, llama.cpp, vLLM, hindsight serve)';

export const spec = {
  name: 'judge',
  synopsis: '[--backend heuristic|local|openai] [options]',
  about: 'Labels the samples +1/−1/0 from the reaction each reply got, and with --hints extracts hints.\n' +
    'Incremental: only unlabelled or stale samples are judged; manual labels are never touched.\n' +
    'Ctrl+C cancels and keeps what was judged.',
  options: {
    backend: { type: 'string', default: 'heuristic', value: BACKENDS.join('|'), help: 'which judge' },
    hints: { type: 'boolean', default: false, help: 'also extract hindsight hints (for OPD)' },
    votes: { type: 'string', value: 'N', help: 'votes per sample for LLM judges (majority, tie → 0)', otherwise: '3' },
    force: { type: 'boolean', default: false, help: 're-judge samples already judged by this backend, model and prompt' },
    concurrency: { type: 'string', value: 'N', help: 'samples judged at once', otherwise: '1 local, 4 openai' },
    'max-tokens': { type: 'string', value: 'N', help: 'token limit of each judge answer', otherwise: String(DEFAULT_JUDGE_MAX_TOKENS) },
    composite: { type: 'boolean', default: false, help: 'LLM judges: score 0–100 on correctness, instruction, tone and length, with reasons' },
    'composite-pos': { type: 'string', value: 'N', help: 'with --composite: a score ≥ N is +1', otherwise: String(DEFAULT_COMPOSITE_THRESHOLDS.pos) },
    'composite-neg': { type: 'string', value: 'N', help: 'with --composite: a score ≤ N is −1', otherwise: String(DEFAULT_COMPOSITE_THRESHOLDS.neg) },
    model: { type: 'string', value: 'DIR', help: "the model that judges: a Hugging Face checkpoint folder, a .gguf file, or a name 'hindsight models' lists", group: LOCAL, required: 'with --backend local' },
    device: { type: 'string', value: TRAIN_DEVICES.join('|'), help: 'where it runs', group: LOCAL, otherwise: 'cpu' },
    quantize: { type: 'string', value: ['auto', ...QUANTIZE_CHOICES].join('|'), help: 'weight-only quantised linear layers (faster votes, less exact)', group: LOCAL, otherwise: 'auto: fp32 where it fits the memory available, else int8, else int4' },
    endpoint: { type: 'string', value: 'URL', help: "base URL up to /v1; the default is Ollama's", group: OPENAI, otherwise: DEFAULT_JUDGE_URL },
    'judge-model': { type: 'string', value: 'NAME', help: 'the model name the server knows, e.g. qwen2.5:7b-instruct', group: OPENAI, required: 'with --backend openai' },
    'api-key': { type: 'string', value: 'K', help: 'bearer key', group: OPENAI, otherwise: 'env HINDSIGHT_JUDGE_API_KEY, else none' },
    'timeout-ms': { type: 'string', value: 'N', help: 'per-request limit in milliseconds', group: OPENAI, otherwise: String(DEFAULT_TIMEOUT_MS) },
    'judge-context': { type: 'string', value: 'N', help: "the model's context in tokens: longer samples are fitted or skipped", group: OPENAI, otherwise: 'learnt from the first context-length error' },
    ...DB_OPTION,
    ...jsonOption('print the run summary as one JSON object'),
  },
} as const;

/** --composite with its thresholds, or undefined without it (docs/design.md §Composite score). */
function compositeThresholds(name: BackendName, values: Record<string, string | boolean | undefined>): CompositeThresholds | undefined {
  const str = (k: string) => values[k] as string | undefined;
  if (!values.composite) {
    if (str('composite-pos') !== undefined || str('composite-neg') !== undefined) throw new UsageError('--composite-pos and --composite-neg need --composite');
    return undefined;
  }
  if (name === 'heuristic') throw new UsageError('--composite needs an LLM judge: --backend local or --backend openai');
  const t = {
    pos: intFlag('composite-pos', str('composite-pos'), DEFAULT_COMPOSITE_THRESHOLDS.pos),
    neg: intFlag('composite-neg', str('composite-neg'), DEFAULT_COMPOSITE_THRESHOLDS.neg),
  };
  const problem = thresholdProblem(t);
  if (problem) throw new UsageError(problem);
  return t;
}

function backendSpec(name: BackendName, values: Record<string, string | boolean | undefined>): JudgeBackendSpec {
  const str = (k: string) => values[k] as string | undefined;
  const maxTokens = str('max-tokens') === undefined ? undefined : intFlag('max-tokens', str('max-tokens'), DEFAULT_JUDGE_MAX_TOKENS, 1);
  const composite = compositeThresholds(name, values);
  if (name === 'heuristic') return { backend: 'heuristic' };
  if (name === 'local') {
    const model = str('model');
    if (!model) throw new UsageError('--backend local needs --model DIR (the model folder that judges)');
    const device = deviceFlag(str('device'));
    return { backend: 'local', modelDir: path.resolve(modelFlag(model, '--model', str('db'))), device, maxTokens, composite, quantize: loadQuantizeFlag(str('quantize')) };
  }
  const judgeModel = str('judge-model');
  if (!judgeModel) throw new UsageError('--backend openai needs --judge-model NAME (the model name the server serves)');
  return {
    backend: 'openai',
    baseUrl: str('endpoint') ?? DEFAULT_JUDGE_URL,
    model: judgeModel,
    apiKey: str('api-key') ?? process.env.HINDSIGHT_JUDGE_API_KEY,
    timeoutMs: intFlag('timeout-ms', str('timeout-ms'), DEFAULT_TIMEOUT_MS, 1),
    contextTokens: str('judge-context') === undefined ? undefined : intFlag('judge-context', str('judge-context'), 0, 16),
    concurrency: intFlag('concurrency', str('concurrency'), 4, 1),
    maxTokens,
    composite,
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
  const { values } = parseCommandArgs(argv, spec);
  const name = values.backend as BackendName;
  if (!BACKENDS.includes(name)) throw new UsageError(`--backend must be one of ${BACKENDS.join(', ')}, got '${values.backend}'`);
  const votes = intFlag('votes', values.votes, 3, 1);
  const backend = backendSpec(name, values);
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
  const opened = await openJudgeBackend(backend);
  // Said before a run that may be long, and again in its summary line (judgeRunNotes).
  if (opened.judge.weightsNote) process.stderr.write(`note: the judge's ${opened.judge.weightsNote}\n`);
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
        `${name} judge${model}: ${summary.judged} sample${summary.judged === 1 ? '' : 's'} judged${values.hints ? ' with hints' : ''}${summary.judged ? ` (${rewardCountsText(summary.rewards)})` : ''}${summary.cancelled ? ' before cancelling' : ''}; ` +
          `skipped ${summary.skippedManual} manual, ${summary.skippedHigher} with an LLM judge's label, ${summary.skippedUnchanged} already judged` +
          (summary.judged ? `; ${(summary.msPerSample / 1000).toFixed(2)} s per sample` : '') +
          judgeRunNotes(summary).map((note) => `; ${note}`).join('') +
          '\n',
      );
    }
    return summary.cancelled ? 130 : 0;
  } finally {
    process.off('SIGINT', onSigint);
    await opened.close();
  }
};
