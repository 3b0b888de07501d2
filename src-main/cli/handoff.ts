// `hindsight handoff --to trl|openclaw-rl …` (docs/design.md §Hand-off): hands the database's data
// to a GPU cluster's trainer. trl writes a folder to run there (src-main/workspace/handoff-trl.ts);
// openclaw-rl replays the recorded sessions into the cluster's server
// (src-main/openai/openclaw-handoff.ts), with a progress bar on stderr, resuming from --out.
import { OPENCLAW_METHODS, TRL_METHODS, type OpenclawMethod, type TrlMethod } from '../../src-shared/handoff.js';
import { openclawHandoff } from '../openai/openclaw-handoff.js';
import type { ReplayCounts } from '../openai/replay-client.js';
import { withWorkspace } from '../workspace/workspace.js';
import { defaultDbPath, intFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const USAGE = `usage: hindsight handoff --to trl --base-model HF_ID_OR_PATH --out DIR [--method ${TRL_METHODS.join('|')}] [--init-adapter DIR] [--gpus N]
                         [--judge-url URL] [--judge-model NAME] [--db PATH] [--json]
       hindsight handoff --to openclaw-rl --endpoint URL --out DIR [--api-key K] [--model NAME] [--concurrency N] [--pace-ms MS]
                         [--max-tokens N] [--base-model PATH] [--method ${OPENCLAW_METHODS.join('|')}] [--judge-url URL] [--db PATH] [--json]
  trl          writes the datasets, train.py, accelerate configs (1 GPU, N GPUs FSDP / ZeRO-3), requirements.txt and README.md
  openclaw-rl  replays the recorded sessions turn by turn into the OpenClaw-RL server at --endpoint (run again to resume),
               and writes openclaw.env, README.md and the openclaw export lines of what was sent`;

const OPTIONS = {
  to: { type: 'string' },
  'base-model': { type: 'string' },
  out: { type: 'string' },
  method: { type: 'string' },
  'init-adapter': { type: 'string' },
  gpus: { type: 'string' },
  'judge-url': { type: 'string' },
  'judge-model': { type: 'string' },
  endpoint: { type: 'string' },
  'api-key': { type: 'string' },
  model: { type: 'string' },
  concurrency: { type: 'string' },
  'pace-ms': { type: 'string' },
  'max-tokens': { type: 'string' },
} as const;

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`--${flag} must be one of ${allowed.join(', ')}, got '${value}'`);
  return value as T;
}

/** `[#####.....] 12/40 turns · 3/10 sessions`, redrawn in place. */
export function progressBar(c: ReplayCounts, width = 30): string {
  const filled = c.total ? Math.round((c.sent / c.total) * width) : width;
  const abandoned = c.abandoned ? ` · ${c.abandoned} abandoned` : '';
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${c.sent}/${c.total} turns · ${c.sessionsDone}/${c.sessions} sessions${abandoned}`;
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, OPTIONS);
  if (v.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (!v.out) throw new UsageError(`--out DIR is required\n${USAGE}`);
  const db = v.db ?? defaultDbPath();
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
    };
    const result = await withWorkspace(db, (ws) => ws.handoffTrl(options));
    if (v.json) printJson(result);
    else {
      for (const d of result.datasets) process.stdout.write(`${d.file}: ${d.lines} line(s)\n`);
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
          },
          { signal: controller.signal, onProgress: (c) => process.stderr.write(tty ? `\r${progressBar(c)}` : '') },
        ),
      );
      const s = run.summary;
      process.stderr.write(`${tty ? '\r' : ''}${progressBar(s)}\n`);
      for (const f of s.failures) process.stderr.write(`session ${f.sessionId}, request ${f.index}: ${f.error}\n`);
      if (v.json) printJson({ outDir: run.outDir, ...s });
      else process.stdout.write(`${s.stopped ? 'stopped; run the same command again to resume' : 'replay finished'}: ${s.sent}/${s.total} turns answered, ${s.sessionsDone}/${s.sessions} sessions done; settings in ${run.outDir}/openclaw.env\n`);
      return s.failures.length ? 1 : 0;
    } finally {
      process.off('SIGINT', stop);
    }
  }
  throw new UsageError(`--to must be trl or openclaw-rl\n${USAGE}`);
};
