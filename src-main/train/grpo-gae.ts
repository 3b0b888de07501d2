/**
 * The advantage estimators' host arithmetic (docs/design.md §Advantage estimators), in
 * float64 on a row's response tokens (index i = position responseStart + i of input_ids):
 *
 *   reward  A = r on every trained token (./advantages.ts does it; nothing here)
 *   grpo    A = r − mean(group), optionally ÷ (std(group) + 1e-6), on every trained token
 *   gae     over the trained tokens t_1 < … < t_n: δ_i = r_{t_i} + γ·V_{t_{i+1}} − V_{t_i}
 *           (V after the last = 0), A_i = δ_i + γλ·A_{i+1} (A_{n+1} = 0), R_i = A_i + V_i
 *
 * V is the value head's output at the start of the step. GRPO's group std is the sample
 * standard deviation (Bessel's correction, divide by n − 1), as TRL's GRPOTrainer and
 * OpenClaw-RL (slime's torch `std`) compute it; a group whose rewards are all equal carries no
 * signal (every A is 0) and an `rl` step drops its rows (`informativeRows`, ./run-loop.ts).
 * Normalisation and the explained variance run over the batch's trained tokens, with
 * population statistics.
 */
import { UserError } from '../../src-shared/types.js';
import type { TrainRow } from './batches.js';

export const GRPO_STD_EPS = 1e-6;
export const NORMALIZE_EPS = 1e-8;

const responseLength = (row: TrainRow) => row.inputIds.length - row.responseStart;
const trained = (row: TrainRow, i: number) => !row.responseMask || row.responseMask[i] === 1;

/**
 * r_t on each response token: the row's `rewards` where it has them, else its `reward` on its
 * last trained token; 0 everywhere else.
 */
export function rewardsOnTokens(row: TrainRow): Float64Array {
  const out = new Float64Array(responseLength(row));
  if (row.rewards) {
    for (const { at, r } of row.rewards) out[at - row.responseStart] = out[at - row.responseStart]! + r;
    return out;
  }
  for (let i = out.length - 1; i >= 0; i--) {
    if (trained(row, i)) {
      out[i] = row.reward;
      break;
    }
  }
  return out;
}

/**
 * GAE on one row. `values`: V_old on its response tokens. Untrained tokens (response mask 0)
 * are skipped by the recursion and get A = R = 0.
 */
export function gaeRow(row: TrainRow, values: ArrayLike<number>, gamma: number, lambda: number): { advantages: Float64Array; returns: Float64Array } {
  const rewards = rewardsOnTokens(row);
  const n = rewards.length;
  const advantages = new Float64Array(n), returns = new Float64Array(n);
  let nextValue = 0, nextAdvantage = 0;
  for (let i = n - 1; i >= 0; i--) {
    if (!trained(row, i)) continue;
    const v = values[i]!;
    const delta = rewards[i]! + gamma * nextValue - v;
    const a = delta + gamma * lambda * nextAdvantage;
    advantages[i] = a;
    returns[i] = a + v;
    nextValue = v;
    nextAdvantage = a;
  }
  return { advantages, returns };
}

/**
 * GRPO's advantage of each row: its reward against the rewards of its group, taken over
 * `pool` (the rows that make up the groups; every row of `rows` must be in a group of it).
 */
export function grpoAdvantages(rows: readonly TrainRow[], pool: readonly TrainRow[], divideByStd: boolean): number[] {
  const groups = new Map<string, number[]>();
  for (const row of pool) {
    if (row.group === undefined) continue;
    const rewards = groups.get(row.group) ?? [];
    rewards.push(row.reward);
    groups.set(row.group, rewards);
  }
  return rows.map((row) => {
    const rewards = row.group === undefined ? undefined : groups.get(row.group);
    if (!rewards) throw new UserError(`--advantage grpo needs a "group" on every row (the rows of one context); ${row.origin} has none`);
    const { mean, std } = meanStd(rewards, true);
    return divideByStd ? (row.reward - mean) / (std + GRPO_STD_EPS) : row.reward - mean;
  });
}

/**
 * The rows whose GRPO group (over `pool`) has rewards that differ: a group whose rewards are
 * all equal (a group of one included) gives every row A = 0, so it carries no signal and is
 * dropped from the step, as DAPO's dynamic sampling and OpenClaw-RL's nonzero-std filter do.
 * Rows without a group are kept (the batch refuses them with its own message).
 */
export function informativeRows<R extends TrainRow>(rows: readonly R[], pool: readonly TrainRow[]): R[] {
  const spread = new Map<string, { min: number; max: number }>();
  for (const row of pool) {
    if (row.group === undefined) continue;
    const s = spread.get(row.group) ?? { min: Infinity, max: -Infinity };
    spread.set(row.group, { min: Math.min(s.min, row.reward), max: Math.max(s.max, row.reward) });
  }
  return rows.filter((row) => {
    const s = row.group === undefined ? undefined : spread.get(row.group);
    return !s || s.max > s.min;
  });
}

/** The rows a GRPO run cannot train: those without a group (a one-line error), or null. */
export function missingGroup(rows: readonly TrainRow[]): string | null {
  const without = rows.filter((r) => r.group === undefined);
  if (!without.length) return null;
  return `--advantage grpo needs a "group" on every row (the rows of one context): ${without.length} of ${rows.length} have none, the first ${without[0]!.origin}`;
}

/** Mean and standard deviation: population (÷ n), or with Bessel's correction (÷ (n − 1); 0 for one value). */
export function meanStd(values: ArrayLike<number>, bessel = false): { mean: number; std: number } {
  const n = values.length;
  if (n === 0) return { mean: 0, std: 0 };
  let sum = 0;
  for (let i = 0; i < n; i++) sum += values[i]!;
  const mean = sum / n;
  let sq = 0;
  for (let i = 0; i < n; i++) sq += (values[i]! - mean) ** 2;
  const divisor = bessel ? n - 1 : n;
  return { mean, std: divisor > 0 ? Math.sqrt(sq / divisor) : 0 };
}

/** The entries of a grid where the mask is set. */
function masked(grid: Float32Array, mask: Float32Array): number[] {
  const out: number[] = [];
  mask.forEach((m, k) => m !== 0 && out.push(grid[k]!));
  return out;
}

/** Standardises a [B, T] grid over its masked entries in place: (A − mean) / (std + 1e-8). */
export function normalizeMasked(grid: Float32Array, mask: Float32Array): void {
  const { mean, std } = meanStd(masked(grid, mask));
  mask.forEach((m, k) => {
    if (m !== 0) grid[k] = (grid[k]! - mean) / (std + NORMALIZE_EPS);
  });
}

/** 1 − Var(R − V_old) / Var(R) over the masked tokens; undefined when Var(R) is 0. */
export function explainedVariance(returns: Float32Array, valuesOld: Float32Array, mask: Float32Array): number | undefined {
  const r = masked(returns, mask);
  const residual: number[] = [];
  mask.forEach((m, k) => m !== 0 && residual.push(returns[k]! - valuesOld[k]!));
  const varR = meanStd(r).std ** 2;
  return varR > 0 ? 1 - meanStd(residual).std ** 2 / varR : undefined;
}
