/**
 * On-policy training's vocabulary and defaults, and the shape of a rollout episode
 * (docs/design.md §Rollouts and §Advantage estimators). Node-free: the Training page and the
 * Rollouts view load it, and src-main/rollout/ writes episodes in exactly this shape, one per
 * line of `episodes.jsonl` in the run folder.
 */

/** How per-token advantages come from rewards (docs/design.md §Advantage estimators). */
export type AdvantageEstimator = 'reward' | 'grpo' | 'gae';
export const ADVANTAGE_ESTIMATORS: readonly AdvantageEstimator[] = ['reward', 'grpo', 'gae'];

/**
 * The PPO settings that apply to any batch of rows, offline (`--data`) or on-policy. With one
 * epoch and no minibatches a step is today's single update per batch.
 */
export const PPO_DEFAULTS = {
  ppoEpochs: 1,
  /** Rows per minibatch inside a batch; 0: the whole batch is one minibatch. */
  minibatch: 0,
  advantage: 'reward' as AdvantageEstimator,
  /** GRPO: also divide r − mean by the group's std (+1e-6). */
  grpoStd: false,
  /** Standardise A over the batch's response tokens (mean 0, std 1, +1e-8). */
  normalizeAdvantages: false,
  /** GAE discount γ and trace λ. */
  gamma: 1,
  lambda: 0.95,
  /** Value clip ε_v and the value loss's weight c_v in the total loss. */
  valueClip: 0.2,
  valueCoef: 0.5,
} as const;

/** A run's PPO settings (src-main/train/ppo-batch.ts), saved with the run; defaults {@link PPO_DEFAULTS}. */
export interface PpoSettings {
  advantage: AdvantageEstimator;
  grpoStd: boolean;
  normalizeAdvantages: boolean;
  ppoEpochs: number;
  minibatch: number;
  gamma: number;
  lambda: number;
  valueClip: number;
  valueCoef: number;
}

/** The defaults of `train --on-policy` (and the Training page's On-policy section). */
export const ON_POLICY_DEFAULTS = {
  /** K rollouts per context. */
  rollouts: 4,
  ppoEpochs: 2,
  /** Contexts sampled per step (each gives K rollouts). */
  contextsPerStep: 4,
  /** Assistant turns per episode (a tool result starts another). */
  maxTurns: 4,
  /** Generated tokens per episode, over all its turns. */
  maxTokens: 256,
  /** Tool errors after which an episode stops. */
  toolErrorLimit: 3,
  /** A user tool's call is abandoned after this long. */
  toolTimeoutMs: 5000,
  temperature: 1,
  topP: 1,
} as const;

/** Why an episode ended. */
export type EpisodeFinish = 'answer' | 'max_turns' | 'max_tokens' | 'tool_errors';
export const EPISODE_FINISHES: readonly EpisodeFinish[] = ['answer', 'max_turns', 'max_tokens', 'tool_errors'];

/** Where an episode's reward came from; `opd` episodes are scored by the teacher instead. */
export type RolloutRewardSource = 'task' | 'replay' | 'label' | 'opd' | 'none';

/** One executed (or refused) tool call. `ok: false` results still become a tool turn that says why. */
export interface ToolCallRecord {
  name: string;
  /** The parsed arguments, or the raw text when they were not valid JSON. */
  arguments: unknown;
  ok: boolean;
  /** What the tool turn says: the tool's result, or the error in one line. */
  result: string;
  ms: number;
  /** A recorded session's tool, shown to the model and never run (`ok` false, `result` says so): the call is the reply's answer. */
  notRun?: true;
}

export type EpisodeMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCallRecord[]; finish?: string }
  | { role: 'tool'; name: string; content: string; error?: boolean };

export interface EpisodeSummary {
  turns: number;
  toolCalls: number;
  invalidToolCalls: number;
  /** Generated tokens (tool turns not counted). */
  tokens: number;
  reward: number | null;
  seconds: number;
}

/**
 * One rollout. `tokens.inputIds` is the whole sequence as the policy saw it (prompt, the
 * generated tokens of every assistant turn, the tool turns' template tokens between them);
 * `generated` lists the spans [start, end) of generated tokens, and `logprobs` holds one
 * log-prob per generated token in order: the rollout's `old`. Only generated tokens train.
 */
export interface Episode {
  /** `${contextId}#${sample}@${step}`: unique in a run, so a resumed run knows what it has. */
  id: string;
  /** The context it continues: `session/turn` for a database sample, `file:line` for a task. */
  contextId: string;
  /**
   * sha256 of that context's prompt, tools and reward check when the episode was made; absent
   * in episodes from before it was recorded and in captured replies.
   */
  contextSha256?: string;
  /** k of the K rollouts of this context. */
  sample: number;
  seed: number;
  /** The training step that generated it (0 for a standalone rollout run). */
  step: number;
  /** The prompt messages first (`promptMessages` of them), then the generated turns. */
  messages: EpisodeMessage[];
  promptMessages: number;
  tokens: { inputIds: number[]; promptLength: number; generated: { start: number; end: number }[]; logprobs: number[] };
  finish: EpisodeFinish;
  /** Rewards on token positions of inputIds (docs/design.md §Advantage estimators): the last token of a rewarded assistant turn. */
  rewards: { at: number; r: number }[];
  reward: number | null;
  rewardSource: RolloutRewardSource;
  /** OPD: teacher − old per generated token, in order. */
  teacherGap?: number[];
  summary: EpisodeSummary;
}

/** The episodes file of a run folder. */
export const EPISODES_FILE = 'episodes.jsonl';
