/**
 * Replay and generation statistics as report parts (docs/design.md §Evaluation): per model its
 * ReplayMetrics and GenerationStats, per adapter its win/tie/loss against the base, or a
 * Skipped saying why a part was not measured.
 */
import { contextScores, replayReward, winTieLoss, type ReplayMetrics, type ReplayReply, type WinTieLoss } from '../../src-shared/eval-replay.js';
import type { EvalMetric, GenerationStats, Skipped } from '../../src-shared/eval-report.js';
import { REPLAY_PROMPT_VERSION } from '../judge/prompts.js';
import { generationStats } from './generation-stats.js';
import type { Replayed, ReplaySettings } from './replay.js';

export const NO_JUDGE = 'replay needs a replay judge (an LLM judge, local or OpenAI-compatible: --judge-backend on the command line, the judge on the Settings page in the app) to label the generated replies, and none is configured; the heuristic cannot judge a replay; not measured';

export interface GenerationParts {
  model(name: string): { replay?: ReplayMetrics | Skipped; stats?: GenerationStats | Skipped };
  comparison(a: string, b: string): WinTieLoss | Skipped | undefined;
  notes: string[];
}

/** Keeps the contexts whose every reply was judged (a stopped run judged only some). */
function judgedOnly(replies: Record<string, ReplayReply[]>): Record<string, ReplayReply[]> {
  return Object.fromEntries(Object.entries(replies).filter(([, rs]) => rs.length > 0 && rs.every((r) => r.votes.length > 0)));
}

export function generationParts(
  metrics: readonly EvalMetric[], settings: ReplaySettings, replayed: Replayed | null, seed: number, why: string | null,
): GenerationParts {
  const wantReplay = metrics.includes('replay');
  const wantStats = metrics.includes('stats');
  const replaySkip = !settings.judge ? NO_JUDGE : replayed?.judged ? null : (why ?? 'the replies were not judged; not measured');
  const statsSkip = replayed ? null : (why ?? 'no reply was generated; not measured');
  const notes: string[] = [];
  if (wantReplay && replaySkip) notes.push(`replay: ${replaySkip}`);
  if (wantStats && statsSkip) notes.push(`stats: ${statsSkip}`);
  const judge = settings.judge ? `${settings.judge.backend}:${settings.judge.backend === 'local' ? settings.judge.modelDir : settings.judge.model}` : '';
  const metricsOf = (name: string): ReplayMetrics | null => {
    const replies = replayed?.replies.get(name);
    if (!replies) return null;
    const judged = judgedOnly(replies);
    return {
      judge, prompt_version: REPLAY_PROMPT_VERSION, rollouts: settings.rollouts, votes: settings.votes,
      reward: replayReward(judged, seed), replies: judged,
    };
  };
  return {
    notes,
    model(name) {
      const out: { replay?: ReplayMetrics | Skipped; stats?: GenerationStats | Skipped } = {};
      if (wantReplay) out.replay = replaySkip ? { skipped: replaySkip } : (metricsOf(name) ?? { skipped: 'not replayed (the run stopped first)' });
      if (wantStats) {
        const generated = replayed?.generated.get(name);
        out.stats = statsSkip ? { skipped: statsSkip } : generated ? generationStats(generated, seed) : { skipped: 'not replayed (the run stopped first)' };
      }
      return out;
    },
    comparison(a, b) {
      if (!wantReplay) return undefined;
      if (replaySkip) return { skipped: replaySkip };
      const [x, y] = [metricsOf(a), metricsOf(b)];
      return x && y ? winTieLoss(contextScores(x), contextScores(y), seed) : { skipped: 'not replayed under both (the run stopped first)' };
    },
  };
}
