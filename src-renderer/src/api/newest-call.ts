// Views re-read from the API whenever something changes (app.revision, a filter), so two reads
// can be in flight at once, and under load the older one can answer last. Each read takes a
// ticket; its answer is applied only while the ticket is the newest, so a late, older answer
// never overwrites a newer one.

/** A ticket dispenser: each call starts a read and returns "is this read still the newest?". */
export function newestCall(): () => () => boolean {
  let started = 0;
  return () => {
    const mine = ++started;
    return () => mine === started;
  };
}
