/**
 * Which sessions are held out from training for evaluation (docs/design.md §Evaluation).
 *
 * The held-out split holds out about `percent` (10 by default) of the *samples*, in whole
 * sessions, and at least MIN_HELD_OUT_SAMPLES of them when the data allows, so an interval on
 * the held-out split means something:
 *
 * 1. Every session has a split value: the first 8 hex digits of sha256(session id) as an
 *    unsigned integer, mod 100. The rule holds a session out when its value is below the
 *    percentage (stable: a session's place does not move as others are added).
 * 2. The target is max(⌈percent × samples⌉, MIN_HELD_OUT_SAMPLES), but never more than a
 *    quarter of the samples (training needs the rest; at least 1 once there are 2). When step 1
 *    falls short of it, the sessions with the next smallest values are added ('minimum') until
 *    it is met. So 80 samples or more reach the minimum; fewer are "too few to tell".
 * 3. A session too large to hold out whole (more samples than twice the target, as one
 *    1,000-turn chat among 48 short ones) is never held out by the rule: it stays in training
 *    and says why ('too-large'), instead of silently being most of the held-out split.
 *
 * The user's choice for a session (held out, or trained on) wins over the rule, and its
 * samples count toward the target. Percentage 0 holds nothing out by the rule. A pure
 * function of the sessions, their sample counts, the percentage and the user's choices: the
 * same database gives the same split on every machine and every read.
 */
import crypto from 'node:crypto';
import { MIN_HELD_OUT_SAMPLES } from '../../src-shared/eval-stats.js';

export const DEFAULT_HELD_OUT_PERCENT = 10;

/** Why a session is where it is. */
export type SplitReason = 'rule' | 'minimum' | 'too-large' | 'user';

export interface SplitDecision {
  heldOut: boolean;
  why: SplitReason;
}

export interface SplitInput {
  id: string;
  /** The session's samples: what the target counts. */
  samples: number;
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

/** How many samples the rule aims to hold out of `total` (step 2 above). */
export function heldOutTarget(total: number, percent: number): number {
  if (percent === 0 || total < 2) return 0;
  return Math.min(Math.max(Math.ceil((percent / 100) * total), MIN_HELD_OUT_SAMPLES), Math.max(1, Math.floor(total / 4)));
}

/** Each session's place in the split; `overrides` maps a session id to the user's choice (true: held out). */
export function decideSplit(sessions: readonly SplitInput[], percent: number, overrides: ReadonlyMap<string, boolean>): Map<string, SplitDecision> {
  checkPercent(percent);
  const out = new Map<string, SplitDecision>();
  const total = sessions.reduce((a, s) => a + s.samples, 0);
  const target = heldOutTarget(total, percent);
  let held = 0;
  const free: (SplitInput & { value: number })[] = [];
  for (const s of sessions) {
    const chosen = overrides.get(s.id);
    if (chosen !== undefined) {
      out.set(s.id, { heldOut: chosen, why: 'user' });
      if (chosen) held += s.samples;
    } else free.push({ ...s, value: splitValue(s.id) });
  }
  // Ties on the value go to the smaller id, so the split never depends on the order given.
  free.sort((a, b) => a.value - b.value || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const tooLarge = (s: SplitInput) => s.samples > 2 * target;
  for (const s of free) {
    const ruled = target > 0 && s.samples > 0 && s.value < percent;
    out.set(s.id, { heldOut: ruled && !tooLarge(s), why: ruled && tooLarge(s) ? 'too-large' : 'rule' });
    if (ruled && !tooLarge(s)) held += s.samples;
  }
  for (const s of free) {
    if (held >= target) break;
    if (out.get(s.id)!.heldOut || s.samples === 0) continue;
    if (tooLarge(s)) {
      out.set(s.id, { heldOut: false, why: 'too-large' });
      continue;
    }
    // One that would overshoot twice the target is passed over for the smaller ones after it.
    if (held + s.samples > 2 * target) continue;
    out.set(s.id, { heldOut: true, why: 'minimum' });
    held += s.samples;
  }
  return out;
}
