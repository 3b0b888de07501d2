// Handing the data to a GPU cluster's trainer (docs/design.md §Hand-off): the vocabulary and the
// shapes that the CLI (`hindsight handoff`), the API and the Export page share.
import type { LossAgg } from './training.js';
import type { ChatMessage } from './types.js';

/** What `--to trl` writes a train.py for. */
export const TRL_METHODS = ['kto', 'dpo', 'sft', 'sdft', 'grpo'] as const;
export type TrlMethod = (typeof TRL_METHODS)[number];

/** OpenClaw-RL's training modes: Binary RL, On-Policy Distillation, or both. */
export const OPENCLAW_METHODS = ['rl', 'opd', 'combine'] as const;
export type OpenclawMethod = (typeof OPENCLAW_METHODS)[number];

/**
 * Which of Hindsight's loss settings each trainer's method reads, so the Export page offers only
 * those: TRL's grpo its loss_type from --loss-agg, TRL's sdft the top K; OpenClaw-RL's slime the
 * aggregation in every mode, and the top K in opd only (its combine distils the sampled token).
 */
export const HANDOFF_LOSS_SETTINGS: {
  readonly trl: Readonly<Record<TrlMethod, { readonly lossAgg: boolean; readonly opdTopK: boolean }>>;
  readonly 'openclaw-rl': Readonly<Record<OpenclawMethod, { readonly lossAgg: boolean; readonly opdTopK: boolean }>>;
} = {
  trl: {
    kto: { lossAgg: false, opdTopK: false },
    dpo: { lossAgg: false, opdTopK: false },
    sft: { lossAgg: false, opdTopK: false },
    sdft: { lossAgg: false, opdTopK: true },
    grpo: { lossAgg: true, opdTopK: false },
  },
  'openclaw-rl': {
    rl: { lossAgg: true, opdTopK: false },
    opd: { lossAgg: true, opdTopK: true },
    combine: { lossAgg: true, opdTopK: false },
  },
};

export interface TrlHandoffOptions {
  baseModel: string;
  outDir: string;
  method: TrlMethod;
  initAdapter?: string;
  gpus: number;
  /** For grpo: the judge's OpenAI-compatible base URL and model (written as defaults, changeable by env). */
  judgeUrl?: string;
  judgeModel?: string;
  /** Put the held-out sessions into the training datasets too (`--include-heldout`). */
  includeHeldOut?: boolean;
  /** The loss aggregation train.py asks TRL for where it has one (grpo's loss_type); absent: Hindsight's default. */
  lossAgg?: LossAgg;
  /** sdft: distil over the top K tokens with a tail bin (reverse KL); absent or 0: SDFT's own default. */
  opdTopK?: number;
}

/**
 * The held-out sessions (docs/design.md §Evaluation) of a hand-off: left out of what the
 * cluster trains on unless `included`.
 */
export interface HeldOutHandoff {
  /** Held-out sessions that had something to hand off. */
  sessions: number;
  /** Their samples. */
  samples: number;
  /** True when `--include-heldout` put them into the training data. */
  included: boolean;
}

export interface TrlHandoffResult {
  outDir: string;
  method: TrlMethod;
  /** Each dataset file with its line count. */
  datasets: { file: string; lines: number }[];
  files: string[];
  /** What became of the held-out sessions; `datasets` are their files under heldout/ (none when included). */
  heldOut: HeldOutHandoff & { datasets: { file: string; lines: number }[] };
}

export interface ReplayOptions {
  endpoint: string;
  apiKey?: string;
  outDir: string;
  /** The model name sent in each request (the server may ignore it). */
  model?: string;
  /** max_tokens of each request; the server's own default when absent. */
  maxTokens?: number;
  /** Sessions replayed at once. */
  concurrency: number;
  /** Least time between two requests, in milliseconds. */
  paceMs: number;
  /** Written to the launch settings for the cluster side. */
  baseModel?: string;
  method: OpenclawMethod;
  judgeUrl?: string;
  loraR?: number;
  /** Replay the held-out sessions too (`--include-heldout`); they are skipped otherwise. */
  includeHeldOut?: boolean;
  /** Written to the launch settings: slime's aggregation (sample-mean, or token-mean: --calculate-per-token-loss); absent: Hindsight's default. */
  lossAgg?: LossAgg;
  /** Written to the launch settings: opd's top-K distillation (--distill-topk K); absent or 0: the sampled token. */
  opdTopK?: number;
}

export type ReplayState = 'idle' | 'running' | 'stopping' | 'stopped' | 'finished' | 'failed';

export interface ReplayProgress {
  state: ReplayState;
  outDir: string | null;
  /** Requests answered, in this run and earlier ones (the progress file). */
  sent: number;
  total: number;
  sessionsDone: number;
  sessions: number;
  /** Sessions left unfinished because a turn was in flight when an earlier run was killed. */
  abandoned: number;
  /** The held-out sessions skipped (or, when included, replayed); null until the replay is planned. */
  heldOut: HeldOutHandoff | null;
  error: string | null;
}

/** One request of a replay (built by src-main/export/replay-plan.ts). */
export interface ReplayRequest {
  /** Position in the session's request list (what the progress file records). */
  index: number;
  turnType: 'main' | 'side';
  /** The recorded messages this request adds after the conversation so far. */
  messages: ChatMessage[];
  /** The recorded assistant turn the server's reply stands in for; null for a trailing next state. */
  replyTurn: number | null;
  last: boolean;
}

export interface ReplaySession {
  sessionId: string;
  requests: ReplayRequest[];
}

/** What a replay sends, and the held-out sessions it skipped (or, included, sends too). */
export interface ReplayPlan {
  sessions: ReplaySession[];
  heldOut: HeldOutHandoff;
}
