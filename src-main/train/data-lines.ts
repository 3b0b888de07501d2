/**
 * `--data` lines (docs/design.md §Command line): parsing a line into a training row, reading a
 * whole file, and writing a row back as a line (what `dataset.jsonl` holds), so that every
 * field a line can carry survives the round trip a resumed run makes through that file.
 *
 * Which rows are kept follows the estimator (docs/design.md §Advantage estimators): the
 * `reward` estimator keeps today's rules (rewards ±1 or 0, token `rewards` summing to one of
 * those when they stand in for it, rows without signal for the method left out); `grpo` and `gae` take any finite reward and keep every row, since a row with
 * reward 0 is part of its group's baseline and still trains the value head.
 */
import type { AdvantageEstimator } from '../../src-shared/rollout.js';
import { overLengthReason } from '../../src-shared/training.js';
import { signalKind } from '../../src-shared/training-methods.js';
import { UserError } from '../../src-shared/types.js';
import { readJsonLines } from '../store/jsonl-file.js';
import { fitRow, rowSelected, sameTokens, skip, type RowSet, type TrainRow } from './batches.js';
import type { TrainMethod } from './training-step.js';

function lineError(where: string, msg: string): never {
  throw new UserError(`${where}: ${msg}`);
}

function tokenIds(value: unknown, key: string, where: string, vocabSize: number): number[] {
  if (!Array.isArray(value) || value.length === 0) lineError(where, `${key} must be a non-empty array of token ids`);
  for (const id of value as unknown[]) {
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= vocabSize) {
      lineError(where, `${key} holds ${JSON.stringify(id)}, not a token id in [0, ${vocabSize})`);
    }
  }
  return value as number[];
}

function responseStart(value: unknown, key: string, ids: number[], where: string): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) >= ids.length) {
    lineError(where, `${key} must be an integer in [1, ${ids.length - 1}] (the response needs at least one token and one token before it), got ${JSON.stringify(value)}`);
  }
  return value as number;
}

const given = (v: unknown) => v !== undefined && v !== null;

/** `response_mask`: one 0 or 1 per response token, at least one 1. */
function responseMask(value: unknown, n: number, where: string): number[] {
  if (!Array.isArray(value) || value.length !== n || !value.every((x) => x === 0 || x === 1)) {
    lineError(where, `response_mask must be ${n} values of 0 or 1 (one per response token)`);
  }
  if (!value.includes(1)) lineError(where, 'response_mask leaves no response token to train');
  return value as number[];
}

/** `rewards`: [{at, r}], each `at` a trained response position of input_ids, at most once. */
function tokenRewards(value: unknown, row: Pick<TrainRow, 'inputIds' | 'responseStart' | 'responseMask'>, where: string): { at: number; r: number }[] {
  if (!Array.isArray(value)) lineError(where, 'rewards must be an array of {"at": position, "r": reward}');
  const seen = new Set<number>();
  return value.map((x: unknown) => {
    const { at, r } = (x ?? {}) as { at?: unknown; r?: unknown };
    if (typeof r !== 'number' || !Number.isFinite(r)) lineError(where, `rewards: r must be a finite number, got ${JSON.stringify(r)}`);
    if (!Number.isInteger(at) || (at as number) < row.responseStart || (at as number) >= row.inputIds.length) {
      lineError(where, `rewards: at must be a response position in [${row.responseStart}, ${row.inputIds.length - 1}], got ${JSON.stringify(at)}`);
    }
    const k = at as number;
    if (row.responseMask && !row.responseMask[k - row.responseStart]) lineError(where, `rewards: position ${k} is masked out by response_mask, so it does not train`);
    if (seen.has(k)) lineError(where, `rewards: position ${k} appears twice`);
    seen.add(k);
    return { at: k, r };
  });
}

function parseReward(o: Record<string, unknown>, row: Omit<TrainRow, 'origin'>, where: string, method: TrainMethod, estimator: AdvantageEstimator): void {
  if (given(o.rewards)) row.rewards = tokenRewards(o.rewards, row, where);
  if (given(o.reward)) {
    if (estimator === 'reward' && o.reward !== 1 && o.reward !== -1 && o.reward !== 0) lineError(where, `reward must be 1, -1 or 0, got ${JSON.stringify(o.reward)}`);
    if (typeof o.reward !== 'number' || !Number.isFinite(o.reward)) lineError(where, `reward must be a finite number, got ${JSON.stringify(o.reward)}`);
    row.reward = o.reward;
  } else if (row.rewards) {
    row.reward = row.rewards.reduce((s, x) => s + x.r, 0);
    // Their sum is the row's reward, so the estimator's rule on a reward applies to it.
    if (estimator === 'reward' && row.reward !== 1 && row.reward !== -1 && row.reward !== 0) {
      lineError(where, `with the reward estimator, rewards must sum to 1, -1 or 0 (the row's reward), got ${row.reward}`);
    }
  } else if (signalKind(method) === 'reward') {
    // A method that learns from rewards alone has nothing else to train a line on.
    lineError(where, estimator === 'reward' ? `${method} needs "reward" (1, -1 or 0) on every line` : `${method} needs "reward" or "rewards" on every line`);
  }
}

