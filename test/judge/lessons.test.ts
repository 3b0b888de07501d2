// Lessons without training (docs/design.md §Lessons): the rules' distillation on hand-made hints
// (a fixed, deterministic text), the judge's answer read, and the LLM path on a real run of the
// local backend (the demo model with 2048 positions: it cannot write lessons, so the prompt, its
// fitting and the fallback to rules are what is checked), then an OpenAI-compatible judge that
// answers well, one that refuses the prompt's length once, and one whose server is down.
import { afterAll, describe, expect, it } from 'vitest';
import { formatLessons, LESSONS_HEADER, MAX_LESSONS, MAX_LESSONS_CHARS, withLessons, type LessonHint } from '../../src-shared/lessons.js';
import { answerReserve, type FittedPrompt } from '../../src-main/judge/prompt-fit.js';
import { lessonFromSentence, rankedHints, rulesLessons } from '../../src-main/judge/lesson-rules.js';
import { distilLessons, LESSONS_PROMPT_VERSION, lessonsPrompt, parseLessonsAnswer } from '../../src-main/judge/lessons-judge.js';
import { DEFAULT_JUDGE_MAX_TOKENS } from '../../src-main/judge/llm-judge.js';
import { LocalCompleter } from '../../src-main/judge/local-completer.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { closedPort, demoModelWithPositions, scriptedServer, type ScriptedServer } from './helpers.js';

let at = 0;
/** Hints in the order given, each on its own sample, later ones more recent. */
const hints = (...texts: string[]): LessonHint[] => texts.map((hint) => ({ sessionId: `s${at}`, responseTurn: at++, hint, source: 'manual', updatedAt: 1_000 + at }));

const servers: ScriptedServer[] = [];
afterAll(() => Promise.all(servers.map((s) => s.close())));

describe('lessons by rules', () => {
  it('turns each sentence of a hint into an instruction, or into nothing', () => {
    expect(lessonFromSentence('Be more concise: the previous reply was too long.')).toBe('Be more concise.');
    expect(lessonFromSentence('I said Python, not JavaScript.')).toBe('The user said Python, not JavaScript.');
    expect(lessonFromSentence('You forgot the return type.')).toBe("Don't forget the return type.");
    expect(lessonFromSentence('Please add type hints')).toBe('Add type hints.');
    expect(lessonFromSentence('- use metric units')).toBe('Use metric units.');
    expect(lessonFromSentence("The tool call failed: FileNotFoundError: 'sales.csv'")).toBeNull(); // one call's error
    expect(lessonFromSentence('That was wrong.')).toBeNull(); // no direction
    expect(lessonFromSentence('Short.')).toBeNull(); // 10 characters or fewer
    expect(lessonFromSentence('Use the median instead; the mean is pulled up by the outliers.')).toBe('Use the median instead; the mean is pulled up by the outliers.');
  });

  it('gives a fixed text: deduplicated, most frequent first, then most recent, bounded', () => {
    at = 0;
    const input = hints(
      'Be more concise: the previous reply was too long.',
      'I said Python, not JavaScript.',
      'Use a LEFT JOIN instead.',
      'be more concise!',
      'The tool call failed: Error: the request timed out after 30 s',
      'Use metric units. Be more concise.',
      'That was wrong.',
      'You forgot the return type.',
      'I said Python, not JavaScript.',
    );
    const expected = [
      LESSONS_HEADER,
      '- Be more concise.', // 3 samples (the latest wording is the one kept, with a full stop)
      '- The user said Python, not JavaScript.', // 2
      "- Don't forget the return type.", // 1, the most recent
      '- Use metric units.',
      '- Use a LEFT JOIN instead.',
    ].join('\n');
    expect(formatLessons(rulesLessons(input))).toBe(expected);
    // The same hints in another order give the same text.
    expect(formatLessons(rulesLessons([...input].reverse()))).toBe(expected);
    // Whole hints, for the judge: the same ranking over the hints as written.
    expect(rankedHints(input).slice(0, 2)).toEqual([
      { text: 'I said Python, not JavaScript.', count: 2, lastSeen: input[8]!.updatedAt },
      { text: 'You forgot the return type.', count: 1, lastSeen: input[7]!.updatedAt },
    ]);
  });

  it('keeps at most MAX_LESSONS lessons within MAX_LESSONS_CHARS', () => {
    at = 0;
    const many = hints(...Array.from({ length: 40 }, (_, i) => `Always mention the project code name number ${i} in the summary section.`));
    const kept = rulesLessons(many);
    expect(kept).toHaveLength(MAX_LESSONS);
    at = 0;
    const long = hints(...Array.from({ length: 12 }, (_, i) => `Keep answer number ${i} ${'very '.repeat(30)}short and to the point.`));
    const text = formatLessons(rulesLessons(long));
    expect(text.length).toBeLessThanOrEqual(MAX_LESSONS_CHARS);
    expect(rulesLessons(long).length).toBeLessThan(MAX_LESSONS);
  });
});

