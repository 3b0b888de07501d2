/**
 * `trainer_log.jsonl`: one line per step, the shape LLaMA-Factory's callbacks made familiar
 * and the app's charts read (contract.ts TrainProgress). Every line also names the
 * execution provider that ran the step, so a log never hides a device change.
 *
 * Lines are appended and fsynced as they are written. On resume the log is cut back to the
 * checkpoint's step (atomically), so a resumed run's log equals an uninterrupted run's
 * except for the timing fields.
 *
 * Besides the step lines, lines with a `type` record the held-out split and the held-out
 * evaluations (src-shared/trainer-log-line.ts, docs/design.md §Evaluation); `readLog` gives
 * the steps only, `readEvalLog` the evaluations.
 */
import fs from 'node:fs';
import path from 'node:path';
import { writeFileAtomicSync } from '../store/atomic-file.js';
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
    writeFileAtomicSync(this.file, new Uint8Array());
  }

  /** Keeps the lines of steps ≤ `step` (resume), evaluations of those steps and the split lines. */
  truncateTo(step: number, from = this.file): void {
    const kept = readLogLines(from).filter((l) => !('step' in l) || l.step <= step);
    writeFileAtomicSync(this.file, Buffer.from(kept.map((l) => JSON.stringify(l) + '\n').join(''), 'utf8'));
  }

  append(line: TrainerLogLine): void {
    const fd = fs.openSync(this.file, 'a');
    try {
      fs.writeSync(fd, JSON.stringify(line) + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }
}

/** Every line of a log, in order. */
export function readLogLines(file: string): TrainerLogLine[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => {
    try {
      return [JSON.parse(l) as TrainerLogLine];
    } catch {
      return []; // a line torn by a crash mid-append
    }
  });
}

/** The step lines (those without a `type`). */
export function readLog(file: string): StepLog[] {
  return readLogLines(file).filter((l): l is StepLog => !('type' in l));
}

/** The held-out evaluations, in order. */
export function readEvalLog(file: string): EvalLogLine[] {
  return readLogLines(file).filter((l): l is EvalLogLine => 'type' in l && l.type === 'eval');
}
