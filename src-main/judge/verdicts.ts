// The judge interface shared by every backend and the built-in heuristic backend. An LLM
// backend (local ONNX model, OpenAI-compatible endpoint) implements `JudgeBackend` and
// turns its votes into a verdict with votes.ts; runner.ts runs any backend over the
// workspace's samples, and the workspace stores the verdicts with their provenance.
export type { JudgeInput, JudgeVerdict } from '../../src-shared/types.js';
import type { JudgeInput, JudgeVerdict, LabelSource, Reward, Vote } from '../../src-shared/types.js';
import { heuristicReward, looksLikeToolError } from './heuristic.js';
import { extractHint } from './hint-rules.js';

export interface JudgeOptions {
  /** Also extract a hindsight hint (OPD). */
  hints: boolean;
  /** Votes per sample (sampling backends); deterministic backends may cast one. */
  votes: number;
  signal?: AbortSignal;
}

/** Where a verdict came from, stored beside the label. */
export interface JudgeProvenance {
  backend: 'heuristic' | 'local' | 'openai';
  model: string | null;
  promptVersion: string;
}

export interface JudgeBackend {
  readonly provenance: JudgeProvenance;
  /** The label source its verdicts get: 'heuristic' or 'judge:<model>'. */
  readonly labelSource: LabelSource;
  /** A local judge's weights that are not fp32 because fp32 did not fit: why (a run's summary says it). */
  readonly weightsNote?: string | null;
  judge(input: JudgeInput, options: JudgeOptions): Promise<JudgeVerdict>;
}

/**
 * The vote rule (docs/design.md §Votes): unparseable votes (no reward) are dropped; no valid vote gives 0; a
 * tie for the top count gives 0; otherwise the most common value wins.
 */
export function majorityVote(votes: readonly Vote[]): Reward {
  const counts = new Map<Reward, number>();
  for (const v of votes) if (v.reward !== undefined) counts.set(v.reward, (counts.get(v.reward) ?? 0) + 1);
  let best: Reward = 0;
  let bestCount = 0;
  let tied = false;
  for (const [reward, count] of counts) {
    if (count > bestCount) {
      best = reward;
      bestCount = count;
      tied = false;
    } else if (count === bestCount) {
      tied = true;
    }
  }
  return bestCount === 0 || tied ? 0 : best;
}

// v2: multilingual cues, contrast, topic changes, conservative on conflict (docs/design.md §Judges).
export const HEURISTIC_PROMPT_VERSION = 'heuristic-v2';

/** The built-in rule-based judge: deterministic, so it casts a single vote. */
export class HeuristicJudge implements JudgeBackend {
  readonly provenance: JudgeProvenance = { backend: 'heuristic', model: null, promptVersion: HEURISTIC_PROMPT_VERSION };
  readonly labelSource: LabelSource = 'heuristic';

  async judge(input: JudgeInput, options: JudgeOptions): Promise<JudgeVerdict> {
    const verdict = heuristicReward(input.response, input.nextState);
    const hint = options.hints
      ? extractHint(input.nextState, input.nextState.role === 'tool' && looksLikeToolError(input.nextState.text))
      : null;
    const raw = `heuristic: ${verdict.evidence.join(', ')} → ${verdict.reward > 0 ? '+1' : verdict.reward}`;
    return {
      reward: verdict.reward, hint, votes: [{ reward: verdict.reward, ...(hint ? { hint } : {}), raw }],
      confidence: verdict.confidence, evidence: verdict.evidence,
    };
  }
}
