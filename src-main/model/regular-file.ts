/**
 * Reading files a user (or someone who sent them a folder) hands in: only regular files, and
 * never more than a bound. A named pipe would block the reader forever, a link to /dev/zero
 * would fill the memory, a folder in a file's place fails deep inside a read: each of these is
 * refused with one line before a byte is read. The file is opened without blocking and
 * checked again through its descriptor, so it cannot be swapped for a pipe in between.
 */
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';

/** Opens `file` for reading when it is a regular file (links followed); the caller closes the fd. */
export function openRegularFile(file: string): { fd: number; size: number } {
  let fd: number;
  try {
    if (!fs.statSync(file).isFile()) throw new UserError(`${file}: not a regular file`);
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    if (err instanceof UserError) throw err;
    throw new UserError(`cannot open ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const stat = fs.fstatSync(fd);
  if (!stat.isFile()) {
    fs.closeSync(fd);
    throw new UserError(`${file}: not a regular file`);
  }
  return { fd, size: stat.size };
}

/** The bytes of a regular file of at most `maxBytes`; a UserError naming the file otherwise. */
export function readRegularFile(file: string, maxBytes: number): Buffer {
  const { fd, size } = openRegularFile(file);
  try {
    if (size > maxBytes) throw new UserError(`${file}: ${size} bytes, more than the ${maxBytes} such a file may have`);
    const out = Buffer.alloc(size);
    let done = 0;
    while (done < size) {
      const n = fs.readSync(fd, out, done, size - done, done);
      if (n <= 0) break;
      done += n;
    }
    return out.subarray(0, done);
  } finally {
    fs.closeSync(fd);
  }
}