describe('lessons as a system prompt', () => {
  it('merge into the leading system turn, or become one, and leave the input alone', () => {
    const plain = [{ role: 'user', content: 'Hi' }];
    expect(withLessons(plain, 'L')).toEqual([{ role: 'system', content: 'L' }, { role: 'user', content: 'Hi' }]);
    const sys = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi' }];
    expect(withLessons(sys, 'L')).toEqual([{ role: 'system', content: 'You are terse.\n\nL' }, { role: 'user', content: 'Hi' }]);
    expect(sys[0]!.content).toBe('You are terse.');
    expect(withLessons(sys, '  ')).toEqual(sys);
  });
});

describe("reading the judge's answer", () => {
  it('takes the "- " lines of the last block after the reasoning, each passing the hint filter', () => {
    const raw = '<think>Maybe [LESSONS_START]\n- Wrong one.\n[LESSONS_END]</think>Here:\n[LESSONS_START]\n- Use Python 3 with type hints.\n* Keep replies under 200 words.\n2. Cite the source of every number.\n- ok\nnot a list line\n[LESSONS_END]';
    expect(parseLessonsAnswer(raw)).toEqual(['Use Python 3 with type hints.', 'Keep replies under 200 words.', 'Cite the source of every number.']);
    expect(parseLessonsAnswer('[LESSONS_START]\n- Use Python.')).toBeNull(); // cut off before the end tag
    expect(parseLessonsAnswer('- Use Python 3 everywhere.')).toBeNull(); // no block
    expect(parseLessonsAnswer('[LESSONS_START]\n- That was wrong.\n[LESSONS_END]')).toBeNull(); // nothing usable
  });
});

