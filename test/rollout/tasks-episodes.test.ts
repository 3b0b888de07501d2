// Task files (src-main/rollout/tasks.ts): exact answers after normalisation, regular
// expressions, tools resolved against the registry, and a one-line error naming file:line for
// every bad line. The episodes file (src-main/rollout/episodes-file.ts): a run cut off in the
// middle of a line (a torn last line) resumes without losing a finished episode or repeating one,
// and a resume refuses episodes made for another version of a context (their fingerprint).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Episode } from '../../src-shared/rollout.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { normalizeAnswer, readTasks, taskContext, taskReward } from '../../src-main/rollout/tasks.js';
import { checkResumedEpisodes, EpisodeWriter, readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { contextFingerprint, runRollouts } from '../../src-main/rollout/manager.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { builtinTools } from '../../src-main/rollout/builtin-tools.js';
import { ScriptedPolicy } from './scripted-policy.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-tasks-'));
const registry = new ToolRegistry(builtinTools());
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function jsonLinesFile(name: string, lines: unknown[]): string {
  const file = path.join(root, name);
  fs.writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return file;
}

const user = (content: string) => [{ role: 'user', content }];

describe('task files', () => {
  it('normalises answers: NFKC, trim, case, whitespace, trailing punctuation', () => {
    expect(normalizeAnswer('  The   Answer\tis\nParis.  ')).toBe('the answer is paris');
    expect(normalizeAnswer('３９１!?')).toBe('391');
    expect(normalizeAnswer('50%')).toBe('50%');
    expect(normalizeAnswer('3.14')).toBe('3.14');
    expect(normalizeAnswer('Done…')).toBe('done');
  });

  it('reads tasks; an exact answer and a regex score +1 / −1', () => {
    const file = jsonLinesFile('good.jsonl', [
      { messages: [{ role: 'system', content: 'be brief' }, ...user('Capital of France?')], answer: 'Paris' },
      '',
      { messages: user('17 × 23?'), tools: ['calculator'], answer_regex: '^(?:the answer is )?391\\b' },
      { messages: [...user('time?'), { role: 'assistant', content: 'let me check' }, { role: 'tool', name: 'current_time', content: '12:00' }], tools: [] },
    ]);
    const tasks = readTasks(file);
    expect(tasks.map((t) => t.id)).toEqual(['good.jsonl:1', 'good.jsonl:3', 'good.jsonl:4']);
    const exact = taskReward(tasks[0]!)!;
    expect(exact.source).toBe('task');
    expect(['paris', ' PARIS. ', 'Paris!'].map(exact.score)).toEqual([1, 1, 1]);
    expect(['Paris, France', 'Lyon', ''].map(exact.score)).toEqual([-1, -1, -1]);
    const regex = taskReward(tasks[1]!)!;
    expect(['391', '  391 is it', 'the answer is 391.'].map(regex.score)).toEqual([1, 1, 1]);
    expect(['3910', 'maybe 391', 'The answer is 391'].map(regex.score)).toEqual([-1, -1, -1]);
    expect(taskReward(tasks[2]!)).toBeUndefined();
    const contexts = tasks.map((t) => taskContext(t, registry));
    expect(contexts[0]!.tools).toBeUndefined();
    expect(contexts[1]!.tools!.map((s) => s.function.name)).toEqual(['calculator']);
    expect(contexts[2]!.tools).toEqual([]);
    expect(contexts[2]!.messages[2]).toEqual({ role: 'tool', name: 'current_time', content: '12:00' });
  });

  it('names file:line for every bad line', () => {
    const bad: [unknown, RegExp][] = [
      ['{"messages": [', /bad\.jsonl:2: invalid JSON/],
      [[1], /bad\.jsonl:2: expected a JSON object/],
      [{ messages: [] }, /bad\.jsonl:2: "messages" must be a non-empty array/],
      [{ messages: [{ role: 'robot', content: 'x' }] }, /message 1: "role" must be system, user, assistant or tool/],
      [{ messages: [{ role: 'user', content: 7 }] }, /message 1: "content" must be a string/],
      [{ messages: [{ role: 'tool', content: 'x' }] }, /a tool message needs "name"/],
      [{ messages: user('q'), answer: 'a', answer_regex: 'a' }, /give "answer" or "answer_regex", not both/],
      [{ messages: user('q'), answer: ' . ' }, /"answer" must be a non-empty string/],
      [{ messages: user('q'), answer_regex: '(' }, /"answer_regex" is not a valid regular expression/],
      [{ messages: user('q'), tools: 'calculator' }, /"tools" must be an array/],
      [{ messages: user('q'), tools: [{ type: 'function', function: {} }] }, /bad\.jsonl:2: tool 1: "function.name"/],
      [{ messages: user('q'), reward: 1 }, /unknown field "reward"/],
    ];
    for (const [line, message] of bad) {
      const file = jsonLinesFile('bad.jsonl', [{ messages: user('fine') }, line]);
      expect(() => readTasks(file), String(message)).toThrow(message);
    }
    expect(() => readTasks(jsonLinesFile('empty.jsonl', ['', ' ']))).toThrow(/no tasks/);
    expect(() => readTasks(path.join(root, 'nope.jsonl'))).toThrow(/cannot read .*ENOENT/);
    const unknownTool = readTasks(jsonLinesFile('tools.jsonl', [{ messages: user('q'), tools: ['weather'] }]))[0]!;
    expect(() => taskContext(unknownTool, registry)).toThrow(/tools\.jsonl:1: tool 'weather' is not available \(available: calculator, current_time;/);
  });
});

describe('the episodes file', () => {
  let tok: ChatTokenizer;
  beforeAll(() => {
    tok = ChatTokenizer.load(writeTinyModel(path.join(root, 'm'), { family: 'qwen2', seed: 4 }).dir);
  });

  const script = (prompt: string, seed: number) => (prompt.includes('<|im_start|>tool') ? `answer ${seed}` : seed % 3 ? '<tool_call>{"name":"calculator","arguments":{"expression":"1+1"}}</tool_call>' : `quick ${seed}`);
  const contexts = ['a', 'b', 'c', 'd'].map((id) => ({ id, messages: [{ role: 'user' as const, content: `task ${id}` }] }));
  const run = (file: string, writer: EpisodeWriter, only?: string[]) =>
    runRollouts(new ScriptedPolicy(tok, script), only ? contexts.filter((c) => only.includes(c.id)) : contexts, {
      tools: registry, rollouts: 2, skip: new Set(readEpisodes(file).episodes.map((e) => e.id)), onEpisode: (e) => writer.append(e),
      // The seeds follow the context's place in the full list, as the CLI's batches do.
      seedBase: only ? contexts.findIndex((c) => c.id === only[0]) * 2 : 0,
    });
  const comparable = (e: Episode) => JSON.stringify({ ...e, summary: { ...e.summary, seconds: 0 } }).replace(/"ms":\d+/g, '"ms":0');

  it('resumes after a kill mid-line: no finished episode lost, none repeated, the same episodes as one whole run', async () => {
    const whole = path.join(root, 'whole.jsonl');
    const w0 = EpisodeWriter.open(whole).writer;
    await run(whole, w0);
    w0.close();
    const reference = readEpisodes(whole).episodes;
    expect(reference).toHaveLength(8);

    // First run: contexts a and b finish; then the process dies while writing c's first episode.
    const file = path.join(root, 'episodes.jsonl');
    const w1 = EpisodeWriter.open(file).writer;
    await run(file, w1, ['a', 'b']);
    w1.close();
    const torn = JSON.stringify(reference.find((e) => e.contextId === 'c')).slice(0, 150);
    fs.appendFileSync(file, torn);

    const read = readEpisodes(file);
    // In the order they finished: a reply without a tool call ends its episode a turn earlier.
    expect(read.episodes.map((e) => e.id).sort()).toEqual(['a#0@0', 'a#1@0', 'b#0@0', 'b#1@0']);
    expect(read.notes).toEqual([`${file}:5: ignored the torn last line (an interrupted write; 150 bytes)`]);

    // Resume: the torn bytes are cut, the rest is generated, nothing twice.
    const { writer: w2, notes } = EpisodeWriter.open(file);
    expect(notes).toEqual([`${file}: cut 150 bytes of a torn last line (an interrupted write)`]);
    const resumed = await run(file, w2);
    w2.close();
    expect(resumed.map((e) => e.id)).toEqual(['c#0@0', 'c#1@0', 'd#0@0', 'd#1@0']);
    const after = readEpisodes(file);
    expect(after.notes).toEqual([]);
    expect(after.episodes.map(comparable).sort()).toEqual(reference.map(comparable).sort());
    expect(fs.readFileSync(file, 'utf8').endsWith('}\n')).toBe(true);
  });

  it('a resume accepts episodes of the contexts as they are, and older episodes without a fingerprint; another version of a context is refused', () => {
    const episodes = readEpisodes(path.join(root, 'whole.jsonl')).episodes;
    expect(episodes.every((e) => e.contextSha256 === contextFingerprint(contexts.find((c) => c.id === e.contextId)!))).toBe(true);
    expect(() => checkResumedEpisodes('f.jsonl', episodes, contexts)).not.toThrow();
    const older = episodes.map(({ contextSha256: _, ...e }) => e);
    expect(() => checkResumedEpisodes('f.jsonl', older, contexts)).not.toThrow();
    const checked = contexts.map((c) => (c.id === 'b' ? { ...c, reward: { source: 'task' as const, key: 'answer "2"', score: () => 1 } } : c));
    expect(() => checkResumedEpisodes('f.jsonl', episodes, checked)).toThrow(/^f\.jsonl holds episodes of other tasks \(episode b#\d@0 was made for another version of b: its answer or tools changed\)/);
    expect(() => checkResumedEpisodes('f.jsonl', older, checked)).not.toThrow();
    expect(() => readEpisodes(jsonLinesFile('sha.jsonl', [{ ...episodes[0], contextSha256: 'abc' }]))).toThrow(/contextSha256 must be 64 hex digits/);
  });

  it('a last line that lost only its newline is a whole episode: kept, and the next one starts on its own line', () => {
    const src = path.join(root, 'whole.jsonl');
    const [first, second] = readEpisodes(src).episodes;
    const file = path.join(root, 'no-newline.jsonl');
    fs.writeFileSync(file, JSON.stringify(first));
    expect(readEpisodes(file).episodes.map((e) => e.id)).toEqual([first!.id]);
    const { writer, notes } = EpisodeWriter.open(file);
    expect(notes).toEqual([]);
    writer.append(second!);
    writer.close();
    expect(readEpisodes(file).episodes.map((e) => e.id)).toEqual([first!.id, second!.id]);
  });

  it('a bad line anywhere else is an error naming file:line', () => {
    const [good] = readEpisodes(path.join(root, 'whole.jsonl')).episodes;
    const file = path.join(root, 'bad.jsonl');
    const check = (lines: string[], message: RegExp) => {
      fs.writeFileSync(file, lines.join('\n') + '\n');
      expect(() => readEpisodes(file)).toThrow(message);
    };
    check(['{"id":', JSON.stringify(good)], /bad\.jsonl:1: invalid JSON/);
    check([JSON.stringify(good), JSON.stringify(good)], /bad\.jsonl:2: episode a#0@0 appears twice/);
    check([JSON.stringify({ ...good, finish: 'bored' })], /bad\.jsonl:1: not an episode: finish must be one of/);
    check([JSON.stringify({ ...good, tokens: { ...good!.tokens, logprobs: good!.tokens.logprobs.slice(1) } })], /tokens\.logprobs must have \d+ values \(one per generated token\)/);
    check([JSON.stringify({ ...good, tokens: { ...good!.tokens, generated: [{ start: 0, end: 2 }] } })], /tokens\.generated\[0\]\.start must be a whole number in \d+…/);
    check([JSON.stringify({ ...good, rewards: [{ at: 1e6, r: 1 }] })], /rewards\[0\]\.at must be a whole number in 0…/);
    // The rules the Rollouts view applies, in one place: a gap per generated token, no empty span, log-probs ≤ 0.
    const { start, end } = good!.tokens.generated[0]!;
    check([JSON.stringify({ ...good, teacherGap: [0.5] })], new RegExp(`bad\\.jsonl:1: not an episode: teacherGap must have ${good!.tokens.logprobs.length} values`));
    check([JSON.stringify({ ...good, tokens: { ...good!.tokens, generated: [{ start, end: start }], logprobs: [] } })], /tokens\.generated\[0\]\.end must be a whole number in/);
    check([JSON.stringify({ ...good, tokens: { ...good!.tokens, logprobs: good!.tokens.logprobs.map((x, i) => (i === 0 ? 0.5 : x)) } })], /tokens\.logprobs\[0\] must be ≤ 0/);
    expect(end).toBeGreaterThan(start);
    expect(readEpisodes(path.join(root, 'absent.jsonl'))).toEqual({ episodes: [], notes: [] });
  });
});
