// A value followed through the API: read whole, replaced whole by its event (capture.status,
// eval.progress). The read's answer and the events come over different connections, so an
// event can land first and the answer, written before it, after: the answer is then dropped,
// since the event already carried a newer whole value. (The Training page follows runs one
// event per run, so it reads again instead: ./fresh-read.ts.)
import type { ApiEvents, EventName } from '../../../src-shared/contract.js';
import { api } from './client';

/**
 * `refresh` reads the value, and applies the answer unless an event came during the read;
 * every event replaces it; a stream that reopened (events lost meanwhile) reads again. A read
 * that fails goes to `failed` (each view says it its own way); `stop` unsubscribes.
 */
export function followed<E extends EventName>(
  event: E,
  read: () => Promise<ApiEvents[E]>,
  apply: (value: ApiEvents[E]) => void,
  failed: (err: unknown) => void,
): { refresh: () => Promise<void>; stop: () => void } {
  let events = 0;
  const refresh = async () => {
    const before = events;
    try {
      const value = await read();
      if (events === before) apply(value);
    } catch (err) {
      failed(err);
    }
  };
  const offs = [
    api.on(event, (value) => {
      events++;
      apply(value);
    }),
    api.onStreamOpen(() => void refresh()),
  ];
  return { refresh, stop: () => offs.forEach((off) => off()) };
}
