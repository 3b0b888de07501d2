/**
 * The on-policy settings of a fine-tune as the app sends them (the Training page's On-policy
 * section → `trainStart`'s optional `onPolicy` → the trainer's `onPolicy` option), with their
 * validator and the page's starting values (docs/design.md §On-policy settings). Node-free.
 */
import { ADVANTAGE_ESTIMATORS, ON_POLICY_DEFAULTS, PPO_DEFAULTS, type AdvantageEstimator } from './rollout.js';
import { bounded } from './training.js';
import { boolean, object, oneOf, optional, string, type Schema } from './validate.js';

export interface OnPolicySettings {
  /** K: rollouts generated per context. */
  rollouts: number;
  /** PPO epochs over each step's rollouts. */
  ppoEpochs: number;
  advantage: AdvantageEstimator;
  /** GRPO: also divide by the group's standard deviation. */
  grpoStd: boolean;
  /** Standardise the advantages over the batch's generated tokens. */
  normalizeAdvantages: boolean;
  /** Contexts sampled per step (each gives K rollouts). */
  contextsPerStep: number;
  /** Assistant turns per episode. */
  maxTurns: number;
  /** Generated tokens per episode, over all its turns. */
  maxTokens: number;
  /**
   * A JSONL task file on the machine that runs the trainer: one task per line with `messages`
   * and `answer` or `answer_regex`, which give verifiable rewards. Without it the contexts are
   * the database's samples.
   */
  taskFile?: string;
}

/** The advantage estimators as the Training page names them, for errors said in the app's words (a method's name: its record's `label`). */
export const ADVANTAGE_NAMES: Record<AdvantageEstimator, string> = { reward: 'Reward', grpo: 'GRPO', gae: 'GAE' };

export const onPolicyInput: Schema<OnPolicySettings> = object({
  rollouts: bounded('rollouts'),
  ppoEpochs: bounded('ppoEpochs'),
  advantage: oneOf(ADVANTAGE_ESTIMATORS),
  grpoStd: boolean(),
  normalizeAdvantages: boolean(),
  contextsPerStep: bounded('contextsPerStep'),
  maxTurns: bounded('maxTurns'),
  maxTokens: bounded('maxTokens'),
  taskFile: optional(string({ min: 1, max: 4096 })),
});

/** What the On-policy section first shows: the defaults of `train --on-policy`. */
export function defaultOnPolicySettings(): OnPolicySettings {
  return {
    rollouts: ON_POLICY_DEFAULTS.rollouts,
    ppoEpochs: ON_POLICY_DEFAULTS.ppoEpochs,
    advantage: PPO_DEFAULTS.advantage,
    grpoStd: PPO_DEFAULTS.grpoStd,
    normalizeAdvantages: PPO_DEFAULTS.normalizeAdvantages,
    contextsPerStep: ON_POLICY_DEFAULTS.contextsPerStep,
    maxTurns: ON_POLICY_DEFAULTS.maxTurns,
    maxTokens: ON_POLICY_DEFAULTS.maxTokens,
  };
}

/** One line per advantage estimator, for the page and help texts (docs/design.md §Advantage estimators). */
export const ADVANTAGE_ESTIMATOR_HELP: Record<AdvantageEstimator, string> = {
  reward: 'Each generated token takes its episode’s reward.',
  grpo: 'The reward minus the mean of its context’s K rollouts.',
  gae: 'A value head’s TD errors (γ, λ), plus a value loss.',
};

/** The note beside the task file field. */
export const TASK_FILE_NOTE = 'tasks give verifiable rewards: one JSON per line with messages and answer or answer_regex';
