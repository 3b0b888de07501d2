/**
 * The on-policy run's batch source (../train/run-loop.ts BatchSource): what makes a step's
 * batch on-policy (see ./onpolicy-trainer.ts for the whole step). For step k it takes the
 * step's contexts (./contexts.ts contextsForStep), sets the generation engine's LoRA inputs to
 * the weights as they are before the step, generates and scores the step's episodes
 * (./step-rollouts.ts, which takes the episodes a resumed run already wrote from
 * episodes.jsonl) and turns them into the step's rows (./scoring.ts stepRow). The run loop
 * does the rest, as for an offline run.
 */
import type { Episode } from '../../src-shared/rollout.js';
import { overLengthNote } from '../../src-shared/training.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import type { ModelEngine } from '../model/inference-engine.js';
import type { EpisodeWriter } from '../rollout/episodes-file.js';
import type { Policy } from '../rollout/policy.js';
import type { ToolRegistry } from '../rollout/tools.js';
import type { EmitEvent } from '../train/run-events.js';
import type { BatchSource } from '../train/run-loop.js';
import type { StepLog } from '../train/trainer-log.js';
import { contextsForStep, type StepContext } from './contexts.js';
import type { OnPolicyTrainSettings } from './options.js';
import { stepRow, type Scorer, type StepRow } from './scoring.js';
import { episodesByStep, stepEpisodes } from './step-rollouts.js';

export interface RolloutBatchesInput {
  settings: OnPolicyTrainSettings;
  /** The run's contexts (every step draws its own from them). */
  contexts: StepContext[];
  /** Samples left out as contexts, by reason (the result's `skipped`). */
  skipped: Record<string, number>;
  /** The engine the policy generates with; its LoRA inputs follow the training. */
  engine: ModelEngine;
  policy: Policy;
  tools: ToolRegistry;
  scorer: Scorer;
  writer: EpisodeWriter;
  /** Episodes already in the file from the steps after the checkpoint (a resumed run); an episode's step counts from 0. */
  written: Episode[];
  emit: EmitEvent;
  /** Polled after each episode, so a stop does not wait for the whole step's rollouts. */
  shouldStop: () => boolean;
}

/** The batches of an on-policy run: each one rolled out, scored and built at its step. */
export function rolloutBatches(r: RolloutBatchesInput): BatchSource {
  const { settings } = r;
  const written = episodesByStep(r.written);
  return {
    summary: { rows: r.contexts.length, skipped: r.skipped, truncated: 0 },
    batch: async (index, weights) => {
      const { contexts, epoch } = contextsForStep(r.contexts, settings.onPolicy.contextsPerStep, settings.seed, index);
      r.engine.setLora(weights);
      r.emit({ type: 'status', phase: 'generating', message: `step ${index + 1}: ${settings.onPolicy.rollouts} rollouts of ${contexts.length} context${contexts.length === 1 ? '' : 's'}` });
      const episodes = await stepEpisodes({
        policy: r.policy, tools: r.tools, settings: settings.onPolicy, seed: settings.seed, scorer: r.scorer, writer: r.writer,
        written: written.get(index) ?? new Map(), shouldStop: r.shouldStop,
      }, contexts, index);
      if (episodes === 'stopped') return 'stopped';
      const { rows, over } = stepRows(episodes, contexts, settings);
      const overNote = over ? `; ${overLengthNote(over, settings.maxLength, r.engine.config.maxPositionEmbeddings).replace(/samples?/, over === 1 ? 'episode' : 'episodes')}` : '';
      r.emit({ type: 'status', phase: 'training', message: `step ${index + 1}: training on ${rows.length} of ${episodes.length} episodes${overNote}` });
      return {
        epoch, rows: rows.map((row) => row.row),
        // The teacher's log-probs were scored as each episode finished (./scoring.ts).
        teacher: methodRecord(settings.method).uses.hint ? rows.map((row) => row.teacher) : undefined,
        logFields: episodeFields(episodes, over),
      };
    },
  };
}

/** The step's training rows, and how many episodes were skipped for not fitting the run's length. */
function stepRows(episodes: readonly Episode[], contexts: readonly StepContext[], settings: OnPolicyTrainSettings): { rows: StepRow[]; over: number } {
  const byId = new Map(contexts.map((c) => [c.id, c]));
  const rows: StepRow[] = [];
  let over = 0;
  for (const e of episodes) {
    const r = stepRow(e, byId.get(e.contextId)!, settings.method, settings.maxLength, settings.quantize);
    if (r === 'over') over++;
    else if (r) rows.push(r);
  }
  return { rows, over };
}

/** What an on-policy step adds to its log line: its episodes, those too long to train, and their mean reward. */
function episodeFields(episodes: readonly Episode[], overLength: number): Partial<StepLog> {
  const rewarded = episodes.filter((e) => e.reward !== null);
  return {
    episodes: episodes.length,
    ...(overLength ? { skipped_over_length: overLength } : {}),
    episode_reward_mean: rewarded.length ? rewarded.reduce((s, e) => s + e.reward!, 0) / rewarded.length : null,
  };
}
