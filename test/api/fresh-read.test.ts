// The renderer's freshRead (src-renderer/src/api/fresh-read.ts): an event that arrives while a
// snapshot read is in flight makes the read run again, so a store never keeps an answer older
// than an event it already saw (a run that finished while the Training page read trainStatus
// showed "running" for good).
import { describe, expect, it } from 'vitest';
import { freshRead } from '../../src-renderer/src/api/fresh-read.js';

/** A read whose answer the test releases: the server's state at the moment it answered. */
function serverReads() {
  const answers: (() => void)[] = [];
  let state = 'running';
  let shown = '';
  return {
    finish: () => (state = 'finished'),
    release: () => answers.shift()!(),
    pending: () => answers.length,
    shown: () => shown,
    read: () => {
      const answered = state; // written by the server now, delivered when released
      return new Promise<void>((resolve) => answers.push(() => ((shown = answered), resolve())));
    },
  };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('freshRead', () => {
  it('reads again when an event arrived during the read, so the older answer does not stay', async () => {
    const server = serverReads();
    const fresh = freshRead();
    const done = fresh.run(server.read);
    server.finish();
    fresh.touched(); // the "finished" event arrives before the read's answer
    server.release(); // the answer says "running"
    await tick();
    expect(server.pending()).toBe(1); // read again
    server.release();
    await done;
    expect(server.shown()).toBe('finished');
  });

  it('reads once when nothing arrived, and an event outside a read costs nothing', async () => {
    const server = serverReads();
    const fresh = freshRead();
    fresh.touched();
    const done = fresh.run(server.read);
    server.release();
    await done;
    expect(server.pending()).toBe(0);
    expect(server.shown()).toBe('running');
  });

  it('a second run during a read joins it and reads once more after it', async () => {
    const server = serverReads();
    const fresh = freshRead();
    const first = fresh.run(server.read);
    const second = fresh.run(server.read);
    server.finish();
    server.release();
    await tick();
    server.release();
    await Promise.all([first, second]);
    expect(server.pending()).toBe(0);
    expect(server.shown()).toBe('finished');
  });
});
