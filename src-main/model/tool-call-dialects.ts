/**
 * How a model family writes a tool call and reads calls and results back in its history
 * (docs/design.md §Tool-call dialects): one row per dialect, the first whose test the chat
 * template's text passes. Every model's replies are also read for Hermes `<tool_call>` blocks
 * (./chat-output.ts), which is all the last row, `hermes`, asks.
 *
 *   mistral   a `[TOOL_CALLS]` token, then a JSON list of calls (Mistral Nemo), or, from the v11
 *             tokenizer on (Mistral Small 3.2, Devstral, Magistral, Ministral 3), one
 *             `[TOOL_CALLS]name[ARGS]{arguments}` a call, with `[CALL_ID]id` before `[ARGS]` in
 *             Mistral Small 3.2's. The template renders OpenAI's `tool_calls` itself.
 *   llama3    where tools were offered, a reply that is only `{"name", "parameters"}`. The
 *             template renders `tool_calls` itself.
 *   granite3  a `<|tool_call|>` token, then a JSON list of calls (Granite 3.x; 4.0 writes Hermes
 *             blocks). Its template renders only an assistant turn's `content`, so a past call is
 *             written into that content as the model wrote it.
 *   glm4      where tools were offered, a reply that is the function's name, a newline and its
 *             JSON arguments (GLM-4-0414, GLM-Z1). Its template renders a call as an assistant turn
 *             whose `metadata` is the name and whose content is the arguments, and a tool's result
 *             as an `observation` turn; `<|observation|>` after a call ends generation (it waits for
 *             the result), which llama.cpp's GGUF metadata does not list as an end token. The
 *             template writes nothing after a reply: the model ends it by opening the next turn,
 *             so a trained reply ends with that token (`replyEnd`).
 *   phi4mini  a `<|tool_call|>` token, then a JSON list of calls, then `<|/tool_call|>` (Phi-4-mini).
 *             Its template reads the tools only as a JSON string on the system message
 *             (`message['tools']`, as Microsoft's examples pass them) and renders only an
 *             assistant turn's `content`: the tools go onto the system message and a past call
 *             into its turn's content, as the model writes it.
 *   deepseek  `<｜tool▁calls▁begin｜>`, one `<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>` a call, then
 *             `<｜tool▁calls▁end｜>` (DeepSeek-R1 and its distills, V3, V3.1): read from every model's
 *             text, as Hermes blocks are (./chat-output.ts). DeepSeek's own templates write a call
 *             only for an assistant turn whose content is none (JSON null, not ''), and join its
 *             arguments as text; llama.cpp's copies of them pipe the arguments through `tojson`,
 *             so they are given the object there.
 *   hermes    `<tool_call>{"name", "arguments"}</tool_call>` blocks (Qwen, Granite 4, SmolLM3,
 *             Hermes). The template renders `tool_calls` itself.
 */
import type { BareCall } from './chat-output.js';
import { templateJson, type ChatMessage } from './template-context.js';

export interface ToolCallDialect {
  name: 'mistral' | 'llama3' | 'granite3' | 'glm4' | 'phi4mini' | 'deepseek' | 'hermes';
  /** Whether a chat template's text asks for this dialect. */
  matches(template: string): boolean;
  /** The token a JSON list of calls follows, or each call (`callParts`). */
  marker?: string;
  /** The tokens that part one call after the marker: name, [`callId` and its id,] `args` and the arguments. */
  callParts?: { args: string; callId: string };
  /** Where tools were offered, a reply that is nothing but one call in this form, with no marker. */
  bareCall?: BareCall;
  /** Tokens that end generation besides the model's own end tokens. */
  stops?: readonly string[];
  /** The conversation as the template must be given it (templateMessages' output: arguments parsed), with the tools offered. */
  history?: (messages: ChatMessage[], tools: readonly unknown[] | undefined, template?: string) => ChatMessage[];
  /**
   * Where the template writes nothing after a reply, the token the model ends one with: the one
   * that opens the turn after it. Training appends it to the reply (ChatTokenizer.encodeResponse),
   * as the family's own fine-tuning does, so the model learns to stop there.
   */
  replyEnd?: (reply: ChatMessage, rendered: string) => string;
}

