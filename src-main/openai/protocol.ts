/**
 * The OpenAI chat-completions wire format, as far as Hindsight's endpoint speaks it:
 * checking a request (every problem is a 400 naming the field, never a crash), and the
 * shapes of answers, stream chunks and errors.
 *
 * Supported: messages (text content; string or [{type:"text"}] parts; assistant
 * tool_calls and tool results), model, temperature, top_p, max_tokens /
 * max_completion_tokens, seed, stop, stream (+ stream_options.include_usage), logprobs
 * (non-streaming), tools (rendered by the model's chat template), n (up to {@link MAX_N}: the choices
 * are one batched generation, choice j seeded with seed + j; streamed, each chunk names its choice's
 * index, as OpenAI's do). Unknown fields are
 * ignored, as OpenAI-compatible servers do; unsupported values of known ones are refused.
 * max_tokens is checked here against MAX_MAX_TOKENS only: the served model's context caps it
 * further once the prompt is rendered (./local-chat.ts).
 */
import type { ChatMessage } from '../model/tokenizer.js';

export const DEFAULT_MAX_TOKENS = 512;
export const MAX_MAX_TOKENS = 8192;
/** The most choices one request may ask for (they generate as one batch). */
export const MAX_N = 16;
/** Messages in one request: a bound on what one request can make the capture record (issue 35). */
export const MAX_MESSAGES = 10_000;

export interface ChatRequest {
  model: string | null;
  messages: ChatMessage[];
  temperature: number;
  topP: number;
  maxTokens: number;
  seed?: number;
  /** Choices to generate (OpenAI's `n`). */
  n: number;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
  logprobs: boolean;
  /** The tools the model is offered: the request's `tools` as its `tool_choice` leaves them (toolsByChoice). */
  tools?: unknown[];
}

/** A request the endpoint refuses: HTTP 400 with OpenAI's error body. */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
    readonly type = 'invalid_request_error',
    readonly code: string | null = null,
    /** Seconds for a `Retry-After` header (503 while the served model is being swapped or loaded). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

export function errorBody(message: string, type: string, param: string | null = null, code: string | null = null) {
  return { error: { message, type, param, code } };
}

/** How deep the free-form JSON of a request (tool_calls, tools) may nest: far past any real tool schema. */
export const MAX_NESTING = 64;

/** Whether `value` nests arrays and objects deeper than `max` (iterative: any depth is safe to check). */
function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** Refuses free-form JSON nested too deep to record or render (a 400, before anything else looks at it). */
function boundedNesting<T>(value: T, where: string): T {
  if (nestsDeeperThan(value, MAX_NESTING)) throw new RequestError(`${where} is nested more than ${MAX_NESTING} levels deep`, where);
  return value;
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function textContent(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new RequestError(`${where} must be a string or an array of content parts`, where);
  return content
    .map((part, i) => {
      if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') {
        const type = isObject(part) ? String(part.type) : typeof part;
        throw new RequestError(`${where}[${i}]: only text parts are supported (got type '${type}')`, `${where}[${i}]`);
      }
      return part.text;
    })
    .join('');
}

function message(raw: unknown, i: number): ChatMessage {
  const where = `messages[${i}]`;
  if (!isObject(raw)) throw new RequestError(`${where} must be an object with role and content`, where);
  const role = raw.role;
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw new RequestError(`${where}.role must be one of system, developer, user, assistant, tool (got ${JSON.stringify(role)})`, `${where}.role`);
  }
  const out: ChatMessage = { role: role === 'developer' ? 'system' : role, content: textContent(raw.content, `${where}.content`) };
  if (role === 'assistant' && Array.isArray(raw.tool_calls)) out.tool_calls = boundedNesting(raw.tool_calls, `${where}.tool_calls`);
  if (role === 'tool' && typeof raw.tool_call_id === 'string') out.tool_call_id = raw.tool_call_id;
  if (typeof raw.name === 'string') out.name = raw.name;
  return out;
}

function numberField(body: Record<string, unknown>, key: string, fallback: number, min: number, max: number, minExclusive = false): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || (minExclusive ? v <= min : v < min) || v > max) {
    throw new RequestError(`${key} must be a number in ${minExclusive ? '(' : '['}${min}, ${max}] (got ${JSON.stringify(v)})`, key);
  }
  return v;
}

function integerField(body: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RequestError(`${key} must be an integer in [${min}, ${max}] (got ${JSON.stringify(v)})`, key);
  }
  return v;
}

