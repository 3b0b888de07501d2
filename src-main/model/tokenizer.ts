/**
 * The checkpoint's tokenizer (`tokenizer.json` through @huggingface/tokenizers) and chat
 * template (`tokenizer_config.json`'s `chat_template`, or `chat_template.jinja`, rendered by
 * @huggingface/jinja).
 *
 * Models without a chat template (base models such as the demo stories260K) get
 * {@link FALLBACK_CHAT_TEMPLATE}: BOS, then each message as `Role: content` followed by a
 * blank line, and `Assistant:` as the generation prompt. It is plain text on purpose: it
 * needs no special tokens, so it works with any vocabulary.
 *
 * Rendered templates are encoded without adding special tokens, as transformers'
 * `apply_chat_template` does: the template itself writes BOS where the model wants one.
 *
 * The render context follows transformers: `messages`, `add_generation_prompt`, `tools`,
 * `bos_token`/`eos_token`, the caller's extra variables, and the globals `raise_exception`
 * and `strftime_now` (Llama 3.2 and later write today's date with it). Messages are passed
 * as the JSON they stand for (./template-context.ts templateMessages). A template without a
 * system role renders the system text at the start of the first user turn.
 *
 * A `.gguf` path takes the tokenizer and chat template from the file's metadata instead
 * (./gguf/tokenizer-json.ts builds the tokenizer.json they stand for).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Environment, Template } from '@huggingface/jinja';
import { sharedPrefixLength } from '../../src-shared/shared-prefix.js';
import { UserError } from '../../src-shared/types.js';
import { ChatTemplateError, TemplateInterpreter } from './template-interpreter.js';
import { templateGlobals, templateMessages, withSystemInFirstUserTurn, type ChatMessage } from './template-context.js';
import { isGgufPath } from './gguf/model.js';
import { toolCallDialect, type ToolCallDialect } from './tool-call-dialects.js';
import type { CallPartIds } from './chat-output.js';
import { findChatTemplates, readJsonIfExists, type ChatTemplates } from './chat-templates.js';
import { openGguf } from './gguf/reader.js';
import { ggufTokenizer } from './gguf/tokenizer-json.js';

export const FALLBACK_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ message['role'] | capitalize }}: {{ message['content'] }}\n\n{% endfor %}" +
  '{% if add_generation_prompt %}Assistant:{% endif %}';

export type { ChatMessage };

export interface TemplateOptions {
  addGenerationPrompt?: boolean;
  /** OpenAI-style tool definitions, passed to templates that render them. */
  tools?: unknown[];
  /** Extra template variables (e.g. `enable_thinking` for Qwen3). */
  extra?: Record<string, unknown>;
}

/**
 * A reply to place after a conversation (ChatTokenizer.encodeResponse): its text, or the
 * assistant message itself, which carries its tool calls (`tool_calls`, OpenAI's form).
 */
export type Reply = string | ChatMessage;

/** A prompt + response as token ids, with where the response begins. */
export interface ResponseSpan {
  inputIds: number[];
  responseStart: number;
}

/** `bos_token` may be a string or an AddedToken object `{ content }`. */
function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

function idList(v: unknown): number[] {
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : typeof v === 'number' ? [v] : [];
}

export class ChatTokenizer {
  readonly bosToken?: string;
  readonly eosToken?: string;
  readonly bosTokenId?: number;
  /** Every id that ends generation: generation_config, config and tokenizer_config together. */
  readonly eosTokenIds: number[];
  readonly chatTemplateSource: 'model' | 'fallback';
  readonly thinkStartId?: number;
  readonly thinkEndId?: number;
  /** How the model writes tool calls and reads them back (./tool-call-dialects.ts), from its template. */
  readonly toolCallDialect: ToolCallDialect;
  /** The dialect's marker token (Mistral's `[TOOL_CALLS]`, Granite 3's `<|tool_call|>`), where the vocabulary has it: calls follow it (./chat-output.ts). */
  readonly toolCallsId?: number;
  /** The tokens that part one call after the marker (Mistral v11+'s `[ARGS]`, `[CALL_ID]`), where the vocabulary has them. */
  readonly callPartIds?: CallPartIds;
  private readonly template: Template;
  /** The template transformers renders with when tools are given (./chat-templates.ts), where the model has one. */
  private readonly toolUseTemplate?: Template;
  /** The text the dialect was read from (the tool-use template's where there is one): its `history` may look at it. */
  private readonly dialectTemplate: string;
  /** The tool-call id length the template insists on (Mistral's: 9), where it checks one. */
  private readonly toolCallIdLength?: number;

