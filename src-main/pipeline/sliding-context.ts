// Sample contexts in linear time (docs/design.md §Samples and next states). The window rule
// (classify.ts windowContext) keeps the leading system turns, then a suffix of the other
// context turns: the last N, and/or the newest that fit a token budget. As the reply moves
// forward through a session that suffix only ever starts later, so one pass with a pointer
// finds every sample's span, where computing each context afresh was quadratic.
import type { Role } from '../../src-shared/types.js';
import type { ContextSpan } from '../../src-shared/context-span.js';

export interface ContextWindow {
  /** Keep at most this many turns besides the leading system turns. */
  lastTurns?: number;
  /** Keep the most recent turns whose approximate token count fits this budget. */
  tokenBudget?: number;
}

/** Rough token count for windowing: ~4 characters per token, at least 1 per turn. */
export function approxTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** Gives the context span of each reply, asked for in increasing turn order. */
export class ContextWindower {
  /** One past the last leading system context turn (0 when there is none). */
  private readonly headEnd: number;
  /** The token budget left for the tail once the leading system turns are paid for. */
  private readonly tailBudget: number | undefined;
  /** The context turns after the head seen so far, and the running sums of their tokens. */
  private readonly tail: number[] = [];
  private readonly tokenSums: number[] = [0];
  private nextTurn: number;
  /** The earliest tail position whose suffix fits the budget (never moves back). */
  private budgetStart = 0;

  constructor(
    private readonly turns: readonly { role: Role; text: string }[],
    private readonly inContext: readonly boolean[],
    private readonly window: ContextWindow | undefined,
  ) {
    let headEnd = 0;
    let headTokens = 0;
    for (let i = 0; i < turns.length; i++) {
      if (!inContext[i]) continue;
      if (turns[i].role !== 'system') break;
      headEnd = i + 1;
      headTokens += approxTokens(turns[i].text);
    }
    this.headEnd = headEnd;
    this.nextTurn = headEnd;
    this.tailBudget = window?.tokenBudget === undefined ? undefined : window.tokenBudget - headTokens;
  }

  private get windowed(): boolean {
    return this.window !== undefined && (this.window.lastTurns !== undefined || this.window.tokenBudget !== undefined);
  }

  /** The span of the context of the reply at `responseTurn` (not before the previous call's). */
  spanBefore(responseTurn: number): ContextSpan {
    for (; this.nextTurn < responseTurn; this.nextTurn++) {
      if (!this.inContext[this.nextTurn]) continue;
      this.tail.push(this.nextTurn);
      this.tokenSums.push(this.tokenSums[this.tokenSums.length - 1] + approxTokens(this.turns[this.nextTurn].text));
    }
    if (!this.windowed) return { headEnd: this.headEnd, tailStart: this.headEnd };
    const start = Math.max(this.lastTurnsStart(), this.budgetStartNow());
    return { headEnd: this.headEnd, tailStart: start < this.tail.length ? this.tail[start] : responseTurn };
  }

  private lastTurnsStart(): number {
    const last = this.window?.lastTurns;
    if (last === undefined) return 0;
    return last <= 0 ? this.tail.length : Math.max(0, this.tail.length - last);
  }

  /** The newest turn always stays; older ones while the suffix still fits the budget. */
  private budgetStartNow(): number {
    if (this.tailBudget === undefined) return 0;
    const n = this.tail.length;
    const suffixTokens = (from: number) => this.tokenSums[n] - this.tokenSums[from];
    while (this.budgetStart < n - 1 && suffixTokens(this.budgetStart) > this.tailBudget) this.budgetStart++;
    return this.budgetStart;
  }
}
