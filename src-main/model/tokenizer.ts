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
 */
import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { UserError } from '../core/types.js';

export const FALLBACK_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ message['role'] | capitalize }}: {{ message['content'] }}\n\n{% endfor %}" +
  '{% if add_generation_prompt %}Assistant:{% endif %}';

export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface TemplateOptions {
  addGenerationPrompt?: boolean;
  /** OpenAI-style tool definitions, passed to templates that render them. */
  tools?: unknown[];
  /** Extra template variables (e.g. `enable_thinking` for Qwen3). */
  extra?: Record<string, unknown>;
}

/** A prompt + response as token ids, with where the response begins. */
export interface ResponseSpan {
  inputIds: number[];
  responseStart: number;
}

function readJsonIfExists(file: string): Record<string, unknown> | undefined {
  if (!fs.existsSync(file)) return undefined;
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UserError(`${file}: invalid JSON (${(err as Error).message})`);
  }
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
  private readonly template: Template;

  private constructor(private readonly tokenizer: Tokenizer, config: Record<string, unknown>, templateText: string | undefined, dir: string) {
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.bosTokenId = this.bosToken !== undefined ? tokenizer.token_to_id(this.bosToken) : undefined;
    const modelConfig = readJsonIfExists(path.join(dir, 'config.json')) ?? {};
    const genConfig = readJsonIfExists(path.join(dir, 'generation_config.json')) ?? {};
    const eos = new Set([...idList(genConfig.eos_token_id), ...idList(modelConfig.eos_token_id)]);
    const eosFromTokenizer = this.eosToken !== undefined ? tokenizer.token_to_id(this.eosToken) : undefined;
    if (eosFromTokenizer !== undefined) eos.add(eosFromTokenizer);
    this.eosTokenIds = [...eos];
    if (this.bosTokenId === undefined) this.bosTokenId = idList(modelConfig.bos_token_id)[0];
    this.thinkStartId = tokenizer.token_to_id('<think>');
    this.thinkEndId = tokenizer.token_to_id('</think>');
    this.chatTemplateSource = templateText ? 'model' : 'fallback';
    try {
      this.template = new Template(templateText ?? FALLBACK_CHAT_TEMPLATE);
    } catch (err) {
      throw new UserError(`${path.join(dir, 'tokenizer_config.json')}: chat_template does not parse: ${(err as Error).message}`);
    }
  }

  static load(dir: string): ChatTokenizer {
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
    return new ChatTokenizer(tokenizer, config, findChatTemplate(dir, config), dir);
  }

  get vocabSize(): number {
    return this.tokenizer.get_vocab(true).size;
  }

  encode(text: string, addSpecialTokens = false): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: number[], skipSpecialTokens = true): string {
    return this.tokenizer.decode(ids, { skip_special_tokens: skipSpecialTokens });
  }

  tokenToId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.tokenizer.id_to_token(id);
  }

  applyChatTemplate(messages: ChatMessage[], options: TemplateOptions = {}): string {
    try {
      return this.template.render({
        messages,
        add_generation_prompt: options.addGenerationPrompt ?? false,
        bos_token: this.bosToken ?? '',
        eos_token: this.eosToken ?? '',
        tools: options.tools,
        ...options.extra,
      });
    } catch (err) {
      throw new UserError(`chat template failed to render: ${(err as Error).message}`);
    }
  }

  /** Token ids of the chat prompt, ready for generation. */
  encodeChat(messages: ChatMessage[], options: TemplateOptions = { addGenerationPrompt: true }): number[] {
    return this.encode(this.applyChatTemplate(messages, options));
  }

  /**
   * The conversation followed by `response` as the assistant's reply, as token ids with the
   * index of the first response token. The response span covers what the template writes
   * for that reply after the generation prompt, end-of-turn tokens included, so the model
   * learns to stop.
   *
   * When the prompt's tokens are a prefix of the whole conversation's tokens (the usual
   * case), the whole conversation is encoded as one text. Otherwise (a BPE merge across the
   * boundary) the prompt and the rest are encoded apart and joined, which is exactly what
   * generation from that prompt would have produced.
   */
  encodeResponse(messages: ChatMessage[], response: string, options: Omit<TemplateOptions, 'addGenerationPrompt'> = {}): ResponseSpan {
    const prompt = this.applyChatTemplate(messages, { ...options, addGenerationPrompt: true });
    const full = this.applyChatTemplate([...messages, { role: 'assistant', content: response }], { ...options, addGenerationPrompt: false });
    const promptIds = this.encode(prompt);
    const fullIds = this.encode(full);
    if (full.startsWith(prompt) && promptIds.every((id, i) => fullIds[i] === id) && fullIds.length > promptIds.length) {
      return { inputIds: fullIds, responseStart: promptIds.length };
    }
    const boundary = commonPrefixLength(prompt, full);
    const head = this.encode(full.slice(0, boundary));
    const tail = this.encode(full.slice(boundary));
    if (tail.length === 0) throw new UserError('the chat template renders the response as nothing: cannot find its tokens');
    return { inputIds: [...head, ...tail], responseStart: head.length };
  }
}

function commonPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function findChatTemplate(dir: string, config: Record<string, unknown>): string | undefined {
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t as { name?: string; template?: string }[];
    return (named.find((x) => x.name === 'default') ?? named[0])?.template;
  }
  const jinja = path.join(dir, 'chat_template.jinja');
  if (fs.existsSync(jinja)) return fs.readFileSync(jinja, 'utf8');
  const json = readJsonIfExists(path.join(dir, 'chat_template.json'));
  if (typeof json?.chat_template === 'string') return json.chat_template;
  return undefined;
}
