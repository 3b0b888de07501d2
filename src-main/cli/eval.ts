// `hindsight eval --model DIR [--adapter DIR]… [--split heldout|all] [--metrics …] [--seed S]
// [--rollouts K] [--judge-backend local|openai …] [--json] [--out FILE] [--device cpu|cuda]`
// (docs/design.md §Evaluation): measures the base model and each adapter on the database's
// held-out samples, side by side, with bootstrap intervals; with a replay judge, also replays
// each held-out context. Progress on stderr; Ctrl+C stops and prints what was measured.
// The database's lessons (`hindsight lessons`), when set, are measured too, as "lessons": the
// base model with them as its system prompt (docs/design.md §Lessons); --lessons FILE measures
// another text, --lessons none leaves them out.
import fs from 'node:fs';
import { EVAL_METRICS, EVAL_SPLITS, describeMarginDelta, signed, type EvalMetric, type EvalReport, type EvalSplit, type ModelEval } from '../../src-shared/eval-report.js';
import type { Estimate } from '../../src-shared/eval-stats.js';
import { UserError } from '../../src-shared/types.js';
import type { TrainDevice as Device } from '../../src-shared/training.js';
import { describeReplay, isReplayMetrics, isWinTieLoss } from '../../src-shared/eval-replay.js';
import { DEFAULT_EVAL_METRICS } from '../eval/evaluate.js';
import { REPLAY_DEFAULTS, type ReplaySettings } from '../eval/replay.js';
import type { LlmJudgeSpec } from '../judge/backends.js';
import { startEvaluation } from '../eval/run-in-worker.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, intFlag, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_OPTION, deviceFlag, JUDGE_MODEL_HELP, llmJudgeFlags, modelFlag } from './model-flags.js';

export const spec = {
  name: 'eval',
  synopsis: '--model DIR [--adapter DIR]… [options]',
  about: "Measures the base model and each adapter on the database's held-out samples (sessions kept out of\n" +
    "training; see 'hindsight split'), side by side: the mean per-token log-prob of replies labelled +1 and\n" +
    '−1 and their margin, how often a repair is likelier than the original, and the hint gap (teacher −\n' +
    'student, the teacher being the base model shown the hint). Every number has a 95% bootstrap interval\n' +
    'over samples. Progress goes to stderr; Ctrl+C stops and reports what was measured.',
  options: {
    model: { type: 'string', value: 'DIR', help: "the base model (a Hugging Face checkpoint folder, a .gguf file, or a name 'hindsight models' lists)", required: true },
    adapter: { type: 'string', multiple: true, value: 'DIR', help: 'a PEFT LoRA adapter to compare with the base (a train --out folder)', otherwise: 'the base model alone' },
    split: { type: 'string', default: 'heldout', value: EVAL_SPLITS.join('|'), help: "the held-out sessions' samples, or every sample" },
    metrics: {
      type: 'string', value: 'LIST', otherwise: DEFAULT_EVAL_METRICS.join(','),
      help: `what to measure, comma-separated, from ${EVAL_METRICS.join(',')} (replay needs --judge-backend)`,
    },
    rollouts: { type: 'string', default: String(REPLAY_DEFAULTS.rollouts), value: 'K', help: 'replay: replies generated per held-out context and model (same seeds for every model)' },
    temperature: { type: 'string', default: String(REPLAY_DEFAULTS.temperature), value: 'T', help: 'replay: sampling temperature of the generated replies' },
    'max-new-tokens': { type: 'string', default: String(REPLAY_DEFAULTS.maxNewTokens), value: 'N', help: 'replay: longest generated reply, in tokens' },
    'judge-backend': { type: 'string', value: 'local|openai', help: 'the replay judge (the heuristic cannot judge a replay)', otherwise: 'none: replay is skipped' },
    'judge-model': { type: 'string', value: 'DIR|NAME', help: JUDGE_MODEL_HELP, required: 'with --judge-backend' },
    'judge-url': { type: 'string', value: 'URL', help: "the OpenAI-compatible server's base URL, up to /v1", otherwise: 'http://127.0.0.1:11434/v1 (Ollama)' },
    'judge-api-key': { type: 'string', value: 'K', help: 'bearer key for the judge server', otherwise: 'env HINDSIGHT_JUDGE_API_KEY, else none' },
    votes: { type: 'string', default: String(REPLAY_DEFAULTS.votes), value: 'N', help: 'replay judge votes per reply (majority, tie → 0)' },
    'replay-contexts': { type: 'string', value: 'N', help: 'replay only the first N held-out contexts (a bounded run with a slow judge; the report says so)', otherwise: 'every held-out context' },
    seed: { type: 'string', default: '0', value: 'S', help: 'seeds the bootstrap intervals' },
    out: { type: 'string', value: 'FILE', help: 'also write the JSON report to FILE', otherwise: 'stdout only' },
    device: DEVICE_OPTION.device, // no --precision yet: evaluation's model runs take the device's default (README, GPU)
    'batch-size': { type: 'string', default: '8', value: 'N', help: 'rows per forward pass' },
    'max-length': { type: 'string', value: 'N', help: 'tokens per row, windowed as in training (a longer reply is left out)', otherwise: "2048, or the model's maximum if smaller" },
    threads: { type: 'string', value: 'N', help: 'ONNX Runtime intra-op threads', otherwise: "ONNX Runtime's own choice" },
    lessons: {
      type: 'string', value: 'FILE|none', help: "also measure the base model told these lessons as its system prompt ('none': leave them out)",
      otherwise: "the database's lessons when it has some (hindsight lessons)",
    },
    ...DB_OPTION,
    ...jsonOption('print the report as one JSON object (split, models, comparisons)'),
  },
} as const;
const USAGE = usageLine(spec);

