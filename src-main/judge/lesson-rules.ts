/**
 * Lessons by rules (docs/design.md §Lessons): what distils the hints when no LLM judge is set,
 * and what the judge falls back to when its answer holds no lessons. Deterministic: the same
 * hints always give the same text.
 *
 * 1. Each hint is cut into sentences; each sentence becomes a candidate lesson:
 *    - a tool's error note ("The tool call failed: …") is left out: it concerned one call;
 *    - a clause judging the past reply is dropped ("Be more concise: the previous reply was too
 *      long." → "Be more concise.");
 *    - first person becomes the user's ("I said Python" → "The user said Python"), a lapse
 *      becomes an instruction ("You forgot the return type." → "Don't forget the return type."),
 *      a leading "Please" goes;
 *    - it must pass the hint filter (longer than 10 characters, gives a direction) and be at most
 *      MAX_LESSON_CHARS long.
 * 2. Candidates are deduplicated by their words (case and punctuation aside); each counts the
 *    samples that gave it, and remembers when it was last given and its latest wording.
 * 3. Most frequent first, then most recent, then alphabetical; at most MAX_LESSONS, and the
 *    whole text within MAX_LESSONS_CHARS (a lesson that would not fit is skipped for the next).
 */
import { formatLessons, MAX_LESSON_CHARS, MAX_LESSONS, MAX_LESSONS_CHARS, type LessonHint } from '../../src-shared/lessons.js';
import { isUsefulHint, sentences } from './hint-rules.js';

const TOOL_NOTE = /^the tool call failed\b/i;
/** A clause after ':', ';', a dash or a comma that speaks of the reply being corrected. */
const PAST_REPLY_CLAUSE = /\s*(?:[:;,]|\s[-–—])\s+(?:the|your|that|this)\s+(?:previous |last |earlier |original |first )?(?:reply|answer|response|one)\b.*$/i;
const REWRITES: [RegExp, (m: RegExpExecArray) => string][] = [
  [/^I (said|meant|asked for|asked you to|told you)\b/i, (m) => `The user ${m[1]!.toLowerCase()}`],
  [/^I (?:want|wanted)\b/i, () => 'The user wants'],
  [/^I need\b/i, () => 'The user needs'],
  [/^You (forgot|missed|ignored)\b/i, (m) => `Don't ${({ forgot: 'forget', missed: 'miss', ignored: 'ignore' } as Record<string, string>)[m[1]!.toLowerCase()]}`],
  [/^(?:please|kindly),?\s+/i, () => ''],
];

/** One sentence of a hint as a lesson, or null when it makes none. */
export function lessonFromSentence(sentence: string): string | null {
  let s = sentence.replace(/\s+/g, ' ').replace(/^[-*•\d.)\s]+/, '').replace(/^["'“‘]+|["'”’]+$/g, '').trim();
  if (!s || TOOL_NOTE.test(s)) return null;
  s = s.replace(PAST_REPLY_CLAUSE, '');
  for (const [re, to] of REWRITES) {
    const m = re.exec(s);
    if (m) s = to(m) + s.slice(m[0].length);
  }
  s = s.trim().replace(/[,;:–—-]+$/, '').trim();
  if (!s) return null;
  s = s.charAt(0).toUpperCase() + s.slice(1);
  if (!/[.!?]$/.test(s)) s += '.';
  return isUsefulHint(s) && s.length <= MAX_LESSON_CHARS ? s : null;
}

/** What deduplication compares: the words, lower case. */
export function lessonKey(text: string): string {
  return text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim();
}

export interface Ranked {
  text: string;
  /** Samples that gave it. */
  count: number;
  /** When it was last given (its label's time). */
  lastSeen: number;
}

/** Groups items by key, counting samples and keeping the latest wording; most frequent, then most recent, then by key. */
export function rankByKey(items: readonly { text: string; key: string; sample: string; at: number }[]): Ranked[] {
  const groups = new Map<string, Ranked & { samples: Set<string> }>();
  for (const it of items) {
    const g = groups.get(it.key);
    if (!g) groups.set(it.key, { text: it.text, count: 0, lastSeen: it.at, samples: new Set([it.sample]) });
    else {
      g.samples.add(it.sample);
      if (it.at > g.lastSeen) Object.assign(g, { text: it.text, lastSeen: it.at });
    }
  }
  return [...groups.entries()]
    .map(([key, g]) => ({ key, text: g.text, count: g.samples.size, lastSeen: g.lastSeen }))
    .sort((a, b) => b.count - a.count || b.lastSeen - a.lastSeen || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ text, count, lastSeen }) => ({ text, count, lastSeen }));
}

const sampleOf = (h: LessonHint) => `${h.sessionId}/${h.responseTurn}`;

/** Every candidate lesson of the hints, ranked (step 2 and the order of step 3). */
export function rankedLessons(hints: readonly LessonHint[]): Ranked[] {
  const items = hints.flatMap((h) =>
    sentences(h.hint)
      .map(lessonFromSentence)
      .filter((l): l is string => l !== null)
      .map((text) => ({ text, key: lessonKey(text), sample: sampleOf(h), at: h.updatedAt })),
  );
  return rankByKey(items);
}

/** The first lessons that fit the bounds, in order, duplicates (by their words) dropped. */
export function boundLessons(lessons: readonly string[]): string[] {
  const kept: string[] = [];
  const seen = new Set<string>();
  for (const lesson of lessons) {
    if (kept.length >= MAX_LESSONS) break;
    const key = lessonKey(lesson);
    if (!key || seen.has(key) || lesson.length > MAX_LESSON_CHARS) continue;
    if (formatLessons([...kept, lesson]).length > MAX_LESSONS_CHARS) continue;
    kept.push(lesson);
    seen.add(key);
  }
  return kept;
}

/** The lessons rules distil from the hints (the module's steps 1–3). */
export function rulesLessons(hints: readonly LessonHint[]): string[] {
  return boundLessons(rankedLessons(hints).map((r) => r.text));
}

/** Whole hints, deduplicated and ranked the same way: what the LLM judge reads. */
export function rankedHints(hints: readonly LessonHint[]): Ranked[] {
  return rankByKey(hints.map((h) => ({ text: h.hint.replace(/\s+/g, ' ').trim(), key: lessonKey(h.hint), sample: sampleOf(h), at: h.updatedAt })).filter((h) => h.key));
}
