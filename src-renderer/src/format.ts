// Small display helpers shared by the views.
import type { LabelSource, Reward, SessionFormat } from '../../src-shared/types.js';
import type { JudgeSummary, SessionSplit } from '../../src-shared/views.js';
import { judgeRunNotes, rewardCountsText, type JudgeRunSkips } from '../../src-shared/judge-notes.js';

// Typed over every session format, so a new importer or source cannot go unlabelled.
const SOURCE_LABELS: Record<SessionFormat, string> = {
  chatgpt: 'ChatGPT',
  claude: 'Claude',
  sharegpt: 'ShareGPT',
  openai: 'OpenAI JSONL',
  messages: 'HF messages',
  openwebui: 'Open WebUI',
  capture: 'Live capture',
};

export function sourceLabel(source: string): string {
  return SOURCE_LABELS[source as SessionFormat] ?? source;
}

/**
 * Dates arrive as unix seconds (docs/design.md §Data model), shown in the user's locale. A
 * session whose export has no date shows nothing (never "Invalid Date").
 */
export function formatDate(seconds: number | null | undefined): string {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '';
  const date = new Date(seconds * 1000);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
}

export function rewardText(reward: Reward | null): string {
  if (reward === null) return '–';
  return reward === 1 ? '+1' : reward === -1 ? '−1' : '0';
}

export function rewardClass(reward: Reward | null): string {
  return reward === null ? 'unlabeled' : reward === 1 ? 'pos' : reward === -1 ? 'neg' : 'neutral';
}

/** "1 sample", "3 samples": a count with its noun in the right number. */
export function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

export function sourceText(source: LabelSource | null): string {
  if (source === null) return 'unlabelled';
  return source.startsWith('judge:') ? `judge · ${source.slice(6)}` : source;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '—';
  // A fast model's ETA is often under a second: "<1s", not a "0s" that reads as stuck.
  if (seconds > 0 && seconds < 0.5) return '<1s';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** One line for a finished or cancelled judge run: what it labelled, and what it left alone and why. */
export function judgeSummaryText(r: JudgeSummary & Partial<JudgeRunSkips>): string {
  const left = [
    r.skippedManual ? `${r.skippedManual} manual label${r.skippedManual === 1 ? '' : 's'} kept` : '',
    r.skippedHigher ? `${r.skippedHigher} kept an LLM judge's label` : '',
    r.skippedUnchanged ? `${r.skippedUnchanged} already judged with these settings` : '',
  ].filter(Boolean);
  const rewards = rewardCountsText(r.rewards);
  const judged = `${r.judged} sample${r.judged === 1 ? '' : 's'}${rewards ? `: ${rewards}` : ''}`;
  const head = !r.cancelled
    ? `Judged ${judged}`
    : r.judged
      ? `Judge cancelled after ${judged}; ${r.judged === 1 ? 'its label is' : 'their labels are'} kept`
      : 'Judge cancelled before it labelled any sample';
  const notes = judgeRunNotes(r).map((note) => ` ${note[0]!.toUpperCase()}${note.slice(1)}.`).join('');
  return (left.length ? `${head} (${left.join(', ')}).` : `${head}.`) + notes;
}

const SPLIT_REASONS: Record<SessionSplit['why'], string> = {
  user: 'you chose it',
  minimum: 'added so the held-out split has enough samples to measure',
  'too-large': 'too large to hold out whole',
  rule: 'picked by a hash of its id, about a tenth of the samples',
};

/** What the "held out" badge and its toggle mean (docs/design.md §Evaluation). */
export function splitTitle(split: SessionSplit): string {
  if (split.heldOut) return `Held out: kept for evaluation and never trained on (${SPLIT_REASONS[split.why]}).`;
  if (split.why === 'user') return 'Trained on: you took it out of the held-out sessions.';
  if (split.why === 'too-large') return 'Trained on: the rule would hold it out, but it has more than twice the held-out target of samples, so it would be most of the evaluation. Hold it out yourself to keep it for evaluation instead.';
  return 'Trained on. Hold it out to keep it for evaluation instead.';
}
