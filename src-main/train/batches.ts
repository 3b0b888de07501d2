/**
 * Training rows and batches (docs/design.md §Advantages).
 *
 * A row is one sample, pre-tokenised: the student sequence (context + reply) with where the
 * reply begins, its reward, optionally the teacher sequence (the hint-enhanced context
 * followed by the SAME reply tokens) and optionally the reply's rollout log-probs. Rows come
 * from the database (the Workspace's training samples through the chat template) or from a
 * `--data` JSONL file in exactly the line format of docs/design.md §Command line (./data-lines.ts); the trainer writes the rows it
 * uses as `dataset.jsonl` in that format, so a run can be repeated or resumed from the file.
 *
 * Which rows a method trains on (the "masked out" samples of docs/design.md §At-least-one are simply left out,
 * which gives the same token mean): the rows with signal for the method
 * (pipeline/training-signal.ts), and rows kept by the at-least-one rule (A = 0):
 *   rl       reward ±1
 *   opd      samples with a teacher (a hint)
 *   combine  reward ±1 or a teacher; a hint without ±1 uses r = 0, ±1 without a hint uses
 *            teacher = old (no OPD term)
 *
 * Length (docs/design.md §Training runs): a row from the database keeps its system turn and
 * as many latest turns as fit `maxLength` tokens (./fit-max-length.ts). A `--data` row, which
 * has no turns, loses context tokens from the left (the first token, usually BOS, is kept).
 * A reply is never cut: a sample whose reply does not fit is skipped and counted under
 * overLengthReason, which the trainer reports. Student and teacher keep the same reply tokens.
 *
 * Padding is on the right; position ids count each row's real tokens from 0.
 */
import { overLengthReason } from '../../src-shared/training.js';
import { methodRecord, MISSING_SIGNAL, signalKind } from '../../src-shared/training-methods.js';
import { UserError } from '../../src-shared/types.js';
import type { TrainingMessage, TrainingSample } from '../../src-shared/views.js';
import { ToolCallsNotWritten, type ChatMessage, type ChatTokenizer } from '../model/tokenizer.js';
import { ChatTemplateError } from '../model/template-interpreter.js';
import { enhancedContext } from '../pipeline/hint-context.js';
import { hasSignalFor } from '../pipeline/training-signal.js';
import { windowedResponse } from './fit-max-length.js';
import type { StepBatch, TrainMethod } from './training-step.js';

export interface TokenSpan {
  inputIds: number[];
  responseStart: number;
}

export interface TrainRow extends TokenSpan {
  /**
   * +1, −1 or 0 (no reward / neutral) for the `reward` estimator; any finite number for `grpo`
   * and `gae`, where a row given only token `rewards` has their sum here.
   */
  reward: number;
  /**
   * Rewards on tokens (docs/design.md §Advantage estimators): `at` is a position of inputIds in
   * the trained response. Absent: the `gae` estimator puts `reward` on the last trained token.
   */
  rewards?: { at: number; r: number }[];
  /**
   * 0/1 per response token (from responseStart): 0 marks a token that does not train, as the
   * tool-turn tokens inside a multi-turn rollout. Absent: every response token trains.
   */
  responseMask?: number[];
  /** The rows of one context (a rollout's K samples): GRPO compares a row with its group. */
  group?: string;
  teacher?: TokenSpan;
  /** Rollout log-probs of the reply tokens (one per token), used as `old` when present. */
  oldLogprobs?: number[];
  /**
   * Rollout log-probs that are not the step's own arithmetic (an on-policy run on a quantised
   * base: its rollouts' MatMulNBits rounds the activations to int8, the step's does not; docs/
   * design.md §QLoRA): `old` is then the policy's own at the start of the step, as for a row
   * without any, and these only measure how far the rollouts lay from it (the log's `drift`).
   */
  rolloutLogprobs?: number[];
  /** Kept by the at-least-one rule (trained with A = 0 even though it has no signal). */
  kept?: boolean;
  /** Where the row came from, for messages: `file:line` or `session/turn`. */
  origin: string;
  /**
   * The session of a row from the database, written to dataset.jsonl as `session_id`, so a
   * run (and a resume) can check that no row comes from a held-out session.
   */
  sessionId?: string;
}

