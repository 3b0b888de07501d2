/** How many leading items two lists (or strings) have in common, `same` deciding (identity by default). */
export function sharedPrefixLength<T>(a: ArrayLike<T>, b: ArrayLike<T>, same: (x: T, y: T) => boolean = Object.is): number {
  let n = 0;
  while (n < a.length && n < b.length && same(a[n]!, b[n]!)) n++;
  return n;
}