function parseTeacher(o: Record<string, unknown>, row: Omit<TrainRow, 'origin'>, where: string, method: TrainMethod, vocabSize: number): void {
  if (given(o.teacher_input_ids)) {
    const tIds = tokenIds(o.teacher_input_ids, 'teacher_input_ids', where, vocabSize);
    const tStart = responseStart(o.teacher_response_start, 'teacher_response_start', tIds, where);
    if (!sameTokens(tIds.slice(tStart), row.inputIds.slice(row.responseStart))) {
      lineError(where, `the teacher's response tokens (teacher_input_ids from teacher_response_start, ${tIds.length - tStart} tokens) differ from the student's (${row.inputIds.length - row.responseStart} tokens); they must be the same tokens`);
    }
    row.teacher = { inputIds: tIds, responseStart: tStart };
  } else if (o.teacher_response_start !== undefined) {
    lineError(where, 'teacher_response_start without teacher_input_ids');
  } else if (signalKind(method) === 'hint') {
    lineError(where, `${method} needs "teacher_input_ids" and "teacher_response_start" on every line`);
  }
  if (signalKind(method) === 'both' && !row.teacher && !given(o.reward) && !given(o.rewards)) {
    lineError(where, `${method} needs "reward", or "teacher_input_ids" + "teacher_response_start", or both`);
  }
}

/**
 * Parses one `--data` line. Formats (docs/design.md §Command line): rl needs `reward` (or, for
 * grpo and gae, token `rewards`); opd needs `teacher_input_ids` + `teacher_response_start`
 * whose response tokens equal the student's; combine takes both (either may be absent on a
 * line: no teacher means teacher = old, no reward means r = 0). Optional everywhere:
 * `old_logprobs` (one per response token), `response_mask`, `group`, `kept` and `session_id`
 * (the database session a row came from; a held-out one is refused).
 */
export function parseDataLine(obj: unknown, where: string, method: TrainMethod, vocabSize: number, estimator: AdvantageEstimator = 'reward'): Omit<TrainRow, 'origin'> {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) lineError(where, 'expected a JSON object');
  const o = obj as Record<string, unknown>;
  const inputIds = tokenIds(o.input_ids, 'input_ids', where, vocabSize);
  const start = responseStart(o.response_start, 'response_start', inputIds, where);
  const n = inputIds.length - start;
  const row: Omit<TrainRow, 'origin'> = { inputIds, responseStart: start, reward: 0 };
  if (given(o.response_mask)) row.responseMask = responseMask(o.response_mask, n, where);
  parseReward(o, row, where, method, estimator);
  parseTeacher(o, row, where, method, vocabSize);
  if (given(o.old_logprobs)) {
    const lp = o.old_logprobs;
    if (!Array.isArray(lp) || lp.length !== n || !lp.every((x) => typeof x === 'number' && Number.isFinite(x) && x <= 0)) {
      lineError(where, `old_logprobs must be ${n} finite log-probs ≤ 0 (one per response token)`);
    }
    row.oldLogprobs = lp as number[];
  }
  if (given(o.group)) {
    if (typeof o.group !== 'string' && !(typeof o.group === 'number' && Number.isFinite(o.group))) lineError(where, `group must be a string or a number, got ${JSON.stringify(o.group)}`);
    row.group = String(o.group);
  }
  if (o.kept === true) row.kept = true;
  if (typeof o.session_id === 'string') row.sessionId = o.session_id;
  return row;
}

/** Reads a `--data` file; every problem names the file and line. */
export function rowsFromJsonl(file: string, method: TrainMethod, vocabSize: number, maxLength: number, estimator: AdvantageEstimator = 'reward'): RowSet {
  const set: RowSet = { rows: [], skipped: {}, truncated: 0 };
  for (const { value: obj, where } of readJsonLines(file).lines) {
    const row: TrainRow = { ...parseDataLine(obj, where, method, vocabSize, estimator), origin: where };
    if (estimator === 'reward' && !rowSelected(method, row.reward, row.teacher !== undefined, row.kept)) {
      skip(set, signalKind(method) === 'reward' ? 'reward 0' : 'no signal');
      continue;
    }
    const fit = fitRow(row, maxLength);
    if (fit === 'over') {
      skip(set, overLengthReason(maxLength));
      continue;
    }
    if (fit === 'cut') set.truncated++;
    set.rows.push(row);
  }
  return set;
}

/** A row as a `--data` line (what dataset.jsonl holds). */
export function rowToLine(row: TrainRow): Record<string, unknown> {
  const line: Record<string, unknown> = { input_ids: row.inputIds, response_start: row.responseStart, reward: row.reward };
  if (row.rewards) line.rewards = row.rewards;
  if (row.responseMask) line.response_mask = row.responseMask;
  if (row.group !== undefined) line.group = row.group;
  if (row.teacher) {
    line.teacher_input_ids = row.teacher.inputIds;
    line.teacher_response_start = row.teacher.responseStart;
  }
  if (row.oldLogprobs) line.old_logprobs = row.oldLogprobs;
  if (row.kept) line.kept = true;
  if (row.sessionId !== undefined) line.session_id = row.sessionId;
  return line;
}
