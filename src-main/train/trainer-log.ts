/**
 * `trainer_log.jsonl`: one line per step, the shape LLaMA-Factory's callbacks made familiar
 * and the app's charts read (contract.ts TrainProgress). Every line also names the
 * execution provider that ran the step, so a log never hides a device change.
 *
 * A run that left samples out for their length starts with one note line instead of a step
 * (`{"note": "3 samples over 2,048 tokens skipped; raise --max-length (this model holds up to 4,096)", "skipped_over_length":
 * 3, "max_length": 2048}`): readers of steps skip it (readLog), and a resume keeps it.
 *
 * Lines are appended and fsynced as they are written. On resume the log is cut back to the
 * checkpoint's step (atomically), so a resumed run's log equals an uninterrupted run's
 * except for the timing fields.
 *
 * Besides the step and note lines, lines with a `type` record the held-out split and the
 * held-out evaluations (src-shared/trainer-log-line.ts, docs/design.md §Evaluation); `readLog`
 * gives the steps only, `readEvalLog` the evaluations, `readLogNotes` the notes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { appendLineSync, endsMidLine } from '../store/jsonl-file.js';
import type { EvalLogLine, StepLog, TrainerLogLine } from '../../src-shared/trainer-log-line.js';

export type { EvalLogLine, StepLog, TrainerLogLine };

export const LOG_FILE = 'trainer_log.jsonl';

export class TrainerLog {
  readonly file: string;

  constructor(outDir: string) {
    this.file = path.join(outDir, LOG_FILE);
  }

  /** Starts a fresh log (a new run). */
  reset(): void {
    writeFileAtomicSync(this.file, new Uint8Array(), PRIVATE_FILE_MODE);
  }

  /**
   * Keeps the lines of steps ≤ `step` (resume), evaluations of those steps and the note lines;
   * returns those steps. The held-out split line goes: the resumed run writes the split as it
   * is then (docs/design.md §Evaluation).
   */
  truncateTo(step: number, from = this.file): StepLog[] {
    const kept = readLogLines(from).filter((l) => ('step' in l ? l.step <= step : !('type' in l && l.type === 'held_out')));
    writeFileAtomicSync(this.file, Buffer.from(kept.map((l) => JSON.stringify(l) + '\n').join(''), 'utf8'), PRIVATE_FILE_MODE);
    return kept.filter(isStep);
  }

  append(line: LogLine): void {
    const fd = fs.openSync(this.file, 'a+', PRIVATE_FILE_MODE);
    try {
      // After a line a crash or a full disk cut short, on a line of its own (the reader skips the torn one).
      appendLineSync(fd, (endsMidLine(fd) ? '\n' : '') + JSON.stringify(line) + '\n');
    } finally {
      fs.closeSync(fd);
    }
  }
}

/** A line of the log that is not a step: what the run left out before its first step. */
export interface LogNote {
  note: string;
  skipped_over_length: number;
  max_length: number;
}

/** Any line of the log: a step, a held-out split or evaluation line, or a note. */
export type LogLine = TrainerLogLine | LogNote;

function isStep(line: LogLine): line is StepLog {
  return !('type' in line) && typeof (line as StepLog).step === 'number';
}

/** Every line of a log, in order. */
export function readLogLines(file: string): LogLine[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => {
    try {
      return [JSON.parse(l) as LogLine];
    } catch {
      return []; // a line torn by a crash mid-append
    }
  });
}

/** The step lines of a log. */
export function readLog(file: string): StepLog[] {
  return readLogLines(file).filter(isStep);
}

/** The held-out evaluations, in order. */
export function readEvalLog(file: string): EvalLogLine[] {
  return readLogLines(file).filter((l): l is EvalLogLine => 'type' in l && l.type === 'eval');
}

/** The note lines of a log. */
export function readLogNotes(file: string): LogNote[] {
  return readLogLines(file).filter((l): l is LogNote => 'note' in l);
}
