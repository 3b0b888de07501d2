// A sample's context as a rule over its session's turns, not a copy of their indices
// (docs/design.md §Samples and next states). Copying made one long conversation quadratic:
// n samples each listing up to n turns. A span is two numbers, and the turns it names are
// computed when a context is read.

/**
 * The context of the reply at `responseTurn`: the context turns (those not metadata or
 * empty) before `headEnd`, which are the leading system turns a window always keeps, then
 * the context turns from `tailStart` up to the reply. Without a window `tailStart` is
 * `headEnd`, so the span covers every context turn before the reply.
 */
export interface ContextSpan {
  headEnd: number;
  tailStart: number;
}

/** The indices of the turns a span names, in order; `inContext(i)` says whether turn i is a context turn. */
export function contextTurnIndices(inContext: (index: number) => boolean, span: ContextSpan, responseTurn: number): number[] {
  const out: number[] = [];
  const headEnd = Math.min(span.headEnd, responseTurn);
  for (let i = 0; i < headEnd; i++) if (inContext(i)) out.push(i);
  for (let i = Math.max(span.tailStart, headEnd); i < responseTurn; i++) if (inContext(i)) out.push(i);
  return out;
}
