/**
 * `trainer_log.jsonl`: one line per step, the shape LLaMA-Factory's callbacks made familiar
 * and the app's charts read (contract.ts TrainProgress). Every line also names the
 * execution provider that ran the step, so a log never hides a device change.
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

  /** Keeps the lines of steps ≤ `step` (resume); returns them. */
  truncateTo(step: number, from = this.file): StepLog[] {
    const kept = readLog(from).filter((l) => l.step <= step);
    writeFileAtomicSync(this.file, Buffer.from(kept.map((l) => JSON.stringify(l) + '\n').join(''), 'utf8'));
    return kept;
  }

  append(line: StepLog): void {
    const fd = fs.openSync(this.file, 'a');
    try {
      fs.writeSync(fd, JSON.stringify(line) + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }
}

export function readLog(file: string): StepLog[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => {
    try {
      return [JSON.parse(l) as StepLog];
    } catch {
      return []; // a line torn by a crash mid-append
    }
  });
}
