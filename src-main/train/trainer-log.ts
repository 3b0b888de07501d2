/**
 * `trainer_log.jsonl`: one line per step, the shape LLaMA-Factory's callbacks made familiar
 * and the app's charts read (contract.ts TrainProgress). Every line also names the
 * execution provider that ran the step, so a log never hides a device change.
 *
 * A run that left samples out for their length starts with one note line instead of a step
 * (`{"note": "3 samples over 2,048 tokens skipped; raise --max-length", "skipped_over_length":
 * 3, "max_length": 2048}`): readers of steps skip it (readLog), and a resume keeps it.
 *
 * Lines are appended and fsynced as they are written. On resume the log is cut back to the
 * checkpoint's step (atomically), so a resumed run's log equals an uninterrupted run's
 * except for the timing fields.
 */
import fs from 'node:fs';
import path from 'node:path';
import { writeFileAtomicSync } from '../store/atomic-file.js';
import type { StepLog } from '../../src-shared/trainer-log-line.js';

export type { StepLog };

export const LOG_FILE = 'trainer_log.jsonl';

export class TrainerLog {
  readonly file: string;

  constructor(outDir: string) {
    this.file = path.join(outDir, LOG_FILE);
  }

  /** Starts a fresh log (a new run). */
  reset(): void {
    writeFileAtomicSync(this.file, new Uint8Array());
  }

  /** Keeps the note lines and the lines of steps ≤ `step` (resume); returns those steps. */
  truncateTo(step: number, from = this.file): StepLog[] {
    const kept = readLines(from).filter((l) => !isStep(l) || l.step <= step);
    writeFileAtomicSync(this.file, Buffer.from(kept.map((l) => JSON.stringify(l) + '\n').join(''), 'utf8'));
    return kept.filter(isStep);
  }

  append(line: StepLog | LogNote): void {
    const fd = fs.openSync(this.file, 'a');
    try {
      fs.writeSync(fd, JSON.stringify(line) + '\n');
      fs.fsyncSync(fd);
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

function isStep(line: StepLog | LogNote): line is StepLog {
  return typeof (line as StepLog).step === 'number';
}

function readLines(file: string): (StepLog | LogNote)[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => {
    try {
      return [JSON.parse(l) as StepLog | LogNote];
    } catch {
      return []; // a line torn by a crash mid-append
    }
  });
}

/** The step lines of a log. */
export function readLog(file: string): StepLog[] {
  return readLines(file).filter(isStep);
}

/** The note lines of a log. */
export function readLogNotes(file: string): LogNote[] {
  return readLines(file).filter((l): l is LogNote => !isStep(l));
}
