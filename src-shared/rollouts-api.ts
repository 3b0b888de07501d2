/**
 * The Rollouts view's calls (docs/design.md §Rollouts view): which listed training runs hold
 * rollouts, a filtered page of a run's episodes, and one episode ready to show. The main
 * process reads the run folder's `episodes.jsonl` (src-main/api/rollouts-service.ts); a run
 * is named by its id or its folder, and only the runs listed for the open database are read.
 * Node-free: the contract and the renderer import it.
 */
import { call, returns } from './call-spec.js';
import { EPISODE_FINISHES, type Episode, type EpisodeFinish, type RolloutRewardSource } from './rollout.js';
import type { TokenViewToken } from './token-view.js';
import type { TrainStatus } from './training-api.js';
import type { TrainMethod } from './training.js';
import { integer, object, oneOf, optional, string, ValidationError, type Schema } from './validate.js';

/** The reward filter: above 0, below 0, exactly 0, or no reward at all. */
export type RewardSign = 'positive' | 'negative' | 'zero' | 'none';
export const REWARD_SIGNS: readonly RewardSign[] = ['positive', 'negative', 'zero', 'none'];

export function rewardSign(reward: number | null): RewardSign {
  if (reward === null) return 'none';
  return reward > 0 ? 'positive' : reward < 0 ? 'negative' : 'zero';
}

/** The most episodes one rolloutsList call returns. */
export const MAX_ROLLOUT_PAGE = 2000;

export interface RolloutRun {
  runId: string;
  runDir: string;
  status: TrainStatus;
  method: TrainMethod;
  startedAt: number;
  /** The size of its episodes.jsonl in bytes. */
  bytes: number;
}

/** One episode as the list shows it. */
export interface RolloutListItem {
  /** Its line in episodes.jsonl (1-based). */
  line: number;
  id: string;
  contextId: string;
  sample: number;
  step: number;
  finish: EpisodeFinish;
  turns: number;
  toolCalls: number;
  /** Tool calls that failed or were refused. */
  toolErrors: number;
  tokens: number;
  reward: number | null;
  rewardSource: RolloutRewardSource;
  /** An OPD episode: it carries the teacher–student gap per generated token. */
  opd: boolean;
}

export interface RolloutPage {
  runId: string;
  runDir: string;
  /** Episodes in the file (lines that are episodes). */
  episodes: number;
  /** Episodes matching the filters; `items` are those from `offset` on. */
  total: number;
  offset: number;
  items: RolloutListItem[];
  /** Every episode by finish reason and by reward sign, for the filter menus. */
  counts: { finish: Record<EpisodeFinish, number>; reward: Record<RewardSign, number> };
  /** Lines that were skipped, one note each (a torn last line, a line that is not an episode). */
  notes: string[];
}

/** A reward placed on the assistant message whose generated span holds its token (`message` −1: on none). */
export interface TurnReward {
  message: number;
  r: number;
  /** The token position in `tokens.inputIds`. */
  at: number;
}

/** An assistant message's generated tokens with teacher − old: `from` is old, `to` old + gap, `value` the gap. */
export interface TurnGap {
  message: number;
  tokens: TokenViewToken[];
  mean: number;
}

export interface RolloutDetail {
  runId: string;
  runDir: string;
  line: number;
  episode: Episode;
  rewards: TurnReward[];
  /** OPD episodes only; null otherwise. */
  gap: TurnGap[] | null;
  /** Why the tokens show ids rather than text (the run's model folder could not be read), or null. */
  tokenNote: string | null;
}

interface RunRef {
  runId?: string;
  runDir?: string;
}

/** A run is named by exactly one of its id and its folder. */
function namingOneRun<T extends RunRef>(schema: Schema<T>): Schema<T> {
  return {
    parse(value, field) {
      const input = schema.parse(value, field);
      if ((input.runId === undefined) === (input.runDir === undefined)) {
        throw new ValidationError(field ? `${field}.runId` : 'runId', 'or runDir must be given, one of the two');
      }
      return input;
    },
  };
}

const runRef = { runId: optional(string({ min: 1, max: 100 })), runDir: optional(string({ min: 1, max: 4096 })) };

export const rolloutsListInput = namingOneRun(
  object({
    ...runRef,
    offset: optional(integer({ min: 0 })),
    limit: optional(integer({ min: 0, max: MAX_ROLLOUT_PAGE })),
    finish: optional(oneOf(EPISODE_FINISHES)),
    reward: optional(oneOf(REWARD_SIGNS)),
  }),
);

export const rolloutsGetInput = namingOneRun(object({ ...runRef, id: string({ min: 1, max: 2000 }) }));

export const ROLLOUT_CALLS = {
  rolloutRuns: call('The listed training runs whose folder holds rollouts (episodes.jsonl), newest first.', object({}), returns<{ runs: RolloutRun[] }>()),
  rolloutsList: call('A page of a run’s rollout episodes, filtered by finish reason and reward sign.', rolloutsListInput, returns<RolloutPage>()),
  rolloutsGet: call(
    'One rollout episode, its rewards placed on its turns and, for OPD, the teacher–student gap per generated token.',
    rolloutsGetInput,
    returns<RolloutDetail>(),
  ),
} as const;
