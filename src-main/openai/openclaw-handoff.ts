// `hindsight handoff --to openclaw-rl` (docs/design.md §Hand-off). OpenClaw-RL learns online from
// the sessions passing through its OpenAI-compatible server, so the hand-off is a replay
// (./replay-client.ts) plus, in --out:
//
//   openclaw.env          the cluster side's launch settings: model path, LoRA, method
//                         (rl | opd | combine), the judge/PRM endpoint, the served endpoint
//   README.md             what runs where, the commands, what comes back
//   sent.openclaw.jsonl   the `openclaw` export lines: the record of what was replayed
//
// Held-out sessions are skipped (the server trains on whatever it is sent), unless
// `includeHeldOut`; either way the run says how many (docs/design.md §Hand-off).
//   progress.jsonl        the replay's progress (resume reads it)
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { LOSS_AGGS, TRAIN_DEFAULTS, type LossAgg } from '../../src-shared/training.js';
import type { HeldOutHandoff, ReplayOptions } from '../../src-shared/handoff.js';
import { writeFileAtomicSync } from '../store/atomic-file.js';
import { PEFT_MODULE_NAMES } from '../train/lora.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { runReplay, type ReplayCounts, type ReplaySummary } from './replay-client.js';

export const PROGRESS_FILE = 'progress.jsonl';

/** KEY=VALUE lines of an earlier run's env file, so a resume without the flags keeps them. */
function previousEnv(file: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!fs.existsSync(file)) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m && m[2]) out.set(m[1]!, m[2]);
  }
  return out;
}

/** The slime flags for Hindsight's loss settings: --calculate-per-token-loss for token-mean, the top-K custom loss for K > 0. */
export function slimeLossArgs(lossAgg: LossAgg, topK: number): string {
  const args = lossAgg === 'token-mean' ? ['--calculate-per-token-loss'] : [];
  if (topK > 0) {
    args.push('--loss-type custom_loss', '--custom-loss-function-path topk_distillation_loss.topk_distillation_loss_function', `--distill-topk ${topK}`, '--disable-compute-advantages-and-returns');
  }
  return args.join(' ');
}

function envFile(o: ReplayOptions, counts: { sessions: number; requests: number }, previous: Map<string, string>): string {
  const r = o.loraR ?? TRAIN_DEFAULTS.loraR;
  // Not given this time: the earlier run's, else the default (as for the other settings below).
  const earlierAgg = LOSS_AGGS.find((a) => a === previous.get('LOSS_AGG'));
  const earlierTopK = Number(previous.get('DISTILL_TOPK') ?? 0);
  const lossAgg = o.lossAgg ?? earlierAgg ?? TRAIN_DEFAULTS.lossAgg;
  const topK = o.opdTopK ?? (Number.isInteger(earlierTopK) && earlierTopK >= 0 ? earlierTopK : 0);
  const lines = [
    '# OpenClaw-RL launch settings, written by `hindsight handoff --to openclaw-rl`.',
    '# Map them onto the variables of the launch script you run (see README.md).',
    `MODEL_PATH=${o.baseModel ?? ''}`,
    'USE_LORA=1',
    `LORA_RANK=${r}`,
    `LORA_ALPHA=${o.loraR ? 2 * o.loraR : TRAIN_DEFAULTS.loraAlpha}`,
    '# A Phi-3 base names its fused modules instead: qkv_proj,o_proj,gate_up_proj,down_proj.',
    `LORA_TARGET_MODULES=${TRAIN_DEFAULTS.targets.map((t) => PEFT_MODULE_NAMES[t]).join(',')}`,
    `# rl: binary reward from the judge; opd: on-policy distillation from hints; combine: both`,
    `TRAIN_METHOD=${o.method}`,
    "# Hindsight's --loss-agg: sample-mean is slime's default (each sample's mean, ÷ the global batch size);",
    '# token-mean is slime with --calculate-per-token-loss. SLIME_LOSS_ARGS holds the flags to add to the launch script.',
    `LOSS_AGG=${lossAgg}`,
    "# Hindsight's --opd-topk: opd's top-K distillation (openclaw-opd/run_qwen3_4b_openclaw_opd_topk.sh), 0 off.",
    "# OpenClaw-RL's combine loss distils the sampled token only: top-K runs with TRAIN_METHOD=opd.",
    `DISTILL_TOPK=${topK}`,
    `SLIME_LOSS_ARGS="${slimeLossArgs(lossAgg, topK)}"`,
    `PRM_URL=${o.judgeUrl ?? ''}`,
    `SERVE_URL=${o.endpoint}`,
    `REPLAY_SESSIONS=${counts.sessions}`,
    `REPLAY_REQUESTS=${counts.requests}`,
  ].map((line) => {
    const m = /^([A-Z_]+)=$/.exec(line); // a setting not given this time keeps its earlier value
    return m && previous.has(m[1]!) ? `${m[1]}=${previous.get(m[1]!)}` : line;
  });
  return lines.join('\n') + '\n';
}