export interface RowSet {
  rows: TrainRow[];
  /** Why rows were left out, with counts. */
  skipped: Record<string, number>;
  /** Rows whose context was cut to fit (turns dropped, or tokens cut from the left). */
  truncated: number;
  /** Rows trained on their live-capture rollout, with its log-probs as `old` (see rolloutSpan). */
  fromRollout?: number;
}

const responseLength = (s: TokenSpan) => s.inputIds.length - s.responseStart;

export function sameTokens(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Whether a method trains on this row (see the module comment). */
export function rowSelected(method: TrainMethod, reward: number, hasTeacher: boolean, kept = false): boolean {
  return kept || hasSignalFor(method, reward, hasTeacher);
}

/** The template options of a sample's conversation: the tools it offered (TrainingSample.tools). */
export function offered(s: Pick<TrainingSample, 'tools'>): { tools?: unknown[] } {
  return s.tools ? { tools: s.tools } : {};
}

/**
 * The reply as training and evaluation render it (docs/design.md §Tools offered): its text, and
 * those of its tool calls whose tool the conversation offered. A call to a tool the prompt never
 * listed (a ChatGPT or Claude export's web search or code runner, whose definitions the export
 * does not carry) would teach the model to call tools nobody offers it, so it is left out.
 */
export function trainedReply(s: Pick<TrainingSample, 'response' | 'tools'>): TrainingMessage {
  const calls = s.response.tool_calls ?? [];
  if (!calls.length) return s.response;
  const offeredNames = new Set((s.tools ?? []).map((t) => t.function.name));
  const kept = calls.filter((c) => offeredNames.has(c.function.name));
  const { tool_calls: _calls, ...text } = s.response;
  return kept.length ? { ...text, tool_calls: kept } : text;
}

/** A reply that leaves training nothing: no text, and no call to a tool the conversation offered. */
export const EMPTY_REPLY = 'nothing to train in the reply (no text, and no call to a tool the conversation offered)';
export function isEmptyReply(s: Pick<TrainingSample, 'response' | 'tools'>): boolean {
  const reply = trainedReply(s);
  return !reply.content.trim() && !reply.tool_calls?.length;
}

export function skip(set: RowSet, reason: string): void {
  set.skipped[reason] = (set.skipped[reason] ?? 0) + 1;
}

/**
 * Why the chat template leaves a sample without a row (the tokenizer's UserError): the
 * template's own refusal (`raise_exception`: Mistral's tool-call ids of 9 characters, roles
 * that must alternate), another failure to render, or a reply that does not follow its prompt.
 */
export function templateSkipReason(err: UserError): string {
  if (err instanceof ToolCallsNotWritten) return 'the chat template does not write tool calls';
  if (!(err instanceof ChatTemplateError)) return 'the chat template does not place the reply after its prompt';
  return err.raised !== undefined ? `the chat template refuses the conversation: ${err.raised.trim()}` : `the chat template fails on the conversation: ${err.detail.message.trim()}`;
}

// ── rows from the database ─────────────────────────────────────────────────────────────

/**
 * The Workspace's training samples (the at-least-one rule already applied there, for the
 * run's method) through the model's chat template. The teacher is the enhanced context
 * (docs/design.md §Hint prompt) followed by the student's own reply tokens, so both score the very same tokens.
 */
export function rowsFromSamples(samples: readonly TrainingSample[], tokenizer: ChatTokenizer, method: TrainMethod, maxLength: number): RowSet {
  const set: RowSet = { rows: [], skipped: {}, truncated: 0 };
  for (const s of samples) {
    const origin = `${s.sessionId}/${s.responseTurn}`;
    if (isEmptyReply(s)) {
      skip(set, EMPTY_REPLY);
      continue;
    }
    const wantTeacher = s.hint !== null && methodRecord(method).uses.hint;
    if (!rowSelected(method, s.reward, wantTeacher, s.keptByAtLeastOne)) {
      skip(set, MISSING_SIGNAL[signalKind(method)]);
      continue;
    }
    // Spread into plain objects: templates read extra keys (tool_calls, name) from them.
    const messages: ChatMessage[] = s.messages.map((m) => ({ ...m }));
    const rollout = rolloutSpan(s, tokenizer, messages, maxLength);
    // A template may render a reply that does not continue its own generation prompt (Qwen3
    // without thinking, given a reply that contains <think>), or refuse the conversation
    // (Mistral's, a tool call whose id is not 9 characters): that one sample cannot be
    // trained, the rest of the run can.
    let spans: ReturnType<typeof windowedSpans>;
    try {
      spans = windowedSpans(s, tokenizer, messages, rollout, wantTeacher, maxLength);
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      skip(set, templateSkipReason(err));
      continue;
    }
    if (!spans) {
      skip(set, overLengthReason(maxLength));
      continue;
    }
    const { student, teacher } = spans;
    const row: TrainRow = { ...student, reward: s.reward, origin, sessionId: s.sessionId, ...(s.keptByAtLeastOne ? { kept: true } : {}) };
    if (rollout) {
      row.oldLogprobs = rollout.logprobs;
      set.fromRollout = (set.fromRollout ?? 0) + 1;
    }
    if (teacher) {
      row.teacher = { inputIds: [...teacher.inputIds.slice(0, teacher.responseStart), ...student.inputIds.slice(student.responseStart)], responseStart: teacher.responseStart };
    }
    // The teacher carries the student's reply tokens, which may differ from its own by a
    // token at the boundary: the token-wise cut is the last resort for that one token.
    if (fitRow(row, maxLength) !== 'fits' || spans.cut) set.truncated++;
    set.rows.push(row);
  }
  return set;
}

/**
 * The student's and the teacher's spans of a sample within the window (./fit-max-length.ts),
 * or null when either does not fit (its reply is too long, or its system turn).
 */
function windowedSpans(
  s: TrainingSample, tokenizer: ChatTokenizer, messages: ChatMessage[], rollout: TokenSpan | null, wantTeacher: boolean, maxLength: number,
): { student: TokenSpan; teacher?: TokenSpan; cut: boolean } | null {
  const reply = trainedReply(s);
  const own = rollout ? { fits: true as const, span: rollout, cut: false } : windowedResponse(tokenizer, messages, reply, maxLength, offered(s));
  if (!own.fits) return null;
  if (!wantTeacher) return { student: own.span, cut: own.cut };
  const hinted = windowedResponse(tokenizer, enhancedContext(s.messages, s.hint!).map((m) => ({ ...m })), reply, maxLength, offered(s));
  if (!hinted.fits) return null;
  return { student: own.span, teacher: hinted.span, cut: own.cut || hinted.cut };
}

/**
 * A sample captured live from the local model is trained on the very tokens it generated,
 * with their rollout log-probs as `old` (docs/design.md §Advantages), when — and only when — its context,
 * rendered through this tokenizer's chat template with the generation prompt and the tools the
 * request offered, gives exactly the prompt ids the model generated from. Then the row is prompt
 * ids + generated ids (the end-of-sequence token included when generation stopped on it, so its
 * log-prob trains too; a tool call as the very tokens the model wrote). Anything else (a context
 * window cut the prompt, another template or tokenizer, no rollout) gives null: the reply is
 * rendered from its text and tool calls, and old comes from the policy. The workspace attaches a
 * rollout only for the model being trained (TrainingSample.rollout), and only while the stored
 * reply is the generated one.
 */
export function rolloutSpan(s: TrainingSample, tokenizer: ChatTokenizer, messages: ChatMessage[], maxLength = Infinity): (TokenSpan & { logprobs: number[] }) | null {
  const r = s.rollout;
  // A rollout longer than the window cannot be cut by turns: the reply's text is windowed instead.
  if (!r || r.tokens.length === 0 || r.promptIds.length + r.tokens.length > maxLength || r.tokens.length !== r.logprobs.length || !r.logprobs.every((x) => Number.isFinite(x) && x <= 0)) return null;
  const prompt = tokenizer.encodeChat(messages, { addGenerationPrompt: true, ...offered(s) });
  if (!sameTokens(prompt, r.promptIds)) return null;
  return { inputIds: [...r.promptIds, ...r.tokens], responseStart: r.promptIds.length, logprobs: [...r.logprobs] };
}

// ── truncation ─────────────────────────────────────────────────────────────────────────

function cutContext(span: TokenSpan, maxLength: number): TokenSpan {
  const prompt = span.inputIds.slice(0, span.responseStart);
  const response = span.inputIds.slice(span.responseStart);
  const budget = maxLength - response.length;
  const head = prompt.length <= budget ? prompt : [prompt[0]!, ...prompt.slice(prompt.length - (budget - 1))];
  return { inputIds: [...head, ...response], responseStart: head.length };
}

/**
 * Fits a row into `maxLength` tokens in place by cutting context from the left (see the
 * module comment): 'fits' as it was, 'cut', or 'over' (left unchanged) when its reply
 * needs `maxLength` tokens or more, since a reply is never cut.
 */
export function fitRow(row: TrainRow, maxLength: number): 'fits' | 'cut' | 'over' {
  if (maxLength < 2) throw new UserError(`max length must be at least 2 tokens, got ${maxLength}`);
  const tooLong = row.inputIds.length > maxLength || (row.teacher !== undefined && row.teacher.inputIds.length > maxLength);
  if (!tooLong) return 'fits';
  if (responseLength(row) >= maxLength) return 'over';
  const before = row.responseStart;
  Object.assign(row, cutContext(row, maxLength));
  const shift = row.responseStart - before;
  if (row.rewards) row.rewards = row.rewards.map((x) => ({ at: x.at + shift, r: x.r }));
  if (row.teacher) row.teacher = cutContext(row.teacher, maxLength);
  return 'cut';
}

// ── batches ────────────────────────────────────────────────────────────────────────────

/**
 * Right-padded [B, T] batch of spans; log-prob, advantage and old grids start at zero. The
 * response mask is 1 on the response tokens a span trains (all of them unless it has its own
 * `responseMask`).
 */
export function padBatch(spans: readonly (TokenSpan & { responseMask?: readonly number[] })[]): StepBatch {
  const B = spans.length;
  const T = Math.max(...spans.map((s) => s.inputIds.length));
  const batch: StepBatch = {
    batch: B,
    seqLen: T,
    inputIds: new BigInt64Array(B * T),
    attentionMask: new BigInt64Array(B * T),
    positionIds: new BigInt64Array(B * T),
    responseMask: new Float32Array(B * T),
    oldLogprobs: new Float32Array(B * T),
    advantages: new Float32Array(B * T),
  };
  spans.forEach((s, b) => {
    s.inputIds.forEach((id, t) => {
      batch.inputIds[b * T + t] = BigInt(id);
      batch.attentionMask[b * T + t] = 1n;
      batch.positionIds[b * T + t] = BigInt(t);
      if (t >= s.responseStart && (!s.responseMask || s.responseMask[t - s.responseStart])) batch.responseMask[b * T + t] = 1;
    });
  });
  return batch;
}

/** A row's response-token values read off a [B, T] grid. */
export function responseValues(grid: Float32Array, seqLen: number, b: number, span: TokenSpan): Float32Array {
  const from = b * seqLen + span.responseStart;
  return grid.subarray(from, from + responseLength(span));
}

/** Deterministic epoch order: a Fisher–Yates shuffle from (seed, epoch). */
export function epochOrder(n: number, seed: number, epoch: number, random: (seed: number) => () => number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  const rand = random((Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(epoch + 1, 0x85ebca6b)) >>> 0);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/** The rows of step `k` (0-based): batches never straddle epochs; each epoch reshuffles. */
export function rowsForStep(rows: readonly TrainRow[], batchSize: number, step: number, seed: number, random: (seed: number) => () => number): { rows: TrainRow[]; epoch: number } {
  const perEpoch = Math.ceil(rows.length / batchSize);
  const epoch = Math.floor(step / perEpoch);
  const j = step % perEpoch;
  const order = epochOrder(rows.length, seed, epoch, random);
  return { rows: order.slice(j * batchSize, (j + 1) * batchSize).map((i) => rows[i]!), epoch };
}