  private constructor(private readonly tokenizer: Tokenizer, config: Record<string, unknown>, templates: ChatTemplates, dir: string, moreEos: number[] = []) {
    const templateText = templates.main;
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.bosTokenId = this.bosToken !== undefined ? tokenizer.token_to_id(this.bosToken) : undefined;
    const modelConfig = readJsonIfExists(path.join(dir, 'config.json')) ?? {};
    const genConfig = readJsonIfExists(path.join(dir, 'generation_config.json')) ?? {};
    const eos = new Set([...idList(genConfig.eos_token_id), ...idList(modelConfig.eos_token_id)]);
    const eosFromTokenizer = this.eosToken !== undefined ? tokenizer.token_to_id(this.eosToken) : undefined;
    if (eosFromTokenizer !== undefined) eos.add(eosFromTokenizer);
    for (const id of moreEos) eos.add(id);
    // Calls are written where tools are offered: by the tool-use template where there is one.
    this.dialectTemplate = templates.toolUse ?? templateText ?? '';
    this.toolCallDialect = toolCallDialect(this.dialectTemplate);
    for (const stop of this.toolCallDialect.stops ?? []) {
      const id = tokenizer.token_to_id(stop);
      if (id !== undefined) eos.add(id);
    }
    this.eosTokenIds = [...eos];
    if (this.bosTokenId === undefined) this.bosTokenId = idList(modelConfig.bos_token_id)[0];
    // Qwen's and DeepSeek's reasoning tokens, else Mistral's where its template writes them
    // (Magistral, Ministral 3 Reasoning: other Mistral vocabularies have them unused).
    const texts = [templateText, templates.toolUse].filter((t) => t !== undefined).join('\n');
    const mistralThinks = texts.includes('[THINK]');
    this.thinkStartId = tokenizer.token_to_id('<think>') ?? (mistralThinks ? tokenizer.token_to_id('[THINK]') : undefined);
    this.thinkEndId = tokenizer.token_to_id('</think>') ?? (mistralThinks ? tokenizer.token_to_id('[/THINK]') : undefined);
    const marker = this.toolCallDialect.marker;
    this.toolCallsId = marker !== undefined ? tokenizer.token_to_id(marker) : undefined;
    const parts = this.toolCallDialect.callParts;
    const args = parts && tokenizer.token_to_id(parts.args);
    if (parts && args !== undefined) this.callPartIds = { args, callId: tokenizer.token_to_id(parts.callId) };
    this.chatTemplateSource = templateText ? 'model' : 'fallback';
    const idLength = /(?:\.id|tool_call_id)\s*\|\s*length\s*!=\s*(\d+)/.exec(texts);
    this.toolCallIdLength = idLength ? Number(idLength[1]) : undefined;
    const parse = (text: string, name: string) => {
      try {
        return new Template(text);
      } catch (err) {
        throw new UserError(`${path.join(dir, 'tokenizer_config.json')}: ${name} does not parse: ${(err as Error).message}`);
      }
    };
    this.template = parse(templateText ?? FALLBACK_CHAT_TEMPLATE, 'chat_template');
    if (templates.toolUse !== undefined) this.toolUseTemplate = parse(templates.toolUse, "the 'tool_use' chat template");
  }

