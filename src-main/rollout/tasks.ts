/**
 * Task files (docs/design.md §Rollouts): JSONL, one task a line,
 *
 *     {"messages":[{"role":"user","content":"What is 17 × 23?"}], "tools":["calculator"], "answer":"391"}
 *
 * - `messages` (required): system / user / assistant / tool messages (a tool message names
 *   its tool in `name`); the episode continues after them.
 * - `tools` (optional): what the model is shown and may call: names of available tools, or
 *   OpenAI-style schemas of them (to describe a tool differently). Absent: every available
 *   tool; `[]`: none.
 * - `answer` or `answer_regex` (optional, not both): how the final answer is scored, +1 or −1.
 *   `answer` matches after {@link normalizeAnswer} on both sides; `answer_regex` is a
 *   JavaScript regular expression searched for in the trimmed answer (anchor it with ^…$ to
 *   match the whole answer). Neither: the episode has no reward.
 *
 * Every problem is a one-line UserError naming the file and line. A context's id is
 * `<file name>:<line>`, so a resumed run recognises its episodes however the path is spelled.
 */
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { readJsonLines } from '../store/jsonl-file.js';
import type { PromptMessage, RewardCheck, RolloutContext } from './manager.js';
import type { ToolRegistry, ToolSchema } from './tools.js';
import { checkToolSchema } from './user-tools.js';

export interface Task {
  /** `<file name>:<line>`. */
  id: string;
  /** `<file>:<line>` as given, for messages. */
  where: string;
  messages: PromptMessage[];
  tools?: (string | ToolSchema)[];
  answer?: string;
  answerRegex?: RegExp;
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
const KNOWN_KEYS = new Set(['messages', 'tools', 'answer', 'answer_regex']);
/** Trailing punctuation that does not change an answer: "Paris." is "Paris". */
const TRAILING_PUNCTUATION = /[\s.,;:!?…。，；：！？]+$/u;

/**
 * An answer as compared with a task's `answer`: Unicode NFKC (full-width digits are digits),
 * trimmed, lower-cased, every run of whitespace one space, trailing punctuation removed.
 */
export function normalizeAnswer(text: string): string {
  return text.normalize('NFKC').trim().toLowerCase().replace(/\s+/g, ' ').replace(TRAILING_PUNCTUATION, '');
}

function lineError(where: string, message: string): never {
  throw new UserError(`${where}: ${message}`);
}

function parseMessages(value: unknown, where: string): PromptMessage[] {
  if (!Array.isArray(value) || value.length === 0) lineError(where, '"messages" must be a non-empty array of {"role","content"}');
  return value.map((m, i) => {
    const at = `message ${i + 1}`;
    if (!m || typeof m !== 'object' || Array.isArray(m)) lineError(where, `${at} must be an object {"role","content"}`);
    const { role, content, name } = m as Record<string, unknown>;
    if (typeof role !== 'string' || !ROLES.has(role)) lineError(where, `${at}: "role" must be system, user, assistant or tool, got ${JSON.stringify(role)}`);
    if (typeof content !== 'string') lineError(where, `${at}: "content" must be a string`);
    if (role === 'tool') {
      if (typeof name !== 'string' || !name) lineError(where, `${at}: a tool message needs "name" (the tool it answers for)`);
      return { role, name, content };
    }
    return { role: role as 'system' | 'user' | 'assistant', content: content as string };
  });
}

function parseTools(value: unknown, where: string): (string | ToolSchema)[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) lineError(where, '"tools" must be an array of tool names or {"type":"function","function":{…}} schemas');
  return value.map((t, i) => (typeof t === 'string' ? t : checkToolSchema(t, `${where}: tool ${i + 1}`)));
}

/** Parses one task line (already JSON). */
export function parseTask(obj: unknown, id: string, where: string): Task {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) lineError(where, 'expected a JSON object {"messages":[…], …}');
  const o = obj as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !KNOWN_KEYS.has(k));
  if (unknown.length) lineError(where, `unknown field ${JSON.stringify(unknown[0])} (a task has messages, tools, answer, answer_regex)`);
  const task: Task = { id, where, messages: parseMessages(o.messages, where), tools: parseTools(o.tools, where) };
  if (o.answer !== undefined && o.answer_regex !== undefined) lineError(where, 'give "answer" or "answer_regex", not both');
  if (o.answer !== undefined) {
    if (typeof o.answer !== 'string' || !normalizeAnswer(o.answer)) lineError(where, '"answer" must be a non-empty string');
    task.answer = o.answer as string;
  }
  if (o.answer_regex !== undefined) {
    if (typeof o.answer_regex !== 'string' || !o.answer_regex) lineError(where, '"answer_regex" must be a non-empty string');
    try {
      task.answerRegex = new RegExp(o.answer_regex as string, 'u');
    } catch (err) {
      lineError(where, `"answer_regex" is not a valid regular expression (${(err as Error).message})`);
    }
  }
  return task;
}

/** Reads and checks a whole task file. */
export function readTasks(file: string): Task[] {
  const name = path.basename(file);
  const tasks = readJsonLines(file).lines.map(({ value, where, line }) => parseTask(value, `${name}:${line}`, where));
  if (!tasks.length) throw new UserError(`${file}: no tasks (one JSON object per line)`);
  return tasks;
}

/** The task's scoring: +1 when the final answer matches, −1 otherwise; undefined without one. */
export function taskReward(task: Task): RewardCheck | undefined {
  if (task.answer !== undefined) {
    const want = normalizeAnswer(task.answer);
    return { source: 'task', key: `answer ${JSON.stringify(want)}`, score: (answer) => (normalizeAnswer(answer) === want ? 1 : -1) };
  }
  const regex = task.answerRegex;
  if (regex) return { source: 'task', key: `answer_regex ${regex}`, score: (answer) => (regex.test(answer.trim()) ? 1 : -1) };
  return undefined;
}

/** The task as a rollout context: its tools resolved against `registry` (unknown names are a line error). */
export function taskContext(task: Task, registry: ToolRegistry): RolloutContext {
  const tools = task.tools?.map((t): ToolSchema => {
    const name = typeof t === 'string' ? t : t.function.name;
    if (!registry.has(name)) {
      lineError(task.where, `tool '${name}' is not available (available: ${registry.names.join(', ') || 'none'}; a tool of your own is declared with --tools FILE and runs at --tool-url)`);
    }
    return typeof t === 'string' ? registry.schemas([t])[0]! : t;
  });
  return { id: task.id, messages: task.messages, tools, reward: taskReward(task) };
}
