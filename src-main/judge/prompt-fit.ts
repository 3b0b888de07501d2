/**
 * Fitting a judge prompt to the judge model's context (docs/design.md §The context window).
 *
 * A judge prompt is the judge's instructions, the conversation before the reply (where a
 * prompt shows it: the replay judge's), the reply, the next state and the question. What may
 * be cut is the conversation, from the left (oldest turns first), as training's window does;
 * the reply and its next state are kept whole. A prompt that does not fit even with no
 * conversation left is not sent: the sample is skipped and counted (PromptTooLongError), since
 * a judge that lost its instructions or the reply it grades writes nothing worth a label.
 *
 * The answer keeps room for a quarter of the context, or the judge's max_tokens when that is
 * less; the prompt gets the rest.
 */
import { UserError } from '../../src-shared/types.js';
import type { PromptMessage } from './prompts.js';

/** A sample whose judge prompt cannot fit the judge model's context: skipped and counted, never fatal. */
export class PromptTooLongError extends UserError {
  constructor(
    readonly promptTokens: number,
    readonly contextTokens: number,
  ) {
    super(`the judge prompt takes ${promptTokens} tokens, more than the judge's ${contextTokens}-token context leaves for it`);
  }
}

/**
 * An OpenAI-compatible server's "this prompt is longer than my context" (an HTTP 400), with the
 * limit it reported and, where it said so, the prompt's size as it counted it.
 */
export class ContextOverflowError extends UserError {
  constructor(
    message: string,
    readonly limit: number,
    readonly promptTokens: number | undefined,
  ) {
    super(message);
  }
}

/** Tokens the answer keeps: a quarter of the context, or max_tokens when that is less. */
export function answerReserve(contextTokens: number, maxTokens: number): number {
  return Math.max(1, Math.min(maxTokens, Math.floor(contextTokens / 4)));
}

/**
 * A conservative token count for a backend whose tokenizer we do not have (an OpenAI-compatible
 * server): it should come out at or above what the server counts, so a fitted prompt is
 * rarely refused. Byte-level BPE tokenizers (GPT, Llama 3, Qwen, Mistral) average about 4
 * characters of English per token and 3 of code; counting 3 ASCII characters per token
 * over-counts both. A non-ASCII character counts as a whole token (CJK runs about 1 per
 * character; accented Latin letters less). Each message adds 8 for its role markers, and the
 * generation prompt 8 more (ChatML spends 4–5). A server whose tokenizer counts more still
 * answers a context-length 400, which the client reads to recalibrate and retry
 * (./openai-client.ts).
 */
export function estimateTokens(messages: readonly PromptMessage[]): number {
  let total = 8;
  for (const m of messages) {
    let ascii = 0;
    let other = 0;
    for (const ch of m.content) {
      if (ch.codePointAt(0)! < 128) ascii++;
      else other++;
    }
    total += 8 + Math.ceil(ascii / 3) + other;
  }
  return total;
}

/** What a backend tells the fitter: its context (null: unknown, nothing is fitted) and its count. */
export interface PromptMeasure {
  contextTokens(): number | null;
  countTokens(messages: PromptMessage[]): number;
}

export interface FittedPrompt {
  messages: PromptMessage[];
  promptTokens: number;
  /** max_tokens for the answer: the judge's, capped to the room the prompt leaves. */
  maxTokens: number;
  /** Conversation turns dropped from the left. */
  droppedTurns: number;
}

/**
 * The prompt `build(k)` with the most conversation turns k ≤ `turns` that fits, or a
 * PromptTooLongError when even k = 0 does not. With no known context the full prompt is used.
 */
export function fitPrompt(build: (contextTurns: number) => PromptMessage[], turns: number, measure: PromptMeasure, maxTokens: number): FittedPrompt {
  const context = measure.contextTokens();
  const full = build(turns);
  if (context === null) return { messages: full, promptTokens: 0, maxTokens, droppedTurns: 0 };
  const room = context - answerReserve(context, maxTokens);
  let smallest = Infinity;
  for (let k = turns; k >= 0; k--) {
    const messages = k === turns ? full : build(k);
    const promptTokens = measure.countTokens(messages);
    if (promptTokens <= room) return { messages, promptTokens, maxTokens: Math.min(maxTokens, context - promptTokens), droppedTurns: turns - k };
    smallest = Math.min(smallest, promptTokens);
  }
  throw new PromptTooLongError(smallest, context);
}

const LIMIT_PATTERNS: RegExp[] = [
  /maximum context length is (\d+)/i, // OpenAI, vLLM, LiteLLM: "This model's maximum context length is 512 tokens"
  /maximum (?:model|context) length of (\d+)/i, // vLLM: "longer than the maximum model length of 512"
  /available context size \((\d+) tokens?\)/i, // llama.cpp: "exceeds the available context size (512 tokens)"
  /context (?:length|size|window)[^\d]{0,30}\((\d+)(?: tokens?)?\)/i, // "the model's maximum context length (512 tokens)"
  /context (?:length|size|window) (?:is|of) (\d+)/i, // Ollama and others: "context length of 512"
];
const PROMPT_PATTERNS: RegExp[] = [
  /\((\d+) in the messages/i, // OpenAI, vLLM: "(600 in the messages, 512 in the completion)"
  /\((\d+) in your prompt/i,
  /your messages resulted in (\d+) tokens/i, // OpenAI
  /request has (\d+) input tokens/i, // vLLM ≥ 0.8
  /prompt \(length (\d+)\)/i, // vLLM: "The decoder prompt (length 600)"
  /request \((\d+) tokens?\) exceeds/i, // llama.cpp
  /input length \((\d+)(?: tokens?)?\)/i,
];

/**
 * A context-length refusal read from a 400's body: the limit, and the prompt's size where the
 * server said it. Null when the body is about something else.
 */
export function parseContextOverflow(body: string): { limit: number; promptTokens?: number } | null {
  let json: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(body) as Record<string, unknown>;
    json = (typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : parsed) as Record<string, unknown>;
  } catch {
    // plain text: read the words
  }
  const nCtx = typeof json.n_ctx === 'number' ? json.n_ctx : undefined; // llama.cpp's exceed_context_size_error
  const nPrompt = typeof json.n_prompt_tokens === 'number' ? json.n_prompt_tokens : undefined;
  const first = (patterns: RegExp[]) => {
    for (const re of patterns) {
      const m = re.exec(body);
      if (m) return Number(m[1]);
    }
    return undefined;
  };
  const limit = nCtx ?? first(LIMIT_PATTERNS);
  if (limit === undefined || !(limit > 0)) return null;
  const promptTokens = nPrompt ?? first(PROMPT_PATTERNS);
  return promptTokens === undefined ? { limit } : { limit, promptTokens };
}