  static load(dir: string): ChatTokenizer {
    if (isGgufPath(dir)) {
      const g = ggufTokenizer(openGguf(dir));
      let tokenizer: Tokenizer;
      try {
        tokenizer = new Tokenizer(g.json, g.config);
      } catch (err) {
        throw new UserError(`${dir}: cannot build the tokenizer from its metadata: ${(err as Error).message}`);
      }
      return new ChatTokenizer(tokenizer, g.config, g.chatTemplates, dir, g.eosTokenIds);
    }
    const tokFile = path.join(dir, 'tokenizer.json');
    const tokJson = readJsonIfExists(tokFile);
    if (!tokJson) throw new UserError(`model folder ${dir}: missing file ${tokFile}`);
    const config = readJsonIfExists(path.join(dir, 'tokenizer_config.json')) ?? {};
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(tokJson, config);
    } catch (err) {
      throw new UserError(`${tokFile}: cannot build the tokenizer: ${(err as Error).message}`);
    }
    return new ChatTokenizer(tokenizer, config, findChatTemplates(dir, config), dir);
  }

  get vocabSize(): number {
    return this.tokenizer.get_vocab(true).size;
  }

  encode(text: string, addSpecialTokens = false): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: number[], skipSpecialTokens = true): string {
    // The library throws on an empty list; a reply can have an empty part (`<think></think>`,
    // or a reply cut right after `</think>`), and its text is ''.
    if (ids.length === 0) return '';
    return this.tokenizer.decode(ids, { skip_special_tokens: skipSpecialTokens });
  }

  tokenToId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.tokenizer.id_to_token(id);
  }

  applyChatTemplate(messages: ChatMessage[], options: TemplateOptions = {}): string {
    return this.render(messages, options, new Date());
  }

  /**
   * `now` is the template's `strftime_now` clock: one instant for renders that must agree.
   * A template without a system role (Gemma 2's raises 'System role not supported') gets the
   * system text at the start of the first user turn, as Gemma 3's own template writes it
   * ({@link withSystemInFirstUserTurn}); if that too is refused, the first refusal stands.
   */
  private render(messages: ChatMessage[], options: TemplateOptions, now: Date): string {
    try {
      return this.renderAsGiven(messages, options, now);
    } catch (err) {
      const folded = err instanceof ChatTemplateError && err.raised !== undefined ? withSystemInFirstUserTurn(messages) : undefined;
      if (!folded) throw err;
      try {
        return this.renderAsGiven(folded, options, now);
      } catch {
        throw err;
      }
    }
  }

  /**
   * The messages as the template is given them (template-context.ts templateMessages): ids cut to
   * the template's length, calls' arguments parsed, and the history in the dialect's form.
   */
  messagesForTemplate(messages: readonly ChatMessage[], tools?: readonly unknown[]): ChatMessage[] {
    return templateMessages(messages, { idLength: this.toolCallIdLength, history: this.toolCallDialect.history, template: this.dialectTemplate, ...(tools ? { tools } : {}) });
  }

  private renderAsGiven(messages: ChatMessage[], options: TemplateOptions, now: Date): string {
    const env = templateGlobals(now);
    const context: Record<string, unknown> = {
      messages: this.messagesForTemplate(messages, options.tools),
      add_generation_prompt: options.addGenerationPrompt ?? false,
      bos_token: this.bosToken ?? '',
      eos_token: this.eosToken ?? '',
      tools: options.tools,
      ...options.extra,
    };
    try {
      for (const [name, value] of Object.entries(context)) env.set(name, value);
      const template = options.tools?.length && this.toolUseTemplate ? this.toolUseTemplate : this.template;
      return new TemplateInterpreter(env).run(template.parsed).value as string;
    } catch (err) {
      throw new ChatTemplateError(err as Error);
    }
  }

  /** Token ids of the chat prompt, ready for generation. */
  encodeChat(messages: ChatMessage[], options: TemplateOptions = { addGenerationPrompt: true }): number[] {
    return this.encode(this.applyChatTemplate(messages, options));
  }

  /**
   * The conversation followed by `response` as the assistant's reply, as token ids with the
   * index of the first response token. The response span covers what the model writes after
   * the template's generation prompt for that reply, end-of-turn tokens included, so the
   * model learns to stop.
   *
   * Usually the rendered prompt (with its generation prompt) is a text prefix of the rendered
   * conversation, and the span is the rest: templates that rewrite history by position (Qwen3
   * keeps reasoning only after the last user query) still do this, since the reply is the
   * last turn either way.
   *
   * A generation prompt that opens a think block the rendered reply does not start with
   * (DeepSeek-R1 and its distills write `<think>\n` there, and drop the reasoning from a
   * rendered reply) is continued instead: see {@link continueOpenedThink}.
   *
   * A template that renders the history differently once the reply follows (Mistral's put the
   * system message into the last user turn only while that turn is last, so the conversation
   * with the reply has no system message at all) gives the reply as it ends that conversation,
   * after the prompt as generation sees it: see {@link replyAfterRewrittenHistory}.
   *
   * Any other mismatch (Qwen3 with `enable_thinking: false`, whose generation prompt is an
   * empty think block, and a reply that carries reasoning) leaves the reply's tokens without
   * a place, and this throws a UserError rather than train on a misaligned span.
   *
   * When the prompt's tokens are a prefix of the whole conversation's tokens (the usual
   * case), the whole conversation is encoded as one text. Otherwise (a BPE merge across the
   * boundary) the prompt and the rest are encoded apart and joined, which is exactly what
   * generation from that prompt would have produced.
   *
   * A reply that calls tools is the template's rendering of the assistant message with its
   * `tool_calls` (Qwen's `<tool_call>` blocks, Llama 3.1's JSON, Mistral's `[TOOL_CALLS]` list):
   * the tokens the model writes to call them. A template that leaves the calls out (Phi-3's
   * writes only `content`) would teach the model to answer with nothing, so a reply whose calls
   * the rendering does not name throws a UserError instead.
   *
   * Where the template writes nothing after a reply (GLM-4), the reply ends with the token the
   * model stops with, the next turn's opening (ToolCallDialect.replyEnd).
   */
  encodeResponse(messages: ChatMessage[], response: Reply, options: Omit<TemplateOptions, 'addGenerationPrompt'> = {}): ResponseSpan {
    const now = new Date(); // every render sees the same date (Llama 3.2 writes today's date)
    const replyMessage: ChatMessage = typeof response === 'string' ? { role: 'assistant', content: response } : { ...response, role: 'assistant' };
    const prompt = this.render(messages, { ...options, addGenerationPrompt: true }, now);
    const full = this.render([...messages, replyMessage], { ...options, addGenerationPrompt: false }, now);
    const rendered = full.startsWith(prompt) ? full.slice(prompt.length) : this.replyWhereHistoryDiffers(messages, replyMessage, options, now, prompt, full);
    checkCallsWritten(replyMessage, rendered);
    const reply = rendered + (this.toolCallDialect.replyEnd?.(replyMessage, rendered) ?? '');
    const promptIds = this.encode(prompt);
    const fullIds = this.encode(prompt + reply);
    if (promptIds.every((id, i) => fullIds[i] === id) && fullIds.length > promptIds.length) {
      return { inputIds: fullIds, responseStart: promptIds.length };
    }
    const tail = this.encode(reply);
    if (tail.length === 0) throw new UserError('the chat template renders the response as nothing: cannot find its tokens');
    return { inputIds: [...promptIds, ...tail], responseStart: promptIds.length };
  }

  /** The reply's text when the prompt is not the start of the conversation with the reply (encodeResponse). */
  private replyWhereHistoryDiffers(messages: ChatMessage[], response: ChatMessage, options: TemplateOptions, now: Date, prompt: string, full: string): string {
    // The think block the generation prompt opens, where the conversation is the same up to it
    // (not found by the shared prefix alone: a reply that starts with "<" shares its first character).
    const opened = /<think>\s*$/.exec(prompt);
    if (opened && full.startsWith(prompt.slice(0, opened.index))) return this.continueOpenedThink(messages, response, options, now, opened[0], prompt, full);
    return this.replyAfterRewrittenHistory(messages, response, options, now, prompt, full);
  }

  /**
   * The reply where the conversation's history renders otherwise once the reply follows it
   * (Mistral's system message, written into the last user turn only while that turn is last).
   * The model generates from the prompt, so what it learns to write is the reply as the
   * template ends the conversation with it: everything from where the reply turn's own text
   * begins (found against renders whose reply is a marker instead: the history renders the
   * same before any reply), taken only when the generation prompt comes right before it.
   * Anything else throws the UserError of a reply that does not follow its prompt.
   */
  private replyAfterRewrittenHistory(messages: ChatMessage[], response: ChatMessage, options: TemplateOptions, now: Date, prompt: string, full: string): string {
    const bare = this.render(messages, { ...options, addGenerationPrompt: false }, now);
    if (!prompt.startsWith(bare)) throw new UserError(notAPrefixMessage(prompt, full));
    // Two markers that differ in their first character: whatever the reply starts with, one
    // of them parts from it there.
    const withMarker = (marker: string) => this.render([...messages, { role: 'assistant', content: marker }], { ...options, addGenerationPrompt: false }, now);
    const start = Math.min(sharedPrefixLength(full, withMarker(REPLY_MARKER)), sharedPrefixLength(full, withMarker(`#${REPLY_MARKER}`)));
    if (!full.slice(0, start).endsWith(prompt.slice(bare.length))) throw new UserError(notAPrefixMessage(prompt, full));
    return full.slice(start);
  }

  /**
   * The reply text after a generation prompt that opens a think block (`<think>` and
   * whitespace, where the rendered conversation has something else): what the model would
   * write from there, then the end of turn the template writes after a reply's content.
   *   - a reply that starts with the opened text (`<think>\nreasoning</think>answer`)
   *     continues it: the opened text is not repeated;
   *   - a reply with reasoning but no opening tag (`reasoning</think>answer`, as such models
   *     write it after the prompt) is taken as it is;
   *   - a reply without reasoning closes an empty think block first (`\n</think>\n\n`,
   *     as Qwen3 writes an empty one), then the reply; one that is only tool calls, then the
   *     calls as the rendered conversation has them where the generation prompt's think began.
   * Anything else throws the UserError of a reply that does not follow its prompt.
   */
  private continueOpenedThink(messages: ChatMessage[], reply: ChatMessage, options: TemplateOptions, now: Date, opened: string, prompt: string, full: string): string {
    const response = reply.content ?? '';
    const closeEmpty = `${opened.endsWith('\n') ? '' : '\n'}\n</think>\n\n`;
    // A reply that is only calls: DeepSeek's templates write them in the content's place (and only
    // then), so the reply is an empty think block closed, then the calls as the template writes them.
    if (!response.trim() && Array.isArray(reply.tool_calls) && reply.tool_calls.length) return closeEmpty + full.slice(prompt.length - opened.length);
    const endOfTurn = this.afterContent(messages, reply, options, now);
    if (response.startsWith(opened)) return response.slice(opened.length) + endOfTurn;
    if (response.trimStart().startsWith('<think>')) throw new UserError(notAPrefixMessage(prompt, full));
    if (response.includes('</think>')) return response + endOfTurn;
    return `${closeEmpty}${response}${endOfTurn}`;
  }

  /**
   * What the template writes after an assistant reply's content: its tool calls, where it has
   * some, and the end-of-turn tokens.
   */
  private afterContent(messages: ChatMessage[], reply: ChatMessage, options: TemplateOptions, now: Date): string {
    const rendered = this.render([...messages, { ...reply, content: REPLY_MARKER }], { ...options, addGenerationPrompt: false }, now);
    const at = rendered.lastIndexOf(REPLY_MARKER);
    if (at < 0) throw new UserError('the chat template does not write an assistant reply\'s content: cannot find where a reply ends');
    return rendered.slice(at + REPLY_MARKER.length);
  }
}