/** Checks a parsed JSON body; throws a RequestError naming the first bad field. */
export function parseChatRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw new RequestError('the request body must be a JSON object');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new RequestError('messages must be a non-empty array', 'messages');
  if (body.messages.length > MAX_MESSAGES) throw new RequestError(`messages takes at most ${MAX_MESSAGES} messages (got ${body.messages.length})`, 'messages');
  const messages = body.messages.map(message);
  if (body.model !== undefined && body.model !== null && typeof body.model !== 'string') throw new RequestError('model must be a string', 'model');
  const n = integerField(body, 'n', 1, MAX_N) ?? 1;
  let stop: string[] = [];
  if (typeof body.stop === 'string') stop = [body.stop];
  else if (Array.isArray(body.stop)) stop = body.stop;
  else if (body.stop !== undefined && body.stop !== null) throw new RequestError('stop must be a string or an array of strings', 'stop');
  if (stop.length > 4 || stop.some((s) => typeof s !== 'string' || s === '')) throw new RequestError('stop takes up to 4 non-empty strings', 'stop');
  const stream = body.stream === true;
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw new RequestError('stream must be true or false', 'stream');
  const logprobs = body.logprobs === true;
  if (logprobs && stream) throw new RequestError('logprobs are only returned by non-streaming requests here', 'logprobs');
  if ((integerField(body, 'top_logprobs', 0, 20) ?? 0) > 0) throw new RequestError('top_logprobs is not supported (only each chosen token’s logprob)', 'top_logprobs');
  const maxTokens = integerField(body, 'max_completion_tokens', 1, MAX_MAX_TOKENS) ?? integerField(body, 'max_tokens', 1, MAX_MAX_TOKENS) ?? DEFAULT_MAX_TOKENS;
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) throw new RequestError('tools must be an array', 'tools');
  if (Array.isArray(body.tools)) boundedNesting(body.tools, 'tools');
  const tools = toolsByChoice(Array.isArray(body.tools) ? body.tools : [], body.tool_choice);
  const streamOptions = isObject(body.stream_options) ? body.stream_options : {};
  return {
    model: typeof body.model === 'string' ? body.model : null,
    messages,
    temperature: numberField(body, 'temperature', 1, 0, 2),
    topP: numberField(body, 'top_p', 1, 0, 1, true),
    maxTokens,
    seed: integerField(body, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
    n,
    stop,
    stream,
    includeUsage: streamOptions.include_usage === true,
    logprobs,
    ...(tools.length ? { tools } : {}),
  };
}

/**
 * The tools a request offers the model, by its `tool_choice` (docs/design.md §Tools offered):
 * absent or "auto", all of them; "none", none (the model is not shown them, so its reply is
 * text); a named function, that one alone; "required", all of them. Decoding is not constrained,
 * so "required" and a named function make a call likely, not certain.
 */
function toolsByChoice(tools: unknown[], choice: unknown): unknown[] {
  if (choice === undefined || choice === null || choice === 'auto' || choice === 'required') return tools;
  if (choice === 'none') return [];
  const name = isObject(choice) && choice.type === 'function' && isObject(choice.function) ? choice.function.name : undefined;
  if (typeof name !== 'string') throw new RequestError('tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": …}}', 'tool_choice');
  const named = tools.filter((t) => isObject(t) && isObject(t.function) && t.function.name === name);
  if (!named.length) throw new RequestError(`tool_choice names the function '${name}', which tools does not list`, 'tool_choice');
  return named;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ToolCallOut {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: [];
}

/** One choice of a non-streaming answer. */
export interface ChoiceIn {
  content: string;
  reasoning?: string;
  toolCalls: ToolCallOut[];
  finishReason: FinishReason;
  logprobs: TokenLogprob[] | null;
}

export function completionBody(args: { id: string; created: number; model: string; choices: ChoiceIn[]; usage: Usage }) {
  return {
    id: args.id,
    object: 'chat.completion' as const,
    created: args.created,
    model: args.model,
    choices: args.choices.map((c, index) => ({
      index,
      message: {
        role: 'assistant' as const,
        content: c.toolCalls.length && !c.content ? null : c.content,
        ...(c.reasoning ? { reasoning_content: c.reasoning } : {}),
        ...(c.toolCalls.length ? { tool_calls: c.toolCalls } : {}),
      },
      logprobs: c.logprobs ? { content: c.logprobs } : null,
      finish_reason: c.finishReason,
    })),
    usage: args.usage,
  };
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: (ToolCallOut & { index: number })[];
}

/**
 * One stream chunk. `delta` null gives the usage-only chunk (choices: []) that
 * `stream_options.include_usage` asks for; `usage` is null on the others then, and absent
 * when usage was not asked for.
 */
export function chunkBody(
  meta: { id: string; created: number; model: string },
  delta: ChunkDelta | null,
  finishReason: FinishReason | null,
  usage?: Usage | null,
  index = 0,
) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: delta === null ? [] : [{ index, delta, logprobs: null, finish_reason: finishReason }],
    ...(usage !== undefined ? { usage } : {}),
  };
}
