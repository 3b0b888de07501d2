/**
 * Structure in generated text: `<think>…</think>` reasoning and tool calls, as Hermes-style
 * `<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks (Qwen's format) or DeepSeek's
 * `<｜tool▁calls▁begin｜>` blocks (./deepseek-calls.ts), both read from every model's text, the JSON list
 * the model writes after its dialect's marker token (Mistral's `[TOOL_CALLS]`, Granite 3's
 * `<|tool_call|>`) or the calls it writes one to a marker (Mistral v11+'s
 * `[TOOL_CALLS]name[ARGS]{…}`), or, where tools were offered to a model whose dialect writes calls without
 * one (./tool-call-dialects.ts), a reply that is nothing but `{"name": …, "parameters": {…}}`
 * (Llama 3.1+) or a function name and its JSON arguments on the next line (GLM-4).
 *
 * Reasoning is split by token ids where the tokenizer has `<think>`/`</think>` as tokens
 * (Mistral's reasoning models: `[THINK]`/`[/THINK]`; exact, and immune to the text "</think>"
 * spelled out of ordinary pieces), else by text.
 * Qwen3's template opens `<think>` in the prompt, so a lone `</think>` means everything
 * before it was reasoning. An unclosed `<think>` means generation stopped mid-thought.
 */
import type { ToolCall } from '../../src-shared/types.js';
import { DEEPSEEK_CALLS_BEGIN, parseDeepSeekCalls } from './deepseek-calls.js';
import type { OpenAIToolCall, ToolCallError } from './tool-call-shapes.js';

export type { OpenAIToolCall, ToolCallError } from './tool-call-shapes.js';

export interface ParsedReply {
  /** The answer: reasoning and tool-call blocks removed, trimmed. */
  content: string;
  reasoning?: string;
  toolCalls: OpenAIToolCall[];
  toolCallErrors: ToolCallError[];
}

/** What a reply is read with: the model's marker tokens, and the form of a call without one. */
export interface ReplyTokens {
  thinkStartId?: number;
  thinkEndId?: number;
  /** The dialect's marker token (ChatTokenizer.toolCallsId: Mistral's `[TOOL_CALLS]`, Granite 3's `<|tool_call|>`): what follows it is the calls. */
  toolCallsId?: number;
  /** The tokens inside one call after the marker (ChatTokenizer.callPartIds): `name[CALL_ID]id[ARGS]{…}`. */
  callPartIds?: CallPartIds;
  /**
   * Tools were offered, and the dialect writes a call without a marker (./tool-call-dialects.ts):
   * a reply that is only such a call is one, `json` (Llama 3.1+) or `name-line` (GLM-4). Without
   * tools offered, such a reply is an answer.
   */
  bareCall?: BareCall;
  /** Text of ids, special tokens left out. */
  decode(ids: number[]): string;
}

/** What ./tool-call-dialects.ts ToolCallDialect.bareCall says: a call written with no marker. */
export type BareCall = 'json' | 'name-line';

/** The ids of ToolCallDialect.callParts' tokens. */
export interface CallPartIds {
  args: number;
  callId?: number;
}

/** What replyTokens reads from a tokenizer (ChatTokenizer, or a rollout policy's). */
export interface ReplyTokenizer {
  readonly thinkStartId?: number;
  readonly thinkEndId?: number;
  readonly toolCallsId?: number;
  readonly callPartIds?: CallPartIds;
  readonly toolCallDialect?: { readonly bareCall?: BareCall };
  decode(ids: number[]): string;
}

/** How a tokenizer's replies are read, tools offered or not: the one place that builds ReplyTokens. */
export function replyTokens(tok: ReplyTokenizer, toolsOffered: boolean): ReplyTokens {
  const bareCall = toolsOffered ? tok.toolCallDialect?.bareCall : undefined;
  const parts = tok.callPartIds ? { callPartIds: tok.callPartIds } : {};
  return { thinkStartId: tok.thinkStartId, thinkEndId: tok.thinkEndId, toolCallsId: tok.toolCallsId, ...parts, ...(bareCall ? { bareCall } : {}), decode: (ids) => tok.decode(ids) };
}

/**
 * Text of ids with the reasoning tokens written as `<think>` and `</think>`, whether decoding
 * keeps them or not (Mistral's `[THINK]`/`[/THINK]` are control tokens, which it drops): the text
 * a reader that splits reasoning by text sees (the `/v1` stream, ../openai/local-chat.ts).
 */
