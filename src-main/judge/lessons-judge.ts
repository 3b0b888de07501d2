/**
 * Distilling lessons (docs/design.md §Lessons): by the LLM judge when one is set, by rules
 * (./lesson-rules.ts) when none is, or when the judge's answer holds no lessons.
 *
 * The judge reads the hints as OpenClaw-RL's training-free track reads its stored experiences,
 * but once, for all of them: whole hints, deduplicated, most frequent first with their counts,
 * and writes at most MAX_LESSONS standing instructions between [LESSONS_START] and
 * [LESSONS_END], one "- " line each. The prompt is fitted to the judge's context
 * (./prompt-fit.ts): the least frequent hints are left out first. It answers at temperature 0
 * (the same judge and hints give the same lessons, where the backend honours it) with the
 * judge's token budget (a thinking budget for a judge that always thinks). Its answer is read
 * after any reasoning; lessons that fail the hint filter are dropped; none left, an unreadable
 * answer, a prompt that cannot fit or a failed request fall back to rules, with one line saying
 * so (`note`).
 */
import { formatLessons, MAX_LESSONS, type LessonHint, type LessonsSource, type StoredLessons } from '../../src-shared/lessons.js';
import { UserError } from '../../src-shared/types.js';
import { openCompleter, type LlmJudgeSpec } from './backends.js';
import { isUsefulHint } from './hint-rules.js';
import { boundLessons, rankedHints, rulesLessons } from './lesson-rules.js';
import { DEFAULT_JUDGE_MAX_TOKENS, THINKING_JUDGE_MAX_TOKENS, type ChatCompleter } from './llm-judge.js';
import { stripReasoning, wasCutOff } from './parse.js';
import { ContextOverflowError, fitPrompt, type FittedPrompt } from './prompt-fit.js';
import { clip, type PromptMessage } from './prompts.js';

/** The lessons prompt's version: bump on any change of its wording. */
export const LESSONS_PROMPT_VERSION = 'lessons-v1';
/** Longest stretch of one hint put into the prompt. */
const HINT_CHARS = 400;

const LESSONS_SYSTEM = `You turn a user's feedback on an AI assistant into standing instructions for that assistant.
You are shown hints, each written after one of the assistant's replies to this user, saying what would have made that reply better. [×N] says how many replies got the same hint.

Write the lessons the assistant should follow in every future conversation with this user: preferences, constraints and mistakes to avoid that hold beyond one conversation. Merge hints that say the same thing; put the most frequent and most important first; write at most ${MAX_LESSONS}. Leave out what concerned one conversation only (a fact of that task, a file name, what a tool returned).
Each lesson is one short instruction ("Answer in Python unless asked for another language."), never a verdict on a past reply ("The reply was wrong.").

You may think first. Then write the lessons between [LESSONS_START] and [LESSONS_END], one a line, each line starting with "- ".`;

/** The judge's prompt over the first `hints` (ranked: most frequent first). */
export function lessonsPrompt(hints: readonly { text: string; count: number }[]): PromptMessage[] {
  const lines = hints.map((h) => `- [×${h.count}] ${clip(h.text, HINT_CHARS)}`);
  return [
    { role: 'system', content: LESSONS_SYSTEM },
    { role: 'user', content: `## Hints (${hints.length}, most frequent first)\n${lines.join('\n')}\n\nWrite the lessons between [LESSONS_START] and [LESSONS_END], one "- " line each.` },
  ];
}

/**
 * The lessons of a judge's answer: the "- " (or "* ", "1. ") lines of the last complete
 * [LESSONS_START]…[LESSONS_END] block after any reasoning, each passing the hint filter. Null
 * when there is no such block or it holds no usable lesson.
 */
export function parseLessonsAnswer(raw: string): string[] | null {
  const text = stripReasoning(raw);
  const end = text.lastIndexOf('[LESSONS_END]');
  const start = end < 0 ? -1 : text.lastIndexOf('[LESSONS_START]', end);
  if (start < 0) return null;
  const lessons = text
    .slice(start + '[LESSONS_START]'.length, end)
    .split('\n')
    .map((l) => /^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$/.exec(l)?.[1]?.replace(/\s+/g, ' '))
    .filter((l): l is string => !!l && isUsefulHint(l));
  const bounded = boundLessons(lessons);
  return bounded.length ? bounded : null;
}

export interface Distilled {
  /** The system prompt ('' when there is no lesson). */
  text: string;
  lessons: string[];
  source: Extract<LessonsSource, 'rules' | 'judge'>;
  /** `<backend>:<model> lessons-v1` when the judge wrote them. */
  judge: string | null;
  hints: number;
  /** One line for the user: a fallback to rules and why, or hints the judge's context left out. */
  note: string | null;
}

export interface DistilOptions {
  signal?: AbortSignal;
  /** Sees each prompt sent to the judge and its raw answer (tests, diagnostics). */
  onExchange?: (sent: FittedPrompt, raw: string) => void;
}

