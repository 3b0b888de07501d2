// Streams export lines to a file atomically: a temp file beside the target, renamed into
// place only when every line is written, so a failed or interrupted export never leaves a
// half file where a previous good one was. The lines are chat text, so a new file is created
// readable by its owner only, as the database is; a file written over keeps its permissions.
import { AtomicFileWriter, PRIVATE_FILE_MODE } from '../store/atomic-file.js';
import { UserError } from '../../src-shared/types.js';

export function writeJsonl(outPath: string, lines: Iterable<string>): number {
  let writer: AtomicFileWriter;
  try {
    writer = new AtomicFileWriter(outPath, PRIVATE_FILE_MODE);
  } catch (err) {
    throw new UserError(`${outPath}: cannot write the export (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let count = 0;
  try {
    for (const line of lines) {
      writer.write(line + '\n');
      count++;
    }
    writer.commit();
  } catch (err) {
    writer.abort();
    const code = (err as NodeJS.ErrnoException).code;
    if (!code) throw err; // a bug, not a disk problem: keep its stack
    throw new UserError(`${outPath}: the export failed (${code}: ${(err as Error).message})`);
  }
  return count;
}
