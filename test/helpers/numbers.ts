// How far apart two runs' numbers are (log-probs, gradients, cached keys): the one helper every
// comparison test uses, so that a length mismatch fails as such rather than as a NaN or a 0.

/** max |a − b| over two lists of one length (0 for two empty ones); throws, naming both lengths, when they differ. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`${a.length} numbers vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

/** {@link maxAbsDiff} over rows (a batch's log-prob rows), each as long as its partner. */
export function maxAbsDiffRows(a: ArrayLike<number>[], b: ArrayLike<number>[]): number {
  if (a.length !== b.length) throw new Error(`${a.length} rows vs ${b.length}`);
  return a.reduce((worst, row, i) => {
    if (row.length !== b[i]!.length) throw new Error(`row ${i}: ${row.length} numbers vs ${b[i]!.length}`);
    return Math.max(worst, maxAbsDiff(row, b[i]!));
  }, 0);
}