export function decodeWithThinkTags(tok: Pick<ReplyTokens, 'thinkStartId' | 'thinkEndId' | 'decode'>, ids: number[]): string {
  const tags = new Map([[tok.thinkStartId, '<think>'], [tok.thinkEndId, '</think>']].filter(([id]) => id !== undefined) as [number, string][]);
  if (!ids.some((id) => tags.has(id))) return tok.decode(ids);
  let text = '', run: number[] = [];
  for (const id of ids) {
    const tag = tags.get(id);
    if (tag === undefined) run.push(id);
    else [text, run] = [text + tok.decode(run) + tag, []];
  }
  return text + tok.decode(run);
}

/** Splits reasoning from answer; returns undefined reasoning when there is none. */
export function splitReasoning(tokens: number[], tok: ReplyTokens): { reasoning?: string; answer: string } {
  const { thinkStartId: open, thinkEndId: close } = tok;
  if (open !== undefined && close !== undefined) {
    const end = tokens.indexOf(close);
    const start = tokens.indexOf(open);
    if (end >= 0 && (start < 0 || start < end)) {
      return { reasoning: tok.decode(tokens.slice(start < 0 ? 0 : start + 1, end)).trim(), answer: tok.decode(tokens.slice(end + 1)).trim() };
    }
    if (start >= 0 && end < 0) {
      return { reasoning: tok.decode(tokens.slice(start + 1)).trim(), answer: tok.decode(tokens.slice(0, start)).trim() };
    }
    if (start < 0 && end < 0) return { answer: tok.decode(tokens).trim() };
  }
  return splitReasoningText(tok.decode(tokens));
}

export function splitReasoningText(text: string): { reasoning?: string; answer: string } {
  const end = text.indexOf('</think>');
  const start = text.indexOf('<think>');
  if (end >= 0 && (start < 0 || start < end)) {
    const from = start < 0 ? 0 : start + '<think>'.length;
    return { reasoning: text.slice(from, end).trim(), answer: (text.slice(0, Math.max(0, start)) + text.slice(end + '</think>'.length)).trim() };
  }
  if (start >= 0) return { reasoning: text.slice(start + '<think>'.length).trim(), answer: text.slice(0, start).trim() };
  return { answer: text.trim() };
}

const TOOL_CALL = /<tool_call>([\s\S]*?)(<\/tool_call>|$)/g;

/** The text that opens calls written in a reply's text (Hermes', DeepSeek's): a stream holds back what follows it. */
export const TEXT_CALL_OPENERS: readonly string[] = ['<tool_call>', DEEPSEEK_CALLS_BEGIN];

/**
 * Pulls `<tool_call>` blocks, and DeepSeek's call blocks (./deepseek-calls.ts), out of `text`;
 * bad JSON becomes an error entry, never a throw.
 */
export function parseToolCalls(text: string): { content: string; toolCalls: OpenAIToolCall[]; errors: ToolCallError[] } {
  const hermes = parseHermesCalls(text);
  const deepseek = parseDeepSeekCalls(hermes.content, hermes.toolCalls.length);
  return { content: deepseek.content, toolCalls: [...hermes.toolCalls, ...deepseek.toolCalls], errors: [...hermes.errors, ...deepseek.errors] };
}