function readme(o: ReplayOptions): string {
  return `# Hindsight hand-off: OpenClaw-RL

OpenClaw-RL trains online on the sessions that pass through its OpenAI-compatible server. Hindsight hands over its
recorded sessions by replaying them into that server, turn by turn.

## What runs where

- **Cluster**: OpenClaw-RL (slime: Ray + Megatron) with its API server. Start it with the settings in \`openclaw.env\`
  (model \`MODEL_PATH\`, LoRA rank and alpha, \`TRAIN_METHOD\` rl | opd | combine, the judge/PRM at \`PRM_URL\`, and
  \`SLIME_LOSS_ARGS\`, the slime flags for Hindsight's loss aggregation \`LOSS_AGG\` and top-K distillation \`DISTILL_TOPK\`).
- **This machine**: \`hindsight handoff --to openclaw-rl --endpoint ${o.endpoint} --out ${o.outDir}${o.includeHeldOut ? ' --include-heldout' : ''}\` sends every recorded
  user or tool message with \`X-Session-Id\`, \`X-Turn-Type\` (main or side, Hindsight's classification) and
  \`X-Session-Done\` on a session's last turn. The server writes its own replies; the user's real follow-ups arrive as
  their next states.

Run the same command again to resume: \`progress.jsonl\` says what was answered, and no turn is sent twice (a session
whose turn was in flight when the replay was killed is left as it is and counted abandoned).
\`sent.openclaw.jsonl\` holds the \`openclaw\` export lines of the sessions replayed, the record of what was sent.

${o.includeHeldOut
    ? 'The held-out sessions, which Hindsight keeps apart to measure whether a fine-tune helped, are replayed too (`--include-heldout`).'
    : 'Held-out sessions, which Hindsight keeps apart to measure whether a fine-tune helped, are not replayed: the server trains on\nwhat it is sent. `--include-heldout` replays them too.'}

## What comes back

The trained LoRA adapter, saved in PEFT's layout (\`adapter_config.json\` + \`adapter_model.safetensors\`). Copy the folder
back and use it with \`hindsight score|generate|serve --adapter DIR\` or \`hindsight train --init-adapter DIR\`.
`;
}

export interface OpenclawHandoffRun {
  outDir: string;
  summary: ReplaySummary;
  heldOut: HeldOutHandoff;
}

export interface OpenclawHandoffHooks {
  onProgress?: (c: ReplayCounts) => void;
  /** Once the plan is made, before the first request: the held-out sessions skipped or included. */
  onPlanned?: (heldOut: HeldOutHandoff) => void;
  signal?: AbortSignal;
}

/** Writes the launch settings and the record, then replays (resuming from --out's progress file). */
export async function openclawHandoff(ws: WorkspaceApi, options: ReplayOptions, hooks: OpenclawHandoffHooks = {}): Promise<OpenclawHandoffRun> {
  let endpoint: URL;
  try {
    endpoint = new URL(options.endpoint);
  } catch {
    throw new UserError(`--endpoint must be a URL such as http://cluster:30000/v1, got '${options.endpoint}'`);
  }
  if (endpoint.protocol !== 'http:' && endpoint.protocol !== 'https:') throw new UserError(`--endpoint must be http or https, got '${options.endpoint}'`);
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new UserError(`--concurrency must be a whole number ≥ 1`);
  const outDir = path.resolve(options.outDir);
  fs.mkdirSync(outDir, { recursive: true });
  const includeHeldOut = options.includeHeldOut === true;
  const { sessions: plan, heldOut } = ws.replayPlan({ includeHeldOut });
  hooks.onPlanned?.(heldOut);
  const requests = plan.reduce((n, s) => n + s.requests.length, 0);
  const envPath = path.join(outDir, 'openclaw.env');
  writeFileAtomicSync(envPath, Buffer.from(envFile(options, { sessions: plan.length, requests }, previousEnv(envPath))));
  writeFileAtomicSync(path.join(outDir, 'README.md'), Buffer.from(readme({ ...options, outDir })));
  await ws.exportJsonl('openclaw', path.join(outDir, 'sent.openclaw.jsonl'), { leaveOutHeldOut: !includeHeldOut });
  const { onPlanned: _, ...replayHooks } = hooks;
  const summary = await runReplay(plan, {
    endpoint: options.endpoint,
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    ...(options.model ? { model: options.model } : {}),
    ...(options.maxTokens ? { maxTokens: options.maxTokens } : {}),
    concurrency: options.concurrency,
    paceMs: options.paceMs,
    progressFile: path.join(outDir, PROGRESS_FILE),
    ...replayHooks,
  });
  return { outDir, summary, heldOut };
}
