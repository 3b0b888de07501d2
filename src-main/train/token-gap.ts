/**
 * The numbers behind the token view (docs/design.md §Token view), computed with the trainer's
 * own code so that what the annotator shows is what a run would train on:
 *
 * - the row: ./batches.ts rowsFromSamples, which tokenises the context and the reply through
 *   the chat template, builds the teacher sequence (the hint-enhanced context followed by the
 *   SAME reply tokens) and truncates both as a run does;
 * - the hint gap: ./advantages.ts fillAdvantages for method opd, i.e. A_t = teacher_t − old_t,
 *   where old is the policy's log-prob (the base model's at a run's first step: a fresh
 *   adapter has B = 0) and teacher the base model's on the teacher sequence;
 * - the adapter change: the adapted model's log-prob minus the base model's, same tokens.
 *
 * The log-probs themselves come from whoever scores the rows (the app scores them in the
 * model worker); this module only lays them out, so it runs anywhere.
 */
import { UserError } from '../../src-shared/types.js';
import type { TrainingSample } from '../../src-shared/views.js';
import type { ChatTokenizer } from '../model/tokenizer.js';
import { fillAdvantages } from './advantages.js';
import { padBatch, responseValues, rowsFromSamples, type TrainRow } from './batches.js';

/** The trainer's row for one sample: the student span, and the teacher span when the sample has a hint. */
export function replyRow(sample: TrainingSample, tokenizer: ChatTokenizer, maxLength: number): { row: TrainRow; truncated: boolean } {
  // Kept: the row is built whatever the sample's signal (a run would select it by its hint or
  // reward; the view wants its tokens either way). opd: a hint gives the row its teacher.
  const set = rowsFromSamples([{ ...sample, keptByAtLeastOne: true }], tokenizer, 'opd', maxLength);
  const row = set.rows[0];
  if (!row) throw new UserError(`This reply cannot be scored: ${Object.keys(set.skipped).join(', ') || 'training leaves it out'}.`);
  return { row, truncated: set.truncated > 0 };
}

/** The reply's token ids (the student span's response). */
export function replyIds(row: TrainRow): number[] {
  return row.inputIds.slice(row.responseStart);
}

/**
 * teacher − student per reply token, as the trainer's advantages for method opd: `student`
 * is the policy's log-probs of the reply on the student span (old), `teacher` the base model's
 * on the teacher span.
 */
export function hintGap(row: TrainRow, student: ArrayLike<number>, teacher: ArrayLike<number>): Float32Array {
  if (!row.teacher) throw new Error('hintGap needs a row with a teacher (a hint)');
  const batch = padBatch([row]);
  const policyOld = new Float32Array(batch.batch * batch.seqLen);
  const old = responseValues(policyOld, batch.seqLen, 0, row);
  if (student.length !== old.length || teacher.length !== old.length) {
    throw new Error(`hintGap: ${old.length} reply tokens, got ${student.length} student and ${teacher.length} teacher log-probs`);
  }
  old.set(student);
  fillAdvantages({ method: 'opd', weights: { wOpd: 1, wRl: 0 }, rows: [row], batch, policyOld, teacher: [Float32Array.from(teacher)] });
  return responseValues(batch.advantages, batch.seqLen, 0, row).slice();
}

/** adapted − base per reply token, in fp32 like the trainer's grids. */
export function adapterChange(base: ArrayLike<number>, adapted: ArrayLike<number>): Float32Array {
  if (base.length !== adapted.length) throw new Error(`adapterChange: ${base.length} base and ${adapted.length} adapted log-probs`);
  return Float32Array.from(base, (b, i) => adapted[i]! - b);
}

/**
 * Each token's text as it appears in the reply: what it adds to the decoded text before it.
 * Decoding a token alone would lose a leading space (SentencePiece) or split a character
 * spread over several byte tokens; decoding a window of the tokens before it keeps both (an
 * unfinished character counts for the token that completes it). Special tokens (the end of
 * the turn) are shown as they are: they are trained like any other.
 */
export function tokenTexts(tokenizer: Pick<ChatTokenizer, 'decode'>, ids: readonly number[], window = 8): string[] {
  const settled = (from: number, to: number) => (to > from ? tokenizer.decode(ids.slice(from, to) as number[], false).replace(/\uFFFD+$/, '') : '');
  return ids.map((id, i) => {
    const from = Math.max(0, i - window);
    const before = settled(from, i);
    const upTo = settled(from, i + 1);
    return upTo.startsWith(before) ? upTo.slice(before.length) : tokenizer.decode([id], false);
  });
}
