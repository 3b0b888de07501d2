// A value followed through the API: read whole, replaced whole by its event, read again when a
// read raced an event or the event stream reopened (./fresh-read.ts says why).
import type { ApiEvents, EventName } from '../../../src-shared/contract.js';
import { api } from './client';
import { freshRead } from './fresh-read';

/**
 * A value the API answers whole and an event carries whole (capture.status, eval.progress):
 * `refresh` reads it, every event replaces it, and a read that raced an event, or a stream
 * that reopened after missing some, reads again. A read that fails goes to `failed` (each
 * view says it its own way); `stop` unsubscribes (a component's unmount).
 */
export function followed<E extends EventName>(
  event: E,
  read: () => Promise<ApiEvents[E]>,
  apply: (value: ApiEvents[E]) => void,
  failed: (err: unknown) => void,
): { refresh: () => Promise<void>; stop: () => void } {
  const reads = freshRead();
  const refresh = () => reads.run(async () => apply(await read())).catch(failed);
  const offs = [
    api.on(event, (value) => {
      reads.touched();
      apply(value);
    }),
    api.onStreamOpen(() => void refresh()),
  ];
  return { refresh, stop: () => offs.forEach((off) => off()) };
}
