// Rule-based hindsight hints (docs/design.md §Judges, the fallback of the hint judge): pull the directive
// out of a user's reaction ("No, I said Python" → "I said Python"), or name a tool error,
// then apply the quality filter shared with the LLM hint judge.
//
// Patterns, tried on each sentence of the reaction (a leading "No,"/"Nope," is dropped):
//   "I said|meant|asked for|wanted|need X"      → the sentence from "I …"
//   "use|try X instead", "instead of X, Y"     → the sentence from "use/try/instead"
//   "too verbose|long|short|complicated|vague" → a fixed instruction ("Be more concise …")
//   "you should X", "it should be X"           → the sentence from "you/it should"
//   "please X", "don't X", "make|keep it X"    → the sentence from that cue
//   "can you change|make|rewrite X"            → "Change|Make|Rewrite X"
//   "you forgot|missed X", "remember that X", "actually, X"
// Sentences that ask for something new ("can you also …", "another …") are follow-ups,
// not hindsight about the reply, and are skipped.
//
// Quality filter: a hint must be longer than 10 characters and must give a direction —
// a hint made only of negative or filler words ("that was wrong", "not what I asked")
// says nothing about what to do instead and is dropped.
import { SHORT_HINT_CHARS } from '../../src-shared/training.js';

const FOLLOW_UP = /\b(?:also|additionally|another|next|as well)\b/i;

const STYLE_HINTS: [RegExp, string][] = [
  [/\btoo (?:verbose|long|wordy|lengthy)\b/i, 'Be more concise: the previous reply was too long.'],
  [/\btoo (?:short|brief)\b/i, 'Give a fuller, more detailed answer.'],
  [/\btoo (?:complicated|complex)\b/i, 'Keep it simpler and easier to follow.'],
  [/\btoo (?:vague|generic)\b/i, 'Be more specific and concrete.'],
  [/\btoo formal\b/i, 'Use a more casual, conversational tone.'],
  [/\btoo casual\b/i, 'Use a more formal, professional tone.'],
];

// Each pattern's match start is where the hint sentence begins.
const FROM_CUE: RegExp[] = [
  /\bI (?:said|meant|asked for|asked you to|wanted|want|need|told you)\b/i,
  /\b(?:use|try) .{1,80}? instead\b/i,
  /\binstead of\b/i,
  /\b(?:you|it|this|that) should(?:n't| not)?\b/i,
  /\bplease\b/i,
  /\b(?:don't|do not|never)\s+\w+/i,
  /\b(?:make|keep) it\b/i,
  /\byou (?:forgot|missed|ignored)\b/i,
  /\b(?:remember|note) that\b/i,
];

const CAN_YOU = /\b(?:can|could|would) you (?:please )?(change|make|rewrite|rephrase|shorten|fix|redo|update|modify|correct|remove|use)\b(.*)$/i;

// Words that carry no direction: negative verdicts and filler.
const NON_DIRECTIVE = new Set(
  (
    "no nope nah not wrong incorrect bad terrible awful useless nonsense mistake mistaken error errors broken fail failed fails " +
    "that that's this this's it it's is was were be been are am i i'm me my you you're your the a an so very really totally " +
    "completely quite just at all again still answer reply response what wanted asked meant said for of to do did does doesn't " +
    "didn't don't work works right correct good please thanks ok okay well hmm ugh actually even"
  ).split(' '),
);

/** Whether a hint says what to do, rather than only that something was wrong. */
export function givesDirection(hint: string): boolean {
  const words = hint.toLowerCase().replace(/[’‘]/g, "'").match(/[a-z0-9'+#.-]+/g) ?? [];
  return words.some((w) => !NON_DIRECTIVE.has(w.replace(/^[.'-]+|[.'-]+$/g, '')));
}

/** The quality filter of docs/design.md §Votes: longer than 10 characters and gives a direction. */
export function isUsefulHint(hint: string | null | undefined): hint is string {
  if (!hint) return false;
  const h = hint.trim();
  return h.length > SHORT_HINT_CHARS && givesDirection(h);
}

/**
 * The hint training uses from a label (docs/design.md §At-least-one): one the user typed (a
 * manual label) whenever it is not blank, a judge's only when it passes the quality filter.
 */
export function hintForTraining(label: { hint: string | null; source: string | null }): string | null {
  if (label.source === 'manual') return label.hint?.trim() ? label.hint : null;
  return isUsefulHint(label.hint) ? label.hint : null;
}

/** A text cut into its sentences (at . ! ? followed by a space, and at line breaks), trimmed. */
export function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter(Boolean);
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function endWithStop(s: string): string {
  return /[.!?]$/.test(s) ? s : s + '.';
}

function hintFromSentence(sentence: string): string | null {
  const s = sentence.replace(/^(?:no|nope|nah)\b[,.!]*\s*/i, '').trim();
  if (!s || FOLLOW_UP.test(s)) return null;
  for (const [re, hint] of STYLE_HINTS) if (re.test(s)) return hint;
  const canYou = CAN_YOU.exec(s);
  if (canYou) return endWithStop(capitalise(canYou[1].toLowerCase() + canYou[2]).replace(/\?+$/, ''));
  let best: number | null = null;
  for (const re of FROM_CUE) {
    const m = re.exec(s);
    if (m && (best === null || m.index < best)) best = m.index;
  }
  if (best === null) return null;
  return endWithStop(capitalise(s.slice(best).replace(/\?+$/, '').trim()));
}

/** A hint from a tool's error output: the first line that names the error. */
function hintFromToolError(output: string): string | null {
  const line = output
    .split('\n')
    .map((l) => l.trim())
    .find((l) => /error|exception|failed|not found|denied|invalid/i.test(l));
  if (!line) return null;
  return `The tool call failed: ${line.slice(0, 200)}`;
}

/**
 * Extracts a hindsight hint from a next state, or null when it holds none worth keeping.
 * For tool output, only errors give hints.
 */
export function extractHint(nextState: { role: 'user' | 'tool'; text: string }, isError = false): string | null {
  if (nextState.role === 'tool') {
    const hint = isError ? hintFromToolError(nextState.text) : null;
    return isUsefulHint(hint) ? hint : null;
  }
  const parts: string[] = [];
  for (const sentence of sentences(nextState.text)) {
    const hint = hintFromSentence(sentence);
    if (hint && !parts.includes(hint)) parts.push(hint);
  }
  const hint = parts.join(' ').slice(0, 600).trim();
  return isUsefulHint(hint) ? hint : null;
}