function parseHermesCalls(text: string): { content: string; toolCalls: OpenAIToolCall[]; errors: ToolCallError[] } {
  const toolCalls: OpenAIToolCall[] = [];
  const errors: ToolCallError[] = [];
  const content = text.replace(TOOL_CALL, (_, body: string, closing: string) => {
    const raw = body.trim();
    if (!closing) {
      errors.push({ error: 'unterminated <tool_call> block (no </tool_call>)', raw });
      return '';
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (err) {
      errors.push({ error: `invalid JSON in <tool_call>: ${(err as Error).message}`, raw });
      return '';
    }
    const call = parsed as { name?: unknown; arguments?: unknown };
    if (!call || typeof call !== 'object' || typeof call.name !== 'string' || !call.name) {
      errors.push({ error: '<tool_call> JSON has no "name" string', raw });
      return '';
    }
    const args = call.arguments === undefined ? {} : call.arguments;
    toolCalls.push({
      id: `call_${toolCalls.length}`,
      type: 'function',
      function: { name: call.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
    });
    return '';
  });
  return { content: content.trim(), toolCalls, errors };
}

/** Reasoning, tool calls and answer of one generated reply. */
export function parseReply(tokens: number[], tok: ReplyTokens): ParsedReply {
  const callsAt = tok.toolCallsId === undefined ? -1 : tokens.indexOf(tok.toolCallsId);
  const { reasoning, answer } = splitReasoning(callsAt < 0 ? tokens : tokens.slice(0, callsAt), tok);
  const { content, toolCalls, errors } = callsAt < 0 ? parseToolCalls(answer) : { content: answer, ...parseMarkedCalls(tokens.slice(callsAt), tok) };
  const bareCalls = tok.bareCall && !toolCalls.length && !errors.length ? BARE_CALL_READERS[tok.bareCall](content) : undefined;
  if (bareCalls) return { content: '', reasoning, toolCalls: bareCalls, toolCallErrors: [] };
  return { content, reasoning, toolCalls, toolCallErrors: errors };
}

/**
 * Llama 3.1+'s calls: a reply that is only `{"name": …, "parameters": {…}}` (`arguments` taken
 * for `parameters` too), or several such objects joined by ";", as vLLM's llama3_json parser
 * reads them. Anything else, a JSON answer that is not a call included, is not calls (undefined).
 */
export function parseJsonToolCalls(text: string): OpenAIToolCall[] | undefined {
  const raw = text.trim();
  if (!raw.startsWith('{')) return undefined;
  const calls: OpenAIToolCall[] = [];
  for (const part of topLevelParts(raw)) {
    let value: unknown;
    try {
      value = JSON.parse(part);
    } catch {
      return undefined;
    }
    const call = value as { name?: unknown; parameters?: unknown; arguments?: unknown } | null;
    const args = call?.parameters ?? call?.arguments;
    if (!call || typeof call !== 'object' || typeof call.name !== 'string' || !call.name || !args || typeof args !== 'object' || Array.isArray(args)) return undefined;
    calls.push({ id: madeCallId(calls.length), type: 'function', function: { name: call.name, arguments: JSON.stringify(args) } });
  }
  return calls.length ? calls : undefined;
}

/**
 * GLM-4's call: a reply that is a function name alone on its first line, then its arguments as
 * one JSON object (as GLM-4's own function-call parsers read it). Anything else, a one-word answer
 * included, is not a call (undefined).
 */
export function parseNameLineCall(text: string): OpenAIToolCall[] | undefined {
  const m = /^([A-Za-z_][\w.-]*)\n\s*(\{[\s\S]*\})$/.exec(text.trim());
  if (!m) return undefined;
  let args: unknown;
  try {
    args = JSON.parse(m[2]!);
  } catch {
    return undefined;
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return undefined;
  return [{ id: madeCallId(0), type: 'function', function: { name: m[1]!, arguments: JSON.stringify(args) } }];
}

const BARE_CALL_READERS: Record<BareCall, (text: string) => OpenAIToolCall[] | undefined> = { json: parseJsonToolCalls, 'name-line': parseNameLineCall };

/**
 * Whether a streamed answer so far may still turn out to be a bare call (it is held back until
 * the reply ends): JSON that opens with "{", or a name line with the start of its arguments.
 */
export function mayBeBareCall(form: BareCall | undefined, answer: string): boolean {
  if (form === 'json') return answer.trimStart().startsWith('{');
  if (form === 'name-line') return /^[A-Za-z_][\w.-]*(\n\s*(\{[\s\S]*)?)?$/.test(answer.trimStart());
  return false;
}

/** `text` split at each ";" outside any string, object or array. */
function topLevelParts(text: string): string[] {
  const parts: string[] = [];
  let depth = 0, inString = false, escaped = false, start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === ';' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter(Boolean);
}

/**
 * A reply a stop string cut, from the `text` kept (decoded without special tokens) and the
 * `tokens` generated. Its text has lost the dialect's marker token (Mistral's `[TOOL_CALLS]`): where
 * the cut came after it, what the text holds past the tokens before it is the calls.
 */
export function parseCutReply(text: string, tokens: number[], tok: ReplyTokens): ParsedReply {
  const at = tok.toolCallsId === undefined ? -1 : tokens.indexOf(tok.toolCallsId);
  const before = at < 0 ? text : tok.decode(tokens.slice(0, at));
  const fromText = { ...tok, thinkStartId: undefined, thinkEndId: undefined, toolCallsId: undefined };
  if (at < 0 || text.length <= before.length || !text.startsWith(before)) return parseReply([], { ...fromText, decode: () => text });
  const head = parseReply([], { ...fromText, decode: () => before });
  // Calls parted by tokens lost those tokens with the text: read them from the tokens instead.
  const parted = tok.callPartIds !== undefined && tokens.includes(tok.callPartIds.args);
  const { toolCalls, errors } = parted ? parseMarkedCalls(tokens.slice(at), tok) : parseToolCallList(text.slice(before.length));
  return { ...head, toolCalls, toolCallErrors: errors };
}

/** The id given to the n-th call of a reply that brings none usable: 9 characters (`call00000`), the length Mistral's templates take. */
export const madeCallId = (n: number): string => `call${String(n).padStart(5, '0')}`;

/**
 * The calls after a marker token: the JSON list `[{"name": …, "arguments": {…}, "id"?: …}, …]`
 * (one object alone is taken too) that Mistral writes after `[TOOL_CALLS]` and Granite 3 after
 * `<|tool_call|>`. A call keeps an id of 9 characters, the only length Mistral's templates take
 * back; others get `call00000`, `call00001`, … Bad JSON or a call without a name becomes an
 * error entry, never a throw.
 */
export function parseToolCallList(text: string): { toolCalls: OpenAIToolCall[]; errors: ToolCallError[] } {
  const raw = text.trim();
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    return { toolCalls: [], errors: [{ error: `invalid JSON after the tool-call token: ${(err as Error).message}`, raw }] };
  }
  const toolCalls: OpenAIToolCall[] = [];
  const errors: ToolCallError[] = [];
  for (const item of Array.isArray(parsed) ? parsed : [parsed]) {
    const call = item as { name?: unknown; arguments?: unknown; id?: unknown } | null;
    if (!call || typeof call !== 'object' || typeof call.name !== 'string' || !call.name) {
      errors.push({ error: 'a call after the tool-call token has no "name" string', raw: JSON.stringify(item) ?? String(item) });
      continue;
    }
    const args = call.arguments === undefined ? {} : call.arguments;
    const id = typeof call.id === 'string' && call.id.length === 9 ? call.id : madeCallId(toolCalls.length);
    toolCalls.push({ id, type: 'function', function: { name: call.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) } });
  }
  return { toolCalls, errors };
}

/**
 * The calls from the dialect's first marker token on. Where a call is parted by tokens
 * (Mistral v11+: each call `[TOOL_CALLS]name[ARGS]{…}`, Mistral Small 3.2's with `[CALL_ID]id`
 * before `[ARGS]`), each marker opens one call; otherwise what follows the marker is a JSON list
 * (parseToolCallList). Bad arguments or a call without a name become error entries.
 */
function parseMarkedCalls(tokens: number[], tok: ReplyTokens): { toolCalls: OpenAIToolCall[]; errors: ToolCallError[] } {
  const parts = tok.callPartIds;
  if (!parts || !tokens.includes(parts.args)) return parseToolCallList(tok.decode(tokens.slice(1)));
  const toolCalls: OpenAIToolCall[] = [];
  const errors: ToolCallError[] = [];
  for (const call of splitAt(tokens, tok.toolCallsId!)) {
    const argsAt = call.indexOf(parts.args);
    const raw = tok.decode(call);
    if (argsAt < 0) {
      errors.push({ error: 'a call after the tool-call token has no arguments token', raw });
      continue;
    }
    const head = call.slice(0, argsAt);
    const idAt = parts.callId === undefined ? -1 : head.indexOf(parts.callId);
    const name = tok.decode(idAt < 0 ? head : head.slice(0, idAt)).trim();
    const id = idAt < 0 ? '' : tok.decode(head.slice(idAt + 1)).trim();
    let args: unknown;
    try {
      args = JSON.parse(tok.decode(call.slice(argsAt + 1)).trim());
    } catch (err) {
      errors.push({ error: `invalid JSON arguments after the tool-call token: ${(err as Error).message}`, raw });
      continue;
    }
    if (!name || !args || typeof args !== 'object' || Array.isArray(args)) {
      errors.push({ error: name ? 'a call\'s arguments are not a JSON object' : 'a call after the tool-call token has no name', raw });
      continue;
    }
    toolCalls.push({ id: id.length === 9 ? id : madeCallId(toolCalls.length), type: 'function', function: { name, arguments: JSON.stringify(args) } });
  }
  return { toolCalls, errors };
}

/** The runs of `tokens` between occurrences of `marker` (none empty). */
function splitAt(tokens: number[], marker: number): number[][] {
  const runs: number[][] = [[]];
  for (const t of tokens) {
    if (t === marker) runs.push([]);
    else runs.at(-1)!.push(t);
  }
  return runs.filter((r) => r.length > 0);
}

/** The project's own ToolCall shape (src-shared/types.ts) from an OpenAI-format call. */
export function toToolCall(call: OpenAIToolCall): ToolCall {
  return { id: call.id, name: call.function.name, arguments: call.function.arguments };
}
