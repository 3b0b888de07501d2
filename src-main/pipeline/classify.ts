// Turn classification, next-state extraction, context windows and samples (docs/design.md §Samples and next states).
//
// The rules, exactly:
// - A turn is *side by nature* when it is hidden, a system turn, or its text is metadata:
//   after leading whitespace it starts with `[METADATA]`, `[INTERNAL]`, `function_call`,
//   `tool_result` (each as a whole word) or `system:` — case-insensitive. Turns with no
//   text, no tool call and no attachment are side too ("empty turn"): there is nothing
//   to learn from or react to. Tool turns are always side, but they stay *reactions*: a
//   tool turn is the next state of the assistant turn that called the tool.
// - The other turns are *conversational*. Among them:
//   - an assistant turn is main iff the next conversational user/tool/assistant turn after
//     it is a user or tool turn. If another assistant turn comes first, the reaction
//     answers that later reply, so this one is side ("another assistant turn follows
//     before any reaction"). If nothing follows it is side ("no user or tool turn follows").
//   - a user turn is main iff the previous conversational turn is an assistant or tool
//     turn, or it is the first user turn (possibly after system turns); otherwise it is
//     side ("follows another user message with no reply in between").
// - Next state: for each main assistant turn, the first conversational user or tool turn
//   after it. Every main assistant turn has one, so every main assistant turn is a sample.
// - Context: every turn before the reply except metadata and empty turns (bookkeeping the
//   model never saw). Hidden turns stay: they are custom instructions the model did see.
//   An optional window keeps the leading system turns plus the last N turns and/or the
//   most recent turns that fit an approximate token budget (4 characters ≈ 1 token).
import type { NoSampleReason } from '../../src-shared/views.js';
import type { Role, TurnClass } from '../../src-shared/types.js';
import { contextTurnIndices, type ContextSpan } from '../../src-shared/context-span.js';
import { approxTokens, ContextWindower, type ContextWindow } from './sliding-context.js';

/** The fields of a turn that classification looks at. */
export interface ClassifiableTurn {
  role: Role;
  text: string;
  hidden?: boolean;
  toolCalls?: unknown[];
  attachments?: unknown[];
}

export interface TurnClassification {
  classification: TurnClass;
  sideReason: string | null;
}

export type { ContextWindow };

/**
 * One sample. Its context is a span over the session's turns (src-shared/context-span.ts),
 * so a session's samples take space linear in its turns; the index lists are computed on
 * demand.
 */
export class SampleDraft {
  constructor(
    readonly responseTurn: number,
    readonly feedbackTurn: number,
    readonly nextStateRole: 'user' | 'tool',
    readonly context: ContextSpan,
    private readonly inContext: readonly boolean[],
  ) {}

  /** Indices of the turns in the (windowed) context, in order. */
  get contextTurns(): number[] {
    return contextTurnIndices((i) => this.inContext[i], this.context, this.responseTurn);
  }

  /** Indices of the whole, unwindowed context: what label matching covers. */
  get fullContextTurns(): number[] {
    return contextTurnIndices((i) => this.inContext[i], { headEnd: 0, tailStart: 0 }, this.responseTurn);
  }
}

export interface SessionAnalysis {
  turns: TurnClassification[];
  /** Per turn: whether it may be part of a context (it is neither metadata nor empty). */
  inContext: boolean[];
  samples: SampleDraft[];
  noSampleReason: NoSampleReason | null;
}

const METADATA_PREFIX = /^\s*(?:\[METADATA\]|\[INTERNAL\]|function_call\b|tool_result\b|system:)/i;

export function isMetadataText(text: string): boolean {
  return METADATA_PREFIX.test(text);
}

function isEmptyTurn(turn: ClassifiableTurn): boolean {
  return turn.text.trim() === '' && !turn.toolCalls?.length && !turn.attachments?.length;
}

/** Why a turn is side by its own nature, or null when it is conversational. */
function intrinsicSideReason(turn: ClassifiableTurn): string | null {
  if (turn.hidden) return 'hidden turn (not shown in the conversation)';
  if (turn.role === 'system') return 'system turn';
  if (isMetadataText(turn.text)) return `metadata text (starts with '${turn.text.trim().split(/\s+/)[0].slice(0, 24)}')`;
  if (isEmptyTurn(turn)) return 'empty turn (no text, tool call or attachment)';
  if (turn.role === 'tool') return 'tool output (serves as the next state of the call)';
  return null;
}

/** Turns that take part in the dialogue: user, assistant and tool turns that are not hidden, metadata or empty. */
function isConversational(turn: ClassifiableTurn): boolean {
  if (turn.role === 'system' || turn.hidden || isMetadataText(turn.text) || isEmptyTurn(turn)) return false;
  return true;
}

function isReaction(turn: ClassifiableTurn): boolean {
  return turn.role === 'user' || turn.role === 'tool';
}

