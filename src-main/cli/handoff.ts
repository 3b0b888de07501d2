// `hindsight handoff --to trl|openclaw-rl …` (docs/design.md §Hand-off): hands the database's data
// to a GPU cluster's trainer. trl writes a folder to run there (src-main/workspace/handoff-trl.ts);
// openclaw-rl replays the recorded sessions into the cluster's server
// (src-main/openai/openclaw-handoff.ts), with a progress bar on stderr, resuming from --out.
import { OPENCLAW_METHODS, TRL_METHODS, type HeldOutHandoff, type OpenclawMethod, type TrlMethod } from '../../src-shared/handoff.js';
import { openclawHandoff } from '../openai/openclaw-handoff.js';
import type { ReplayCounts } from '../openai/replay-client.js';
import { withWorkspace } from '../workspace/workspace.js';
import { LOSS_AGGS, TRAIN_DEFAULTS, type LossAgg } from '../../src-shared/training.js';
import { boundFlag, DB_OPTION, defaultDbPath, intFlag, jsonOption, parseCommandArgs, printJson, ranged, usageLine, UsageError, type Command } from './args.js';

export const spec = {
  name: 'handoff',
  synopsis: '--to trl|openclaw-rl --out DIR [options]',
  about: "Hands the database's data to a GPU cluster's trainer. For TRL it writes the datasets, train.py,\n" +
    'accelerate configs (1 GPU, N GPUs with FSDP or ZeRO-3), requirements.txt and README.md. For OpenClaw-RL\n' +
    'it replays the recorded sessions turn by turn into the server at --endpoint (run it again to resume),\n' +
    'and writes openclaw.env, README.md and the openclaw export lines of what was sent.\n' +
    'Held-out sessions (see `hindsight split`) are never trained on: TRL gets them in heldout/ instead of\n' +
    'data/, for evaluation, and OpenClaw-RL does not get them; stderr says how many were left out.',
  options: {
    to: { type: 'string', value: 'trl|openclaw-rl', help: 'the trainer to hand the data to', required: true },
    out: { type: 'string', value: 'DIR', help: 'the folder that receives the hand-off', required: true },
    'base-model': { type: 'string', value: 'HF_ID_OR_PATH', help: 'the base model the cluster trains', required: 'with --to trl' },
    method: {
      type: 'string', value: `${TRL_METHODS.join('|')} (trl), ${OPENCLAW_METHODS.join('|')} (openclaw-rl)`, help: 'the training method',
      otherwise: 'kto for trl, combine for openclaw-rl',
    },
    'init-adapter': { type: 'string', value: 'DIR', help: 'trl: start from this local adapter', otherwise: 'a new adapter' },
    gpus: { type: 'string', value: 'N', help: 'trl: GPUs for the multi-GPU accelerate configs', otherwise: '8' },
    'judge-url': { type: 'string', value: 'URL', help: 'an OpenAI-compatible judge endpoint (trl grpo reward, openclaw-rl PRM)', otherwise: 'none' },
    'judge-model': { type: 'string', value: 'NAME', help: "trl grpo: the judge endpoint's model name", otherwise: "the endpoint's default" },
    endpoint: { type: 'string', value: 'URL', help: "openclaw-rl: the server's OpenAI-compatible base URL", required: 'with --to openclaw-rl' },
    'api-key': { type: 'string', value: 'K', help: "openclaw-rl: the server's API key", otherwise: 'none' },
    model: { type: 'string', value: 'NAME', help: 'openclaw-rl: the model name sent with each request', otherwise: "the server's default" },
    concurrency: { type: 'string', value: 'N', help: 'openclaw-rl: sessions replayed at once', otherwise: '4' },
    'pace-ms': { type: 'string', value: 'MS', help: 'openclaw-rl: pause between requests of one session', otherwise: '0' },
    'max-tokens': { type: 'string', value: 'N', help: "openclaw-rl: max_tokens of each request", otherwise: "the server's default" },
    'include-heldout': { type: 'boolean', default: false, help: 'train on the held-out sessions too: trl puts them in data/ (no heldout/), openclaw-rl replays them' },
    'loss-agg': {
      type: 'string', value: LOSS_AGGS.join('|'), otherwise: TRAIN_DEFAULTS.lossAgg,
      help: "the loss aggregation, as `train --loss-agg`: trl grpo's loss_type, openclaw-rl's slime flags",
    },
    'opd-topk': { type: 'string', value: 'K', help: ranged('opdTopK', 'top-K distillation, as `train --opd-topk`: trl sdft, openclaw-rl opd'), otherwise: '0: off' },
    ...DB_OPTION,
    ...jsonOption('print the result as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`--${flag} must be one of ${allowed.join(', ')}, got '${value}'`);
  return value as T;
}

/** One line on stderr saying what became of the held-out sessions. */
export function heldOutNote(h: HeldOutHandoff, to: 'trl' | 'openclaw-rl'): string {
  const what = `${h.sessions} held-out session${h.sessions === 1 ? '' : 's'} (${h.samples} sample${h.samples === 1 ? '' : 's'})`;
  if (h.included) return `included ${what} in the training data (--include-heldout)\n`;
  const where = to === 'trl' ? 'out of data/; they are in heldout/ for evaluation' : 'out of the replay';
  return `left ${what} ${where}; --include-heldout trains on them\n`;
}

/** `[#####.....] 12/40 turns · 3/10 sessions`, redrawn in place. */
export function progressBar(c: ReplayCounts, width = 30): string {
  const filled = c.total ? Math.round((c.sent / c.total) * width) : width;
  const abandoned = c.abandoned ? ` · ${c.abandoned} abandoned` : '';
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${c.sent}/${c.total} turns · ${c.sessionsDone}/${c.sessions} sessions${abandoned}`;
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  if (!v.out) throw new UsageError(`--out DIR is required\n${USAGE}`);
  const db = v.db ?? defaultDbPath();
  const loss = {
    ...(v['loss-agg'] !== undefined ? { lossAgg: oneOf<LossAgg>('loss-agg', v['loss-agg'], LOSS_AGGS, TRAIN_DEFAULTS.lossAgg) } : {}),
    ...(v['opd-topk'] !== undefined ? { opdTopK: boundFlag('opdTopK', v['opd-topk']) } : {}),
  };
  if (v.to === 'trl') {
    if (!v['base-model']) throw new UsageError(`--base-model is required with --to trl\n${USAGE}`);
    const options = {
      baseModel: v['base-model'],
      outDir: v.out,
      method: oneOf<TrlMethod>('method', v.method, TRL_METHODS, 'kto'),
      gpus: intFlag('gpus', v.gpus, 8, 1),
      ...(v['init-adapter'] ? { initAdapter: v['init-adapter'] } : {}),
      ...(v['judge-url'] ? { judgeUrl: v['judge-url'] } : {}),
      ...(v['judge-model'] ? { judgeModel: v['judge-model'] } : {}),
      includeHeldOut: v['include-heldout'] === true,
      ...loss,
    };
    const result = await withWorkspace(db, (ws) => ws.handoffTrl(options));
    process.stderr.write(heldOutNote(result.heldOut, 'trl'));
    if (v.json) printJson(result);
    else {
      for (const d of result.datasets) process.stdout.write(`${d.file}: ${d.lines} line${d.lines === 1 ? '' : 's'}\n`);
      process.stdout.write(`wrote the ${result.method} hand-off to ${result.outDir}; see its README.md\n`);
    }
    return 0;
  }
  if (v.to === 'openclaw-rl') {
    if (!v.endpoint) throw new UsageError(`--endpoint URL is required with --to openclaw-rl\n${USAGE}`);
    const controller = new AbortController();
    const stop = () => controller.abort(); // Ctrl-C: no new turns; those in flight finish and are recorded
    process.once('SIGINT', stop);
    const tty = process.stderr.isTTY;
    try {
      const run = await withWorkspace(db, (ws) =>
        openclawHandoff(
          ws,
          {
            endpoint: v.endpoint!,
            outDir: v.out!,
            method: oneOf<OpenclawMethod>('method', v.method, OPENCLAW_METHODS, 'combine'),
            concurrency: intFlag('concurrency', v.concurrency, 4, 1),
            paceMs: intFlag('pace-ms', v['pace-ms'], 0, 0),
            ...(v['api-key'] ? { apiKey: v['api-key'] } : {}),
            ...(v.model ? { model: v.model } : {}),
            ...(v['max-tokens'] ? { maxTokens: intFlag('max-tokens', v['max-tokens'], 0, 1) } : {}),
            ...(v['base-model'] ? { baseModel: v['base-model'] } : {}),
            ...(v['judge-url'] ? { judgeUrl: v['judge-url'] } : {}),
            includeHeldOut: v['include-heldout'] === true,
            ...loss,
          },
          {
            signal: controller.signal,
            onPlanned: (heldOut) => process.stderr.write(heldOutNote(heldOut, 'openclaw-rl')),
            onProgress: (c) => process.stderr.write(tty ? `\r${progressBar(c)}` : ''),
          },
        ),
      );
      const s = run.summary;
      process.stderr.write(`${tty ? '\r' : ''}${progressBar(s)}\n`);
      for (const f of s.failures) process.stderr.write(`session ${f.sessionId}, request ${f.index}: ${f.error}\n`);
      if (v.json) printJson({ outDir: run.outDir, ...s, heldOut: run.heldOut });
      else process.stdout.write(`${s.stopped ? 'stopped; run the same command again to resume' : 'replay finished'}: ${s.sent}/${s.total} turns answered, ${s.sessionsDone}/${s.sessions} sessions done; settings in ${run.outDir}/openclaw.env\n`);
      return s.failures.length ? 1 : 0;
    } finally {
      process.off('SIGINT', stop);
    }
  }
  throw new UsageError(`--to must be trl or openclaw-rl\n${USAGE}`);
};
