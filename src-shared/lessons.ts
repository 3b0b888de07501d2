/**
 * Lessons without training (docs/design.md §Lessons): the user's hints and corrections distilled
 * into a short system prompt, which the base model is then given instead of being trained. The
 * format, the bounds, how a conversation gets the lessons, what is stored and the app's calls.
 * Node-free: the contract spreads LESSONS_CALLS into its calls, and the renderer reads the types.
 *
 * The format is one header line, then one lesson a line, each an instruction starting "- ":
 *
 *     Lessons from this user's feedback on earlier replies; follow them:
 *     - Be more concise.
 *     - Use Python, not JavaScript, unless asked otherwise.
 *
 * The user may edit the text freely; what is stored is exactly the system prompt that is used.
 */
import { call, returns } from './call-spec.js';
import { object, string } from './validate.js';

export const LESSONS_HEADER = "Lessons from this user's feedback on earlier replies; follow them:";
/** At most this many lessons, in at most this many characters (header and markers included). */
export const MAX_LESSONS = 10;
export const MAX_LESSONS_CHARS = 1200;
/** A single lesson longer than this is left out: a rule, not a paste. */
export const MAX_LESSON_CHARS = 240;
/** The longest text the app and `lessons --set` accept (an edited system prompt). */
export const MAX_LESSONS_TEXT = 20_000;

/** The system prompt of a list of lessons: the header, then one "- lesson" a line; '' for none. */
export function formatLessons(lessons: readonly string[]): string {
  return lessons.length ? [LESSONS_HEADER, ...lessons.map((l) => `- ${l}`)].join('\n') : '';
}

/** The lessons a text holds: its "- " / "* " lines (what formatLessons wrote, or the user kept). */
export function lessonLines(text: string): string[] {
  return text.split('\n').map((l) => /^\s*[-*•]\s+(.*\S)\s*$/.exec(l)?.[1]).filter((l): l is string => !!l);
}

/**
 * A conversation as the model sees it with the lessons: merged into its leading system turn
 * (after that turn's own text, a blank line between), or as a new system turn when it has none.
 * The chat template then renders it as any system prompt; a template's default system prompt
 * (SmolLM2's, Qwen2.5's), written only when there is no system turn, gives way as it would to
 * any system prompt. Blank lessons leave the conversation as it is. The input is not modified.
 */
export function withLessons<M extends { role: string; content: string }>(messages: readonly M[], lessons: string): M[] {
  const text = lessons.trim();
  const out = messages.map((m) => ({ ...m }));
  if (!text) return out;
  if (out[0]?.role === 'system') {
    out[0].content = out[0].content.trim() ? `${out[0].content}\n\n${text}` : text;
    return out;
  }
  return [{ role: 'system', content: text } as M, ...out];
}

/** One hint lessons are distilled from: a sample's hint as training would use it, with its label's source and time. */
export interface LessonHint {
  sessionId: string;
  responseTurn: number;
  hint: string;
  /** 'manual' (typed), 'heuristic' or 'judge:<model>'. */
  source: string | null;
  updatedAt: number;
}

/** Where the stored lessons came from: distilled by rules, by the LLM judge, or edited by the user. */
export type LessonsSource = 'rules' | 'judge' | 'edited';

/** The lessons a database keeps (its `settings` table, key 'lessons'). */
export interface StoredLessons {
  /** The system prompt, exactly as used (evaluation, the Modelfile's SYSTEM, the text export). */
  text: string;
  source: LessonsSource;
  /** With source 'judge': `<backend>:<model>` and the prompt version ('local:qwen3-0.6b lessons-v1'). */
  judge: string | null;
  /** The hints it was distilled from (0 for text the user wrote). */
  hints: number;
  updatedAt: number;
  /** One line the user should know: the judge's answer fell back to rules, and why. */
  note: string | null;
}

/** What the Lessons page shows: the stored lessons and what a distillation would start from. */
export interface LessonsView {
  lessons: StoredLessons | null;
  /** Hints training would use (typed ones, and judges' that pass the filter) of the sessions trained on. */
  hints: number;
  /** Hints of held-out sessions: never distilled, so the evaluation on them stays fair. */
  heldOutHints: number;
  /** Who distils on `lessonsDistil`: 'rules', or the LLM judge of Settings ('local:<dir>', 'openai:<model>'). */
  distiller: string;
}

const text = string({ max: MAX_LESSONS_TEXT });

export const LESSONS_CALLS = {
  lessonsGet: call('The lessons (a system prompt distilled from your hints), where they came from, and the hints a distillation would read.', object({}), returns<LessonsView>()),
  lessonsSave: call("Stores the lessons as edited (text '' clears them).", object({ text }), returns<LessonsView>()),
  lessonsDistil: call(
    "Distils the hints of the sessions trained on into lessons, by the LLM judge of Settings (by rules with the heuristic, or when the judge's answer holds none), and stores them.",
    object({}),
    returns<LessonsView>(),
  ),
  lessonsWrite: call('Writes the lessons to a text file, as a system prompt to paste elsewhere.', object({ outPath: string({ min: 1, max: 4096 }) }), returns<{ path: string; chars: number }>()),
};