export function classifyTurns(turns: readonly ClassifiableTurn[]): { classes: TurnClassification[]; nextState: (number | null)[] } {
  const conversational = turns.map(isConversational);
  const classes: TurnClassification[] = [];
  const nextState: (number | null)[] = turns.map(() => null);
  let seenUser = false;
  let previousConversational: Role | null = null;

  for (let i = 0; i < turns.length; i++) {
    const turn = turns[i];
    const intrinsic = intrinsicSideReason(turn);
    if (intrinsic !== null || !conversational[i]) {
      classes.push({ classification: 'side', sideReason: intrinsic ?? 'not part of the conversation' });
      if (conversational[i]) previousConversational = turn.role; // tool turns
      continue;
    }
    if (turn.role === 'assistant') {
      const j = nextConversational(turns, conversational, i);
      if (j === null) {
        classes.push({ classification: 'side', sideReason: 'no user or tool turn follows this reply' });
      } else if (!isReaction(turns[j])) {
        classes.push({ classification: 'side', sideReason: 'another assistant turn follows before any reaction' });
      } else {
        classes.push({ classification: 'main', sideReason: null });
        nextState[i] = j;
      }
    } else {
      // user turn
      const first = !seenUser;
      const afterReply = previousConversational === 'assistant' || previousConversational === 'tool';
      classes.push(
        first || afterReply
          ? { classification: 'main', sideReason: null }
          : { classification: 'side', sideReason: 'follows another user message with no reply in between' },
      );
      seenUser = true;
    }
    previousConversational = turn.role;
  }
  return { classes, nextState };
}

function nextConversational(turns: readonly ClassifiableTurn[], conversational: boolean[], i: number): number | null {
  for (let j = i + 1; j < turns.length; j++) if (conversational[j]) return j;
  return null;
}

export { approxTokens };

/** Whether a turn may be part of a context: bookkeeping the model never saw (metadata, empty turns) is not. */
export function isContextTurn(turn: ClassifiableTurn): boolean {
  return !isMetadataText(turn.text) && !isEmptyTurn(turn);
}

/** The turns before `responseTurn` that belong in its context, unwindowed. */
export function fullContext(turns: readonly ClassifiableTurn[], responseTurn: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < responseTurn; i++) if (isContextTurn(turns[i])) out.push(i);
  return out;
}

/**
 * Applies the window to a context: leading system turns always stay. The reference rule;
 * analyseSession computes the same contexts in linear time (sliding-context.ts).
 */
export function windowContext(turns: readonly ClassifiableTurn[], context: number[], window?: ContextWindow): number[] {
  if (!window || (window.lastTurns === undefined && window.tokenBudget === undefined)) return context;
  let lead = 0;
  while (lead < context.length && turns[context[lead]].role === 'system') lead++;
  const head = context.slice(0, lead);
  let tail = context.slice(lead);
  if (window.lastTurns !== undefined) tail = window.lastTurns <= 0 ? [] : tail.slice(-window.lastTurns);
  if (window.tokenBudget !== undefined) {
    let budget = window.tokenBudget - head.reduce((sum, i) => sum + approxTokens(turns[i].text), 0);
    let keepFrom = tail.length;
    // Walk back from the newest turn; the newest one always stays so the reply has a prompt.
    while (keepFrom > 0) {
      const cost = approxTokens(turns[tail[keepFrom - 1]].text);
      if (keepFrom < tail.length && cost > budget) break;
      budget -= cost;
      keepFrom--;
    }
    tail = tail.slice(keepFrom);
  }
  return [...head, ...tail];
}

/** Why a session yields no sample (only meaningful when it yields none). */
export function noSampleReasonFor(turns: readonly ClassifiableTurn[]): NoSampleReason {
  const assistants = turns.map((t, i) => (t.role === 'assistant' ? i : -1)).filter((i) => i >= 0);
  if (assistants.length === 0) return 'no assistant turn';
  const lastReaction = turns.map((t) => isReaction(t)).lastIndexOf(true);
  if (lastReaction < assistants[0]) return 'no reaction after any reply';
  return 'everything side';
}

/** Classifies a session's turns and derives its samples. Linear in the turns (docs/design.md §Samples and next states). */
export function analyseSession(turns: readonly ClassifiableTurn[], window?: ContextWindow): SessionAnalysis {
  const { classes, nextState } = classifyTurns(turns);
  const inContext = turns.map(isContextTurn);
  const windower = new ContextWindower(turns, inContext, window);
  const samples: SampleDraft[] = [];
  for (let i = 0; i < turns.length; i++) {
    const j = nextState[i];
    if (classes[i].classification !== 'main' || turns[i].role !== 'assistant' || j === null) continue;
    samples.push(new SampleDraft(i, j, turns[j].role as 'user' | 'tool', windower.spanBefore(i), inContext));
  }
  return { turns: classes, inContext, samples, noSampleReason: samples.length ? null : noSampleReasonFor(turns) };
}