/** Without --metrics: likelihood and hints, plus replay and stats when a replay judge is given. */
export function parseMetrics(text: string | undefined, withJudge = false): EvalMetric[] {
  if (text === undefined) return withJudge ? [...DEFAULT_EVAL_METRICS, 'replay', 'stats'] : [...DEFAULT_EVAL_METRICS];
  const metrics = text.split(',').map((m) => m.trim()).filter(Boolean);
  const bad = metrics.find((m) => !EVAL_METRICS.includes(m as EvalMetric));
  if (bad !== undefined || metrics.length === 0) throw new UsageError(`--metrics takes ${EVAL_METRICS.join(',')}, got '${text}'`);
  return EVAL_METRICS.filter((m) => metrics.includes(m));
}

const fmt = (x: number | null, digits = 3) => (x === null ? '—' : x.toFixed(digits));
const ci = (c: [number, number] | null) => (c ? `[${c[0].toFixed(3)}, ${c[1].toFixed(3)}]` : '');
const estimate = (e: Estimate | undefined) => (e ? `${fmt(e.mean)} ${ci(e.ci)} n=${e.n}` : '—');

function modelLines(m: ModelEval): string[] {
  const lines = [`${m.name}${m.adapter ? ` (${m.adapter})` : ''}${m.lessons !== undefined ? ` (the base model told the lessons, ${m.lessons.length} characters)` : ''}`];
  if (m.likelihood) {
    const l = m.likelihood;
    lines.push(`  +1 replies  ${estimate(l.pos)}`, `  −1 replies  ${estimate(l.neg)}`);
    lines.push(`  margin      ${l.margin.mean === null ? '— (needs +1 and −1 samples)' : `${signed(l.margin.mean, 3)} ${ci(l.margin.ci)}`}`);
    if (l.repair.n > 0) lines.push(`  repair likelier than original  ${estimate(l.repair)}`);
  }
  if (m.hints) lines.push(`  hint gap    ${m.hints.n ? estimate(m.hints.gap) : '— (no hinted sample)'}`);
  if (isReplayMetrics(m.replay)) lines.push(`  replay      ${estimate(m.replay.reward)} (mean judged reward of ${m.replay.rollouts} replies per context)`);
  if (m.stats && 'replies' in m.stats) {
    const s = m.stats;
    lines.push(`  generated   ${s.replies} replies: ${fmt(s.reply_tokens.mean, 1)} tokens, refusals ${fmt(s.refusal_rate.mean, 2)}, reasoning ${fmt(s.reasoning_chars.mean, 0)} chars, valid tool calls ${s.valid_tool_call_rate.n ? fmt(s.valid_tool_call_rate.mean, 2) : '—'}`);
  }
  return lines;
}

/** The report for a person: one block per model, then each comparison in words. */
export function reportText(r: EvalReport): string {
  const head = `${r.split.name === 'heldout' ? 'held-out split' : 'all sessions'}: ${r.split.sessions} sessions, ${r.split.samples} samples (mean per-token log-prob, nats; 95% bootstrap CI)`;
  const comparisons = r.comparisons.filter((c) => c.margin_delta).map((c) => describeMarginDelta(c));
  comparisons.push(...r.comparisons.filter((c) => isWinTieLoss(c.replay)).map((c) => describeReplay(c)!));
  const gaps = r.comparisons.filter((c) => c.gap_delta?.mean != null).map((c) => `${c.a} vs ${c.b}: hint gap ${signed(c.gap_delta!.mean!, 3)} ${ci(c.gap_delta!.ci)} (below 0: hints absorbed)`);
  return [head, '', ...r.models.flatMap(modelLines), ...(comparisons.length + gaps.length ? ['', ...comparisons, ...gaps] : []), ...r.notes.map((n) => `note: ${n}`), ''].join('\n');
}


