// A store that reads a snapshot (trainStatus, every run) and then follows events that each
// change a part of it (train.status, one run) can lose an event to its own read: the answer and
// the event come over different connections, so an event may be applied first and then
// overwritten by an answer the server wrote before it. A run that finished in that moment
// showed "running" for good. So an event that arrives while a read is in flight makes the read
// run once more, and the snapshot kept is never older than an event already seen. (Events
// that carry the whole value drop the stale answer instead: ./followed.ts.)

export interface FreshRead {
  /** Runs `read`, again while events arrived during it; a call while one is in flight joins it (and reads once more). */
  run(read: () => Promise<void>): Promise<void>;
  /** An event arrived: a read in flight may answer with an older state, so it will be repeated. */
  touched(): void;
}

export function freshRead(): FreshRead {
  let inFlight: Promise<void> | null = null;
  let again = false;
  return {
    run(read) {
      if (inFlight) {
        again = true;
        return inFlight;
      }
      inFlight = (async () => {
        try {
          do {
            again = false;
            await read();
          } while (again);
        } finally {
          inFlight = null;
        }
      })();
      return inFlight;
    },
    touched() {
      if (inFlight) again = true;
    },
  };
}
