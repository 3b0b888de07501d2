/** How many leading items two lists have in common, `same` deciding (identity by default). */
export function sharedPrefixLength<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean = Object.is): number {
  let n = 0;
  while (n < a.length && n < b.length && same(a[n]!, b[n]!)) n++;
  return n;
}
