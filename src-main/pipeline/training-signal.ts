/**
 * Which samples a training run learns from, per method (docs/design.md §At-least-one). One
 * definition, read by the database's training samples (src-main/workspace/), the trainer's
 * row selection (src-main/train/batches.ts) and live capture's background training
 * (src-main/capture/capture-loop.ts), so every path keeps and drops the same samples.
 *
 * A sample has *signal* for a method when the method can learn from it: a ±1 reward for a
 * method that uses rewards, a hint for one that uses hints (src-shared/training-methods.ts
 * `uses`): rl, opd and combine respectively take a reward, a hint, either. Per session and method, training takes every sample
 * with signal; a session with samples but none with signal for that method still gives its
 * first sample, flagged *kept*, which trains with advantage 0.
 */
import { methodRecord, methodsUsing, signalKind, type SignalKind, type TrainMethod } from '../../src-shared/training-methods.js';

/** What the method sees of a sample: its reward and whether it has a hint training uses. */
export interface SampleSignal {
  reward: number;
  hinted: boolean;
}

/** Whether `method` learns from a sample with this reward and hint. */
export function hasSignalFor(method: TrainMethod, reward: number, hinted: boolean): boolean {
  const { uses } = methodRecord(method);
  return (uses.reward && (reward === 1 || reward === -1)) || (uses.hint && hinted);
}

/**
 * The at-least-one rule for one session's samples (in turn order) and one method: the samples
 * with signal, or else the first sample, kept.
 */
export function sessionSamplesFor<T extends SampleSignal>(method: TrainMethod, session: readonly T[]): { sample: T; kept: boolean }[] {
  const withSignal = session.filter((s) => hasSignalFor(method, s.reward, s.hinted));
  if (withSignal.length > 0) return withSignal.map((sample) => ({ sample, kept: false }));
  return session.slice(0, 1).map((sample) => ({ sample, kept: true }));
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * Why a run of `method` over these samples (every sample of the database) would learn nothing,
 * naming what the method needs and what there is; null when some sample has signal. Without
 * this check such a run "finishes" on kept samples alone and writes an untrained adapter.
 */
export function whyNothingToTrain(method: TrainMethod, samples: readonly SampleSignal[]): string | null {
  if (samples.some((s) => hasSignalFor(method, s.reward, s.hinted))) return null;
  const total = samples.length;
  if (total === 0) return 'nothing to train on: the database has no samples yet; import chats in which an assistant reply got a reaction';
  const rewarded = samples.filter((s) => s.reward === 1 || s.reward === -1).length;
  const hinted = samples.filter((s) => s.hinted).length;
  const others = (signal: 'reward' | 'hint') => methodsUsing(signal).map((m) => m.name).join('/');
  const needs: Record<SignalKind, () => string> = {
    reward: () => {
      const other = hinted > 0 ? `, or use ${others('hint')} with the ${plural(hinted, 'hinted sample', 'hinted samples')}` : ' or run the judge';
      return `${method} needs samples labelled ±1: 0 of ${total} are; label some in the annotator${other}`;
    },
    hint: () => {
      const other = rewarded > 0 ? `, or use ${others('reward')} with the ${plural(rewarded, 'sample', 'samples')} labelled ±1` : '';
      return `${method} needs samples with a hint: 0 of ${total} have one; add hints in the annotator or run the judge with hints${other}`;
    },
    both: () => `${method} needs samples labelled ±1 or with a hint: 0 of ${total} have either; label some in the annotator or run the judge`,
  };
  return needs[signalKind(method)]();
}
