/**
 * Held-out samples as evaluation measures them (docs/design.md §Evaluation), shared by the
 * trainer's in-run evaluation (./train-eval.ts) and `hindsight eval` (src-main/eval/).
 *
 * A sample becomes an EvalRow the way ./batches.ts makes a training row: the context and
 * reply through the model's chat template (the student), the hint-enhanced context followed
 * by the SAME reply tokens (the teacher, when the sample has a hint), and the user's repair
 * on the plain context (when there is one); the same context window (./fit-max-length.ts),
 * and a sample whose reply does not fit is left out, counted. Then any scorer of token
 * spans (the training step's forward pass, or ./lora-scorer.ts) gives each row's reply-token
 * log-probs, and `sampleScores` reduces them to the per-sample numbers src-shared/eval-report.ts
 * turns into a report.
 */
import { overLengthReason } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';
import type { SampleScore } from '../../src-shared/eval-report.js';
import type { TrainingSample } from '../../src-shared/views.js';
import type { ChatMessage, ChatTokenizer } from '../model/tokenizer.js';
import { enhancedContext } from '../pipeline/hint-context.js';
import { withLessons } from '../../src-shared/lessons.js';
import { EMPTY_REPLY, fitRow, isEmptyReply, offered, padBatch, responseValues, templateSkipReason, trainedReply, type TokenSpan, type TrainRow } from './batches.js';
import { windowedResponse } from './fit-max-length.js';
import type { StepBatch } from './training-step.js';

export interface EvalRow {
  /** `<session id>/<response turn>`. */
  key: string;
  sessionId: string;
  reward: number;
  student: TokenSpan;
  teacher?: TokenSpan;
  repair?: TokenSpan;
}

export interface EvalRowSet {
  rows: EvalRow[];
  /** Samples not measured, by reason. */
  skipped: Record<string, number>;
}

/** Reply-token log-probs of each span, in order, under one model. */
export type SpanScorer = (spans: readonly TokenSpan[]) => Promise<Float32Array[]>;

const plain = (messages: readonly ChatMessage[]): ChatMessage[] => messages.map((m) => ({ ...m }));

/** The token ids and reply start of a span (a rendered span carries more). */
const idsOf = (span: TokenSpan): TokenSpan => ({ inputIds: span.inputIds, responseStart: span.responseStart });

/**
 * Student and teacher of one sample, windowed as training windows them (./fit-max-length.ts,
 * ./batches.ts rowsFromSamples); null when either does not fit `maxLength` (a reply is never cut).
 */
function studentAndTeacher(s: TrainingSample, tokenizer: ChatTokenizer, maxLength: number, lessons: string): Pick<EvalRow, 'student' | 'teacher'> | null {
  const reply = trainedReply(s);
  const own = windowedResponse(tokenizer, withLessons(plain(s.messages), lessons), reply, maxLength, offered(s));
  if (!own.fits) return null;
  const student = idsOf(own.span);
  if (s.hint === null) return { student };
  const hinted = windowedResponse(tokenizer, plain(enhancedContext(s.messages, s.hint)), reply, maxLength, offered(s));
  if (!hinted.fits) return null;
  const t = hinted.span;
  const row: TrainRow = {
    ...student, reward: s.reward, origin: '',
    teacher: { inputIds: [...t.inputIds.slice(0, t.responseStart), ...student.inputIds.slice(student.responseStart)], responseStart: t.responseStart },
  };
  // As in training: the teacher carries the student's reply tokens, so a token at the
  // boundary may still need the token-wise cut.
  if (fitRow(row, maxLength) === 'over') return null;
  return { student: idsOf(row), teacher: row.teacher! };
}

/** The repair on the sample's plain context, windowed the same way; null when it does not fit. */
function repairSpan(s: TrainingSample, tokenizer: ChatTokenizer, maxLength: number, lessons: string): TokenSpan | null {
  const windowed = windowedResponse(tokenizer, withLessons(plain(s.messages), lessons), s.repair!, maxLength, offered(s));
  return windowed.fits ? idsOf(windowed.span) : null;
}

