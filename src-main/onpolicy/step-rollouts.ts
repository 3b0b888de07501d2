/**
 * The episodes of one on-policy step (docs/design.md §On-policy training): K rollouts of each
 * of the step's contexts with the current policy, plus the captured reply of a sample captured
 * live from this model; each one scored (./scoring.ts) and appended to episodes.jsonl as it
 * finishes.
 *
 * Resume: the episodes of this step already in the file (a run killed or cancelled in the
 * middle of it) are taken as they are and not generated again; the rollout manager generates
 * only the others, with the seeds an uninterrupted run gives them, so the step's episodes are
 * the same either way. The step's list is in a fixed order (context by context, sample by
 * sample), whatever order the episodes finished in.
 *
 * Stopping: `shouldStop` is polled after each episode is written; a stop ends the step there
 * (what was written stays, for the resume).
 */
import type { Episode } from '../../src-shared/rollout.js';
import { episodeId, runRollouts } from '../rollout/manager.js';
import type { Policy } from '../rollout/policy.js';
import type { ToolRegistry } from '../rollout/tools.js';
import type { EpisodeWriter } from '../rollout/episodes-file.js';
import { stepSeedBase, type StepContext } from './contexts.js';
import type { OnPolicyRunSettings } from './options.js';
import { capturedEpisode, scoreEpisode, type Scorer } from './scoring.js';

export interface StepRollouts {
  policy: Policy;
  tools: ToolRegistry;
  settings: OnPolicyRunSettings;
  seed: number;
  scorer: Scorer;
  writer: EpisodeWriter;
  /** Episodes already in the file, by id (from a run that was stopped). */
  written: ReadonlyMap<string, Episode>;
  shouldStop: () => boolean;
}

/** Thrown from the manager's episode callback to end the step's generation early. */
class Stopped extends Error {}

/** The step's episodes in their fixed order, or 'stopped' when a stop came before they were all done. */
export async function stepEpisodes(r: StepRollouts, contexts: readonly StepContext[], step: number): Promise<Episode[] | 'stopped'> {
  const K = r.settings.rollouts;
  const fresh = new Map<string, Episode>();
  const byId = new Map(contexts.map((c) => [c.id, c]));
  const keep = async (episode: Episode) => {
    const scored = await scoreEpisode(episode, byId.get(episode.contextId)!, r.scorer);
    r.writer.append(scored);
    fresh.set(scored.id, scored);
    if (r.shouldStop()) throw new Stopped();
  };
  try {
    for (const c of contexts) {
      const captured = capturedEpisode(c, K, step);
      if (captured && !r.written.has(captured.id)) await keep(captured);
    }
    await runRollouts(r.policy, contexts.map((c) => c.rollout), {
      tools: r.tools, rollouts: K, maxTurns: r.settings.maxTurns, maxTokens: r.settings.maxTokens, toolErrorLimit: r.settings.toolErrorLimit,
      seedBase: stepSeedBase(r.seed, step), step, skip: new Set(r.written.keys()), onEpisode: keep,
    });
  } catch (err) {
    if (err instanceof Stopped) return 'stopped';
    throw err;
  }
  return contexts.flatMap((c) => Array.from({ length: K + 1 }, (_, k) => episodeId(c.id, k, step)))
    .flatMap((id) => {
      const e = fresh.get(id) ?? r.written.get(id);
      return e ? [e] : [];
    });
}

/** The episodes of a file by step and id: what a resumed run finds already done. */
export function episodesByStep(episodes: readonly Episode[]): Map<number, Map<string, Episode>> {
  const out = new Map<number, Map<string, Episode>>();
  for (const e of episodes) {
    let step = out.get(e.step);
    if (!step) out.set(e.step, (step = new Map()));
    step.set(e.id, e);
  }
  return out;
}