describe('lessons by the local judge (the demo model, 2048 positions)', () => {
  it('fits the prompt to the context, least frequent hints left out, and falls back to rules with one line', async () => {
    at = 0;
    // 150 distinct hints, the first given three times: far more than 2048 tokens of prompt.
    const input = hints(...Array.from({ length: 150 }, (_, i) => `Mention the colour of balloon number ${i} in every answer you write.`), 'Mention the colour of balloon number 0 in every answer you write.', 'Mention the colour of balloon number 0 in every answer you write.');
    const completer = await LocalCompleter.load(demoModelWithPositions(2048));
    const sent: { fitted: FittedPrompt; raw: string }[] = [];
    try {
      const d = await distilLessons(input, completer, { onExchange: (fitted, raw) => sent.push({ fitted, raw }) });
      expect(sent).toHaveLength(1);
      const { fitted, raw } = sent[0]!;
      // The prompt: the instructions, then the hints most frequent first with their counts, as many as fit.
      expect(fitted.messages[0]!.content).toContain('[LESSONS_START] and [LESSONS_END]');
      const lines = fitted.messages[1]!.content.split('\n').filter((l) => l.startsWith('- [×'));
      expect(lines[0]).toBe('- [×3] Mention the colour of balloon number 0 in every answer you write.');
      expect(fitted.droppedTurns).toBeGreaterThan(0);
      expect(lines).toHaveLength(150 - fitted.droppedTurns);
      expect(fitted.messages).toEqual(lessonsPrompt(rankedHints(input).slice(0, lines.length)));
      // Counted exactly on the model's template, within the room the answer leaves.
      expect(fitted.promptTokens).toBe(completer.countTokens(fitted.messages));
      expect(fitted.promptTokens).toBeLessThanOrEqual(2048 - answerReserve(2048, DEFAULT_JUDGE_MAX_TOKENS));
      expect(completer.countTokens(lessonsPrompt(rankedHints(input).slice(0, lines.length + 1)))).toBeGreaterThan(2048 - answerReserve(2048, DEFAULT_JUDGE_MAX_TOKENS));
      // A tiny story model writes no lessons: rules distil instead, and one line says why.
      expect(parseLessonsAnswer(raw)).toBeNull();
      expect(d).toMatchObject({ source: 'rules', judge: null, hints: 152 });
      expect(d.note).toMatch(/^the judge's answer \(stories260K\) (held no lessons between \[LESSONS_START\] and \[LESSONS_END\]|was cut off by its token limit before any lesson); distilled by rules instead$/);
      expect(d.text).toBe(formatLessons(rulesLessons(input)));
    } finally {
      await completer.close();
    }
  }, 120_000);
});

describe('lessons by an OpenAI-compatible judge', () => {
  const good = '<think>They want Python.</think>\n[LESSONS_START]\n- Answer in Python unless asked for another language.\n- Keep replies short.\n[LESSONS_END]';
  const input = () => ((at = 0), hints('I said Python, not JavaScript.', 'Too long, keep it short.', 'I said Python.'));

  it('writes the lessons, at temperature 0, and says which judge and prompt wrote them', async () => {
    const server = await scriptedServer(() => ({ content: good }));
    servers.push(server);
    const d = await distilLessons(input(), new OpenAiClient({ baseUrl: server.baseUrl, model: 'judge-7b' }));
    expect(d).toEqual({
      text: `${LESSONS_HEADER}\n- Answer in Python unless asked for another language.\n- Keep replies short.`,
      lessons: ['Answer in Python unless asked for another language.', 'Keep replies short.'],
      source: 'judge', judge: `openai:judge-7b ${LESSONS_PROMPT_VERSION}`, hints: 3, note: null,
    });
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.body).toMatchObject({ model: 'judge-7b', temperature: 0 });
    expect(server.requests[0]!.body.messages[1].content).toContain('- [×1] I said Python, not JavaScript.');
  });

  it("learns the server's context from a refusal and asks once more with fewer hints", async () => {
    const refusal = { status: 400, body: { error: { message: "This model's maximum context length is 700 tokens. However, you requested 1500 tokens (900 in the messages, 600 in the completion)." } } };
    const server = await scriptedServer((_, n) => (n === 0 ? refusal : { content: good }));
    servers.push(server);
    at = 0;
    const many = hints(...Array.from({ length: 40 }, (_, i) => `Name the unit of every number in answer ${i}, please.`));
    const d = await distilLessons(many, new OpenAiClient({ baseUrl: server.baseUrl, model: 'small', retries: 0 }));
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.body.messages[1].content.length).toBeLessThan(server.requests[0]!.body.messages[1].content.length);
    expect(d.source).toBe('judge');
    expect(d.note).toMatch(/^the judge read the \d+ most frequent of 40 distinct hints: the rest did not fit its 700-token context$/);
  });

  it('falls back to rules with one line when the judge answers garbage or cannot be reached', async () => {
    const server = await scriptedServer(() => ({ content: 'I think the user is happy. \\boxed{1}' }));
    servers.push(server);
    const garbage = await distilLessons(input(), new OpenAiClient({ baseUrl: server.baseUrl, model: 'judge-7b' }));
    expect(garbage).toMatchObject({ source: 'rules', text: formatLessons(rulesLessons(input())), note: "the judge's answer (judge-7b) held no lessons between [LESSONS_START] and [LESSONS_END]; distilled by rules instead" });
    const down = await distilLessons(input(), new OpenAiClient({ baseUrl: `http://127.0.0.1:${await closedPort()}/v1`, model: 'judge-7b', retries: 0 }));
    expect(down.source).toBe('rules');
    expect(down.note).toMatch(/^the judge \(judge-7b\) could not answer \(.+\); distilled by rules instead$/);
    expect(down.note).not.toContain('\n');
  });

  it('refuses to distil nothing', async () => {
    await expect(distilLessons([], null)).rejects.toThrow(/no hints to distil lessons from/);
  });
});
