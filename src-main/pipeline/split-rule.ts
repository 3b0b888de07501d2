/**
 * Which sessions are held out from training for evaluation (docs/design.md §Evaluation).
 *
 * Every session has a split value: the first 8 hex digits of sha256(session id) as an
 * unsigned integer, mod 100. The rule holds a session out when its value is below the
 * held-out percentage (10 by default). The user's choice for a session (held out, or
 * trained on) wins over the rule. When two or more sessions have samples and still none of
 * them is held out, the session with samples and the smallest value among those the user
 * left to the rule is held out, so there is always something to evaluate on.
 *
 * A pure function of the session ids, the percentage and the user's choices: the same
 * database gives the same split on every machine and every read.
 */
import crypto from 'node:crypto';

export const DEFAULT_HELD_OUT_PERCENT = 10;

/** Why a session is where it is. */
export type SplitReason = 'rule' | 'at-least-one' | 'user';

export interface SplitDecision {
  heldOut: boolean;
  why: SplitReason;
}

export interface SplitInput {
  id: string;
  /** Only sessions with samples count for the at-least-one rule. */
  hasSamples: boolean;
}

/** sha256(id), its first 8 hex digits as an unsigned integer, mod 100. */
export function splitValue(sessionId: string): number {
  const hex = crypto.createHash('sha256').update(sessionId, 'utf8').digest('hex').slice(0, 8);
  return Number.parseInt(hex, 16) % 100;
}

export function checkPercent(percent: number): number {
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) throw new RangeError(`the held-out percentage must be between 0 and 100, got ${percent}`);
  return percent;
}

/** Each session's place in the split; `overrides` maps a session id to the user's choice (true: held out). */
export function decideSplit(sessions: readonly SplitInput[], percent: number, overrides: ReadonlyMap<string, boolean>): Map<string, SplitDecision> {
  checkPercent(percent);
  const out = new Map<string, SplitDecision>();
  const values = new Map<string, number>();
  for (const s of sessions) {
    const chosen = overrides.get(s.id);
    if (chosen !== undefined) {
      out.set(s.id, { heldOut: chosen, why: 'user' });
      continue;
    }
    const value = splitValue(s.id);
    values.set(s.id, value);
    out.set(s.id, { heldOut: value < percent, why: 'rule' });
  }
  const withSamples = sessions.filter((s) => s.hasSamples);
  if (withSamples.length >= 2 && !withSamples.some((s) => out.get(s.id)!.heldOut)) {
    // Ties on the value go to the smaller id, so the pick never depends on the order given.
    const candidates = withSamples.filter((s) => values.has(s.id));
    candidates.sort((a, b) => values.get(a.id)! - values.get(b.id)! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    if (candidates[0]) out.set(candidates[0].id, { heldOut: true, why: 'at-least-one' });
  }
  return out;
}