function byRules(hints: readonly LessonHint[], note: string | null): Distilled {
  const lessons = rulesLessons(hints);
  return { text: formatLessons(lessons), lessons, source: 'rules', judge: null, hints: hints.length, note };
}

const firstLine = (s: string) => s.split('\n')[0]!.slice(0, 200);

/** Asks the judge once, fitting the prompt first and refitting once after a server's context-length refusal. */
async function ask(completer: ChatCompleter, ranked: ReturnType<typeof rankedHints>, options: DistilOptions): Promise<{ raw: string; fitted: FittedPrompt }> {
  const maxTokens = completer.alwaysThinks?.() ? THINKING_JUDGE_MAX_TOKENS : DEFAULT_JUDGE_MAX_TOKENS;
  const build = (k: number) => lessonsPrompt(ranked.slice(0, k + 1));
  const measure = completer.contextTokens && completer.countTokens
    ? { contextTokens: () => completer.contextTokens!(), countTokens: (p: PromptMessage[]) => completer.countTokens!(p) }
    : null;
  for (let attempt = 0; ; attempt++) {
    const fitted = measure ? fitPrompt(build, ranked.length - 1, measure, maxTokens) : { messages: build(ranked.length - 1), promptTokens: 0, maxTokens, droppedTurns: 0 };
    try {
      const raw = await completer.complete(fitted.messages, { temperature: 0, maxTokens: fitted.maxTokens, seed: 0, signal: options.signal });
      options.onExchange?.(fitted, raw);
      return { raw, fitted };
    } catch (err) {
      if (!(err instanceof ContextOverflowError) || attempt > 0 || !completer.learnContext) throw err;
      completer.learnContext(err, fitted.messages);
    }
  }
}

/**
 * Lessons from the hints: by the judge (`completer`) when given, else by rules. Throws only
 * when there is no hint at all, or when `signal` aborts; every failure of the judge falls
 * back to rules with a note.
 */
export async function distilLessons(hints: readonly LessonHint[], completer: ChatCompleter | null, options: DistilOptions = {}): Promise<Distilled> {
  if (hints.length === 0) {
    throw new UserError('no hints to distil lessons from: write hints on replies (the annotator, or `hindsight label --hint`), or run the judge with hints, on sessions that are not held out');
  }
  const ranked = rankedHints(hints);
  if (!completer || ranked.length === 0) return byRules(hints, null);
  const judge = `${completer.backend}:${completer.model} ${LESSONS_PROMPT_VERSION}`;
  let answer: { raw: string; fitted: FittedPrompt };
  try {
    answer = await ask(completer, ranked, options);
  } catch (err) {
    if (options.signal?.aborted || (err as { name?: string })?.name === 'AbortError') throw err;
    return byRules(hints, `the judge (${completer.model}) could not answer (${firstLine((err as Error).message)}); distilled by rules instead`);
  }
  const lessons = parseLessonsAnswer(answer.raw);
  if (!lessons) {
    const why = wasCutOff(answer.raw) ? 'was cut off by its token limit before any lesson' : 'held no lessons between [LESSONS_START] and [LESSONS_END]';
    return byRules(hints, `the judge's answer (${completer.model}) ${why}; distilled by rules instead`);
  }
  const left = answer.fitted.droppedTurns;
  const note = left ? `the judge read the ${ranked.length - left} most frequent of ${ranked.length} distinct hints: the rest did not fit its ${completer.contextTokens?.()}-token context` : null;
  return { text: formatLessons(lessons), lessons, source: 'judge', judge, hints: hints.length, note };
}

/** Who would distil the lessons now, as the Lessons page and `hindsight lessons` show it. */
export const distillerName = (j: LlmJudgeSpec | null): string => (j === null ? 'rules' : j.backend === 'local' ? `local:${j.modelDir}` : `openai:${j.model}`);

/** What distilLessonsInto reads and writes: the workspace's hints and its stored lessons. */
export interface LessonsStore {
  lessonHints(): { hints: LessonHint[] };
  setLessons(lessons: StoredLessons): void;
}

/**
 * Distils the store's hints (by `judge`, or by rules when it is null or has no hint to read)
 * and stores the result: the one sequence behind `hindsight lessons --regenerate` and the
 * Lessons page's Distil button. The judge's model is closed again whatever happens.
 */
export async function distilLessonsInto(store: LessonsStore, judge: LlmJudgeSpec | null): Promise<Distilled> {
  const { hints } = store.lessonHints();
  const completer = judge && hints.length ? await openCompleter(judge) : null;
  try {
    const d = await distilLessons(hints, completer);
    store.setLessons({ text: d.text, source: d.source, judge: d.judge, hints: d.hints, updatedAt: Date.now(), note: d.note });
    return d;
  } finally {
    await completer?.close();
  }
}