/** The replay judge from the flags; null without --judge-backend. */
export function judgeFlags(v: Record<string, string | boolean | string[] | undefined>, device: Device): LlmJudgeSpec | null {
  const str = (k: string) => v[k] as string | undefined;
  const backend = str('judge-backend');
  if (backend === undefined) {
    for (const k of ['judge-model', 'judge-url', 'judge-api-key']) if (str(k) !== undefined) throw new UsageError(`--${k} needs --judge-backend local|openai`);
    return null;
  }
  if (backend !== 'local' && backend !== 'openai') throw new UsageError(`--judge-backend must be local or openai (the heuristic cannot judge a replay), got '${backend}'`);
  return llmJudgeFlags(backend, v, device);
}

function replayFlags(v: Record<string, string | boolean | string[] | undefined>, judge: LlmJudgeSpec | null): ReplaySettings {
  const str = (k: string) => v[k] as string | undefined;
  const temperature = Number(str('temperature'));
  if (!Number.isFinite(temperature) || temperature < 0) throw new UsageError(`--temperature must be a number ≥ 0, got '${str('temperature')}'`);
  return {
    rollouts: intFlag('rollouts', str('rollouts'), REPLAY_DEFAULTS.rollouts, 1),
    votes: intFlag('votes', str('votes'), REPLAY_DEFAULTS.votes, 1),
    maxNewTokens: intFlag('max-new-tokens', str('max-new-tokens'), REPLAY_DEFAULTS.maxNewTokens, 1),
    temperature, judge,
    ...(str('replay-contexts') === undefined ? {} : { contexts: intFlag('replay-contexts', str('replay-contexts'), 0, 1) }),
  };
}

/** The samples to measure, the split's size and the database's lessons, from the database. */
async function readSplit(db: string, split: EvalSplit) {
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first`);
  return withWorkspace(db, (ws) => {
    const view = ws.split();
    const samples = ws.evaluationSamples(split);
    const sessions = split === 'all' ? view.sessions : view.heldOut.sessions;
    return { samples, counts: { name: split, sessions, samples: samples.length }, lessons: ws.lessons()?.text ?? '' };
  }, { access: 'read' });
}

/** The lessons to measure: --lessons FILE's text, none, or the database's. */
function lessonsFlag(value: string | undefined, stored: string): string {
  if (value === undefined) return stored;
  if (value === 'none') return '';
  try {
    return fs.readFileSync(value, 'utf8').trim();
  } catch (err) {
    throw new UserError(`--lessons ${value}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  if (!v.model) throw new UsageError(`--model is required\n${USAGE}`);
  const modelDir = modelFlag(v.model, '--model', v.db);
  if (!EVAL_SPLITS.includes(v.split as EvalSplit)) throw new UsageError(`--split must be heldout or all, got '${v.split}'`);
  const device = deviceFlag(v.device);
  const judge = judgeFlags(v, device);
  const metrics = parseMetrics(v.metrics, judge !== null);
  const replay = replayFlags(v, judge);
  const seed = intFlag('seed', v.seed, 0, 0);
  const { samples, counts, lessons: stored } = await readSplit(v.db ?? defaultDbPath(), v.split as EvalSplit);
  const lessons = lessonsFlag(v.lessons, stored);
  if (counts.samples === 0 && v.split === 'heldout') {
    process.stderr.write("no held-out samples: a database needs two sessions with samples before one is held out ('hindsight split --hold-out ID' holds one out by hand)\n");
  }
  const controller = new AbortController();
  const onSignal = () => {
    process.stderr.write('stopping: the report keeps what was measured…\n');
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  let report: EvalReport;
  try {
    report = await startEvaluation(
      {
        modelDir, adapters: v.adapter ?? [], samples, split: counts, metrics, seed, device, replay, lessons,
        batchSize: intFlag('batch-size', v['batch-size'], 8, 1),
        maxLength: v['max-length'] === undefined ? undefined : intFlag('max-length', v['max-length'], 0, 2),
        threads: v.threads === undefined ? undefined : intFlag('threads', v.threads, 0, 1),
      },
      { signal: controller.signal, onProgress: (p) => process.stderr.write(`${p.message}\n`) },
    );
  } finally {
    process.off('SIGINT', onSignal);
  }
  // Owner-only: the report holds chat contexts and, with replay, the replies to them.
  if (v.out) writeFileAtomicSync(v.out, Buffer.from(JSON.stringify(report, null, 2) + '\n', 'utf8'), PRIVATE_FILE_MODE);
  if (v.json) printJson(report);
  else process.stdout.write(reportText(report));
  return report.cancelled ? 1 : 0;
};