export const TOOL_CALL_DIALECTS: readonly ToolCallDialect[] = [
  { name: 'mistral', matches: (t) => t.includes('[TOOL_CALLS]'), marker: '[TOOL_CALLS]', callParts: { args: '[ARGS]', callId: '[CALL_ID]' } },
  { name: 'llama3', matches: (t) => t.includes('"parameters": dictionary of argument name'), bareCall: 'json' },
  { name: 'granite3', matches: (t) => t.includes('<|tool_call|>') && !t.includes('tool_calls'), marker: '<|tool_call|>', history: (messages) => callsInContent(messages) },
  {
    name: 'glm4', matches: (t) => t.includes('<|observation|>') && t.includes('metadata'),
    // Generation stops at either (a GGUF's metadata may list neither as an end token).
    bareCall: 'name-line', stops: ['<|observation|>', '<|user|>'], history: callsAsMetadataTurns,
    // GLM-4's finetune_demo labels each reply and the one token after it: the next turn's role
    // (a call waits for its result, `<|observation|>`; text for the user, `<|user|>`).
    replyEnd: (reply) => (callsOf(reply).length ? '<|observation|>' : '<|user|>'),
  },
  {
    name: 'phi4mini', matches: (t) => t.includes("message['tools']") && t.includes('<|tool|>'),
    marker: '<|tool_call|>', history: toolsOnTheSystemMessage,
  },
  {
    name: 'deepseek', matches: (t) => t.includes('<｜tool▁calls▁begin｜>'),
    history: (messages, _tools, template) => callsWithNoContent(messages, /arguments'?\]?\s*\|\s*tojson/.test(template ?? '') ? 'object' : 'text'),
    // DeepSeek-R1's template closes a single call with nothing (its end comes only after a
    // second): a trained call still ends as the model's parsers expect, so that it learns to stop.
    replyEnd: (reply, rendered) => (callsOf(reply).length && !rendered.includes('<｜tool▁calls▁end｜>') ? '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' : ''),
  },
  { name: 'hermes', matches: () => true },
];

/** The dialect of a chat template (`hermes` for none: the fallback template, a base model's). */
export function toolCallDialect(template: string | undefined): ToolCallDialect {
  return TOOL_CALL_DIALECTS.find((d) => d.matches(template ?? ''))!;
}

interface ParsedCall {
  function?: { name?: unknown; arguments?: unknown };
}

const callsOf = (m: ChatMessage): ParsedCall[] => (Array.isArray(m.tool_calls) ? (m.tool_calls as ParsedCall[]) : []);

/** A call's arguments as the model writes them: the object's JSON (templateJson), or the text it was given. */
const argumentsText = (call: ParsedCall): string => {
  const args = call.function?.arguments;
  return typeof args === 'string' ? args : templateJson(args ?? {});
};

/** Each call list written after its turn's text, `<|tool_call|>[{"name", "arguments"}]` and `close` (granite3: none). */
function callsInContent(messages: ChatMessage[], close = ''): ChatMessage[] {
  return messages.map((m) => {
    const calls = callsOf(m);
    if (!calls.length) return m;
    const { tool_calls: _calls, ...rest } = m;
    const list = calls.map((c) => ({ name: c.function?.name, arguments: c.function?.arguments ?? {} }));
    return { ...rest, content: `${m.content ?? ''}<|tool_call|>${templateJson(list)}${close}` };
  });
}

/**
 * phi4mini: the tools offered as a JSON string of their function definitions on the system
 * message (one is opened where the conversation has none), and each past call list in its
 * turn's content, closed by `<|/tool_call|>`.
 */
function toolsOnTheSystemMessage(messages: ChatMessage[], tools: readonly unknown[] | undefined): ChatMessage[] {
  const withCalls = callsInContent(messages, '<|/tool_call|>');
  const functions = (tools ?? []).map((t) => (t && typeof t === 'object' && 'function' in t ? (t as { function: unknown }).function : t));
  if (!functions.length) return withCalls;
  const listed = templateJson(functions);
  return withCalls[0]?.role === 'system'
    ? [{ ...withCalls[0], tools: listed }, ...withCalls.slice(1)]
    : [{ role: 'system', content: '', tools: listed }, ...withCalls];
}

/**
 * deepseek: an assistant turn whose only content is its calls has content none (DeepSeek's
 * templates test `content is none` before writing calls; '' renders an empty reply instead), and
 * each call's arguments as `form`: the JSON text, which DeepSeek's templates join into the
 * prompt with `+`, or the object, which llama.cpp's copies of them pipe through `tojson`.
 */
function callsWithNoContent(messages: ChatMessage[], form: 'text' | 'object'): ChatMessage[] {
  return messages.map((m) => {
    const calls = callsOf(m);
    if (!calls.length) return m;
    const tool_calls = form === 'object' ? calls : calls.map((c) => ({ ...c, function: { ...c.function, arguments: argumentsText(c) } }));
    // JSON null is Jinja's none; ChatMessage's content is a string everywhere else.
    return { ...m, tool_calls, ...(m.content?.trim() ? {} : { content: null as unknown as string }) };
  });
}

/**
 * glm4: an assistant turn with calls becomes its text (where it has some), then one turn per
 * call, `{metadata: name, content: arguments}`; a tool's result becomes an `observation` turn.
 */
function callsAsMetadataTurns(messages: ChatMessage[]): ChatMessage[] {
  return messages.flatMap((m): ChatMessage[] => {
    if (m.role === 'tool') return [{ role: 'observation', content: m.content }];
    const calls = callsOf(m);
    if (!calls.length) return [m];
    const text: ChatMessage[] = m.content?.trim() ? [{ role: 'assistant', content: m.content }] : [];
    return [...text, ...calls.map((c) => ({ role: 'assistant', metadata: String(c.function?.name ?? ''), content: argumentsText(c) }))];
  });
}