/** Text put in a reply's place to find where a template writes the reply (no template writes it of its own). */
const REPLY_MARKER = 'HindsightReplyMarker';

/** A reply calls tools and the chat template's rendering of it leaves them out (Phi-3's template writes only `content`). */
export class ToolCallsNotWritten extends UserError {
  constructor(readonly missing: string) {
    super(`the chat template does not write the reply's tool calls (no '${missing}' in its rendering): a reply that calls tools cannot be trained with this template`);
  }
}

/** Throws where a reply calls tools and its rendering (`written`) does not name each of them (encodeResponse). */
function checkCallsWritten(reply: ChatMessage, written: string): void {
  const calls = Array.isArray(reply.tool_calls) ? (reply.tool_calls as { function?: { name?: unknown } }[]) : [];
  const missing = calls.map((c) => c?.function?.name).find((name) => typeof name !== 'string' || !written.includes(name));
  if (calls.length && missing !== undefined) throw new ToolCallsNotWritten(String(missing));
}

function notAPrefixMessage(prompt: string, full: string): string {
  const i = sharedPrefixLength(prompt, full);
  const excerpt = (s: string) => JSON.stringify(s.slice(Math.max(0, i - 20), i + 30));
  return (
    'the chat template renders the reply so that the prompt (with its generation prompt) is not the start of the conversation with the reply, ' +
    `so the reply's tokens cannot be found: at character ${i} the prompt reads ${excerpt(prompt)} but the conversation reads ${excerpt(full)}` +
    ' (for Qwen3, a reply with <think> reasoning cannot follow enable_thinking=false)'
  );
}