/**
 * The rows of the samples some metric can use: labelled ±1, hinted, or repaired. The rest
 * are counted in `skipped` with the reason, as are replies a template cannot place.
 *
 * With `lessons` (docs/design.md §Lessons), the student's and the repair's contexts carry them as
 * their system prompt (src-shared/lessons.ts withLessons); the teacher's stays the base model's
 * context with the hint, so a lessons row's hint gap compares with the same teacher as the base's.
 */
export function evalRowsFromSamples(samples: readonly TrainingSample[], tokenizer: ChatTokenizer, maxLength: number, options: { lessons?: string } = {}): EvalRowSet {
  const lessons = options.lessons ?? '';
  const set: EvalRowSet = { rows: [], skipped: {} };
  const skip = (why: string) => (set.skipped[why] = (set.skipped[why] ?? 0) + 1);
  for (const s of samples) {
    const repaired = s.repair !== null && s.repair.trim() !== '';
    if (s.reward !== 1 && s.reward !== -1 && s.hint === null && !repaired) {
      skip('neither labelled ±1, hinted nor repaired');
      continue;
    }
    if (isEmptyReply(s)) {
      skip(EMPTY_REPLY);
      continue;
    }
    try {
      const spans = studentAndTeacher(s, tokenizer, maxLength, lessons);
      if (!spans) {
        skip(overLengthReason(maxLength));
        continue;
      }
      const repair = repaired ? repairSpan(s, tokenizer, maxLength, lessons) : null;
      set.rows.push({ key: `${s.sessionId}/${s.responseTurn}`, sessionId: s.sessionId, reward: s.reward, ...spans, ...(repair ? { repair } : {}) });
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      skip(templateSkipReason(err));
    }
  }
  return set;
}

/** Scores spans in padded batches of `batchSize` through `run` (a [B, T] log-prob grid per batch). */
export async function scoreInBatches(spans: readonly TokenSpan[], batchSize: number, run: (batch: StepBatch) => Promise<Float32Array>): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (let i = 0; i < spans.length; i += batchSize) {
    const chunk = spans.slice(i, i + batchSize);
    const batch = padBatch(chunk);
    const grid = await run(batch);
    chunk.forEach((span, b) => out.push(responseValues(grid, batch.seqLen, b, span).slice()));
  }
  return out;
}

const meanOf = (values: Float32Array) => values.reduce((a, x) => a + x, 0) / values.length;

/** The teacher's reply log-probs (the base model on the hint-enhanced context), per row; undefined without a hint. */
export async function teacherLogprobs(rows: readonly EvalRow[], base: SpanScorer): Promise<(Float32Array | undefined)[]> {
  const hinted = rows.filter((r) => r.teacher);
  const scored = await base(hinted.map((r) => r.teacher!));
  const byRow = new Map(hinted.map((r, i) => [r, scored[i]!]));
  return rows.map((r) => byRow.get(r));
}

/**
 * One model's SampleScore per row: the mean reply log-prob, the repair's, and the mean
 * teacher − student gap where the row has a teacher. `teacher` is teacherLogprobs' answer.
 */
export async function sampleScores(rows: readonly EvalRow[], model: SpanScorer, teacher: readonly (Float32Array | undefined)[]): Promise<SampleScore[]> {
  const originals = await model(rows.map((r) => r.student));
  const withRepair = rows.filter((r) => r.repair);
  const repairs = new Map(withRepair.map((r, i) => [r, i]));
  const repairLp = await model(withRepair.map((r) => r.repair!));
  return rows.map((r, i) => {
    const lp = originals[i]!;
    const score: SampleScore = { key: r.key, reward: r.reward, original: meanOf(lp) };
    const j = repairs.get(r);
    if (j !== undefined) score.repair = meanOf(repairLp[j]!);
    const t = teacher[i];
    if (t) {
      let gap = 0;
      for (let k = 0; k < lp.length; k++) gap += t[k]! - lp[k]!;
      score.hintGap = gap / lp.length;
    }
    return score;
  });
}
