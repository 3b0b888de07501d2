/**
 * What a chat template sees beside its text (./tokenizer.ts ChatTokenizer): the globals
 * transformers gives it (`raise_exception`, `strftime_now`, Python's `range`) and the messages as
 * the JSON a Python template reads; and the conversation rewritten for a template that has no
 * system role.
 */
import { Environment } from '@huggingface/jinja';
import { TemplateRaise } from './template-interpreter.js';

/** A message as a chat template reads it (./tokenizer.ts re-exports it). */
export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

/**
 * The template's globals, as transformers provides them. `strftime_now` is ours rather than
 * @huggingface/jinja's, whose month names follow the machine's locale ("26 juil. 2024"):
 * transformers formats with Python's default C locale ("26 Jul 2024"), the text the models
 * saw in training.
 */
export function templateGlobals(now: Date): Environment {
  const env = new Environment();
  const constants: Record<string, unknown> = { true: true, false: false, none: null, True: true, False: false, None: null };
  for (const [name, value] of Object.entries(constants)) env.set(name, value);
  env.set('range', pythonRange);
  env.set('raise_exception', (message: unknown) => {
    throw new TemplateRaise(String(message));
  });
  env.set('strftime_now', (format: unknown) => strftimeC(now, String(format)));
  return env;
}

function pythonRange(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() arg 3 must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** Python's `strftime` in the C locale, local time, for the directives chat templates use. */
export function strftimeC(date: Date, format: string): string {
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const hour12 = date.getHours() % 12 || 12;
  const dayOfYear = Math.floor((Date.UTC(date.getFullYear(), date.getMonth(), date.getDate()) - Date.UTC(date.getFullYear(), 0, 1)) / 86_400_000) + 1;
  const fields: Record<string, string> = {
    Y: String(date.getFullYear()), y: pad(date.getFullYear() % 100), m: pad(date.getMonth() + 1), d: pad(date.getDate()),
    e: String(date.getDate()).padStart(2, ' '), j: pad(dayOfYear, 3),
    B: MONTHS[date.getMonth()]!, b: MONTHS[date.getMonth()]!.slice(0, 3), A: WEEKDAYS[date.getDay()]!, a: WEEKDAYS[date.getDay()]!.slice(0, 3),
    H: pad(date.getHours()), I: pad(hour12), M: pad(date.getMinutes()), S: pad(date.getSeconds()), p: date.getHours() < 12 ? 'AM' : 'PM', '%': '%',
  };
  return format.replace(/%(.)/g, (whole, key: string) => fields[key] ?? whole);
}

/**
 * The conversation with its leading system messages' text opening the first user turn
 * ("system\n\nuser", Gemma 3's own template's form), for a template that has no system role;
 * undefined where there is no leading system message or no user turn right after it.
 */
export function withSystemInFirstUserTurn(messages: readonly ChatMessage[]): ChatMessage[] | undefined {
  const count = messages.findIndex((m) => m.role !== 'system');
  const user = messages[count];
  if (count < 1 || user?.role !== 'user') return undefined;
  const system = messages.slice(0, count).map((m) => m.content).join('\n\n');
  return [{ ...user, content: `${system}\n\n${user.content}` }, ...messages.slice(count + 1)];
}

/**
 * Messages as the JSON a Python template sees. Keys whose value is `undefined` are left out
 * (JSON has no undefined; Llama 3's `'tool_calls' in message` would otherwise send a plain
 * reply down the tool-call branch). Tool-call `arguments` given as a JSON-object string (the
 * OpenAI wire form) are parsed into the object the templates expect: Qwen2.5's and Llama 3's
 * `arguments | tojson` would otherwise write a quoted string of JSON.
 *
 * With `idLength` (a template that refuses tool-call ids of another length: Mistral's take 9
 * characters, OpenAI's are `call_` and 24 more), a longer id is cut to its last `idLength`
 * characters, in the call and in the tool result that answers it, as vLLM serves Mistral models;
 * a shorter one is left for the template to refuse. With `history` (a tool-call dialect whose
 * template does not render OpenAI's calls or tools: ./tool-call-dialects.ts), the messages are
 * then rewritten into the dialect's form, `tools` (those offered) included.
 */
export function templateMessages(
  messages: readonly ChatMessage[],
  options: { idLength?: number; history?: (messages: ChatMessage[], tools: readonly unknown[] | undefined, template?: string) => ChatMessage[]; tools?: readonly unknown[]; template?: string } = {},
): ChatMessage[] {
  const { idLength, history } = options;
  const cut = (id: unknown) => (idLength !== undefined && typeof id === 'string' && id.length > idLength ? id.slice(-idLength) : id);
  const out = messages.map((m) => {
    const out = Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as ChatMessage;
    if (Array.isArray(m.tool_calls)) out.tool_calls = m.tool_calls.map((call) => withCutId(withParsedArguments(call), cut));
    if (out.tool_call_id !== undefined) out.tool_call_id = cut(out.tool_call_id);
    return out;
  });
  return history ? history(out, options.tools, options.template) : out;
}

function withCutId(call: unknown, cut: (id: unknown) => unknown): unknown {
  if (!call || typeof call !== 'object' || !('id' in call) || cut(call.id) === call.id) return call;
  return { ...call, id: cut(call.id) };
}

/**
 * JSON text as a chat template's `tojson` writes a value with no options (transformers'
 * json.dumps, @huggingface/jinja alike): ", " between items, ": " after keys, keys in their
 * order, non-ASCII kept.
 */
export function templateJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(templateJson).join(', ')}]`;
  if (value && typeof value === 'object') return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${templateJson(v)}`).join(', ')}}`;
  return JSON.stringify(value) ?? 'null';
}

/**
 * A tool call's `arguments` (OpenAI's JSON string) as the text a template writes for them: a
 * JSON object's text is what `arguments | tojson` makes of the object templateMessages hands
 * the template, so a tool given the string (TRL, which passes a dataset's strings as they are)
 * renders the same tokens as Hindsight; anything else is written as it is by both.
 */
export function argumentsAsTemplatesWrite(args: string): string {
  try {
    const parsed: unknown = JSON.parse(args);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? templateJson(parsed) : args;
  } catch {
    return args;
  }
}

function withParsedArguments(call: unknown): unknown {
  const fn = (call as { function?: { arguments?: unknown } } | null)?.function;
  if (!fn || typeof fn.arguments !== 'string') return call;
  let parsed: unknown;
  try {
    parsed = JSON.parse(fn.arguments);
  } catch {
    return call; // not JSON: the template writes the text as it is
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return call;
  return { ...(call as object), function: { ...fn, arguments: parsed } };
}
