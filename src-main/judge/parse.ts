/**
 * Reading a judge's answer (docs/design.md §Judges). Judges may think aloud, and thinking models often
 * write \boxed{…} while they reason, so the rules are:
 *   1. drop the reasoning: everything inside <think>…</think>, or before a lone </think>
 *      (templates such as Qwen3's open <think> in the prompt), or after an unclosed <think>
 *      (generation stopped mid-thought: there is no answer);
 *   2. take the LAST \boxed{…} of what is left; if its content is not one of the allowed
 *      values, the vote is unparseable — an earlier boxed value is never used instead.
 * A hint is read from the last complete [HINT_START]…[HINT_END] pair after the reasoning;
 * a start tag without an end tag (a reply cut off by the token limit) gives no hint.
 */
import type { Reward } from '../../src-shared/types.js';

/**
 * The line a completer appends to a vote that its token limit stopped (finish reason
 * 'length'). It holds no \boxed{} and no hint tags, so it never reads as an answer; a vote
 * that ends with it and gives no answer was cut off before it, and is counted as such.
 */
export const CUT_OFF_NOTE = "\n[stopped at the judge's token limit]";

/** Whether a vote's text was stopped by the token limit. */
export function wasCutOff(raw: string): boolean {
  return raw.endsWith(CUT_OFF_NOTE);
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

/** The answer part of a judge's output, reasoning removed. */
export function stripReasoning(text: string): string {
  const close = text.lastIndexOf(THINK_CLOSE);
  if (close >= 0) return text.slice(close + THINK_CLOSE.length);
  const open = text.indexOf(THINK_OPEN);
  return open >= 0 ? text.slice(0, open) : text;
}

/** The content of the last \boxed{…} (braces balanced), or null when there is none. */
export function lastBoxed(text: string): string | null {
  const re = /\\boxed\s*\{/g;
  let start = -1;
  for (let m = re.exec(text); m; m = re.exec(text)) start = m.index + m[0].length;
  if (start < 0) return null;
  let depth = 1;
  for (let i = start; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(start, i);
  }
  return null; // unterminated: cut off by the token limit
}

/** "1", "+1", "-1" (also with a Unicode minus), "0", optionally in $…$ or \text{…}. */
function boxedNumber(content: string): number | null {
  const clean = content
    .replace(/\\text\s*\{([^}]*)\}/g, '$1')
    .replace(/[\s$]/g, '')
    .replace(/[−–—]/g, '-');
  if (/^\+?1(\.0+)?$/.test(clean)) return 1;
  if (/^-1(\.0+)?$/.test(clean)) return -1;
  if (/^[+-]?0(\.0+)?$/.test(clean)) return 0;
  return null;
}

/** The reward judge's answer: 1, -1 or 0, or undefined when unparseable. */
export function parseRewardAnswer(raw: string): Reward | undefined {
  const boxed = lastBoxed(stripReasoning(raw));
  const n = boxed === null ? null : boxedNumber(boxed);
  return n === null ? undefined : (n as Reward);
}

export interface HintAnswer {
  /** 1: the next state holds a usable hint; -1: it does not; undefined: unparseable. */
  answer?: 1 | -1;
  hint?: string;
}

/** The hint judge's answer (only 1 or -1 are valid) and its hint text, if tagged. */
export function parseHintAnswer(raw: string): HintAnswer {
  const answerText = stripReasoning(raw);
  const boxed = lastBoxed(answerText);
  const n = boxed === null ? null : boxedNumber(boxed);
  const out: HintAnswer = {};
  if (n === 1 || n === -1) out.answer = n;
  const hint = lastTagged(answerText, '[HINT_START]', '[HINT_END]');
  if (hint) out.hint = hint;
  return out;
}

function lastTagged(text: string, open: string, close: string): string | undefined {
  const end = text.lastIndexOf(close);
  if (end < 0) return undefined;
  const start = text.lastIndexOf(open, end);
  if (start < 0) return undefined;
  const inner = text.slice(start + open.length, end).trim();
  return inner || undefined;
}
