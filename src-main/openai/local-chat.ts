/**
 * Answering one chat-completions request with the local model (src-main/model/), in its
 * worker thread: the chat template renders the messages, the engine samples, and the
 * reply is split into reasoning, content and tool calls exactly as `LocalModel.generate`
 * does. Streaming turns the engine's per-token callback into text deltas.
 *
 * Streaming text is only ever emitted as a prefix of the final answer: a suffix that could
 * still become a stop string, a `<think>`/`</think>`/`<tool_call>` tag (or DeepSeek's calls' opening), or an incomplete
 * UTF-8 character is held back until the next token settles it, nothing after Mistral's
 * `[TOOL_CALLS]` token is content, and where tools were offered to a model that calls them in
 * bare JSON (Llama 3.1+) an answer that opens with "{" waits for the end, so a client that
 * concatenates the deltas gets the same content as a non-streaming request.
 *
 * The result keeps every generated token id and its log-prob (fp32 from the model at
 * temperature 1), which live capture (issue 7) stores as the rollout's old log-probs.
 */
import type { GenerateResult, LocalModel } from '../model/local-model.js';
import { sequenceSeeds } from '../model/sampling.js';
import { decodeWithThinkTags, mayBeBareCall, replyTokens, splitReasoningText, TEXT_CALL_OPENERS, type BareCall } from '../model/chat-output.js';
import { ContextLengthError, replyBudget } from '../model/context-limit.js';
import { RequestError, type ChatRequest, type FinishReason, type TokenLogprob, type ToolCallOut } from './protocol.js';

export interface ChatResult {
  content: string;
  reasoning?: string;
  toolCalls: ToolCallOut[];
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  /** Generated token ids (the end-of-sequence token excluded) and their log-probs. */
  tokens: number[];
  logprobs: number[];
  /** The prompt's token ids: the messages through the chat template, generation prompt added. */
  promptIds: number[];
  /**
   * The rollout exactly as sampled (end-of-sequence token included when generation stopped on
   * it), for live capture to store as the reply's old log-probs; null when a stop string cut
   * the text, since the tokens then say more than the reply.
   */
  rollout: { tokens: number[]; logprobs: number[] } | null;
  /** Present when an abort signal ended the reply early (the Chat page's Stop). */
  cancelled?: true;
}

export interface StreamDelta {
  content?: string;
  reasoning?: string;
}

const TAGS = ['<think>', '</think>', ...TEXT_CALL_OPENERS];

/** Length of the longest suffix of `text` that is a proper prefix of `marker`. */
function partialSuffix(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) if (text.endsWith(marker.slice(0, n))) return n;
  return 0;
}

/** Incremental decoding for streams; see the module comment for what it holds back. */
export class StreamText {
  private readonly ids: number[] = [];
  private sentContent = '';
  private sentReasoning = '';
  private callsStarted = false;

  constructor(
    private readonly decode: (ids: number[]) => string,
    private readonly opensThinking: boolean,
    private readonly stops: string[],
    private readonly skipIds: number[],
    /** Mistral's `[TOOL_CALLS]` token (ChatTokenizer.toolCallsId): the tool calls follow it. */
    private readonly toolCallsId?: number,
    /**
     * Tools were offered to a model that writes calls without a marker (Llama 3.1+'s JSON, GLM-4's
     * name line): an answer that may still be such a call is held until the end, when it is a call or text.
     */
    private readonly bareCall?: BareCall,
  ) {}

  push(token: number): StreamDelta {
    this.callsStarted ||= token === this.toolCallsId;
    if (this.callsStarted || this.skipIds.includes(token)) return {};
    this.ids.push(token);
    let text = this.decode(this.ids);
    // An incomplete multi-byte character decodes as U+FFFD until its last byte arrives.
    text = text.replace(/\uFFFD+$/, '');
    // The engine sees this token before it checks the stop strings: cut as it will.
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0) text = text.slice(0, at);
    }
    const hold = Math.max(0, ...[...TAGS, ...this.stops].map((m) => partialSuffix(text, m)));
    const safe = text.slice(0, text.length - hold);
    const { reasoning = '', answer } = splitReasoningText((this.opensThinking ? '<think>' : '') + safe);
    const call = Math.min(...TEXT_CALL_OPENERS.map((opener) => answer.indexOf(opener)).filter((at) => at >= 0));
    if (mayBeBareCall(this.bareCall, answer)) return this.diff('', reasoning);
    return this.diff(Number.isFinite(call) ? answer.slice(0, call).trimEnd() : answer, reasoning);
  }

  /** The rest of the final answer, where it extends what was sent. */
  finish(content: string, reasoning: string | undefined): StreamDelta {
    return this.diff(content, reasoning ?? '');
  }

  private diff(content: string, reasoning: string): StreamDelta {
    const out: StreamDelta = {};
    if (reasoning.length > this.sentReasoning.length && reasoning.startsWith(this.sentReasoning)) {
      out.reasoning = reasoning.slice(this.sentReasoning.length);
      this.sentReasoning = reasoning;
    }
    if (content.length > this.sentContent.length && content.startsWith(this.sentContent)) {
      out.content = content.slice(this.sentContent.length);
      this.sentContent = content;
    }
    return out;
  }
}

/** Whether the rendered prompt ends inside an opened `<think>` (DeepSeek-R1-style templates). */
function promptOpensThinking(model: LocalModel, ids: number[]): boolean {
  const open = model.tokenizer.thinkStartId;
  if (open === undefined) return false;
  const tail = ids.slice(-4);
  const close = model.tokenizer.thinkEndId;
  return tail.includes(open) && (close === undefined || tail.lastIndexOf(close) < tail.lastIndexOf(open));
}

/** A request's prompt, rendered, and the reply budget it leaves (max_tokens capped to the context). */
export interface ChatPrompt {
  ids: number[];
  maxTokens: number;
}

/**
 * Renders the messages and fits max_tokens into the model's context (../model/context-limit.ts).
 * A prompt that does not fit is a 400 in OpenAI's `context_length_exceeded` shape, raised
 * here, before a stream has sent its headers.
 */
export function chatPrompt(model: LocalModel, request: ChatRequest): ChatPrompt {
  const template = request.tools ? { tools: request.tools } : undefined;
  const ids = model.promptIds(request.messages, { chatTemplate: true, template });
  try {
    return { ids, maxTokens: replyBudget(ids.length, request.maxTokens, model.maxPositions) };
  } catch (err) {
    if (!(err instanceof ContextLengthError)) throw err;
    throw new RequestError(
      `This model's maximum context length is ${err.maxPositions} tokens. However, your messages resulted in ${err.promptTokens} tokens, ` +
        'which leaves no room for a reply. Please reduce the length of the messages.',
      'messages',
      400,
      'invalid_request_error',
      'context_length_exceeded',
    );
  }
}

/** A reply's stream of text deltas (the module comment says what it holds back). */
function replyStream(model: LocalModel, ids: number[], request: ChatRequest): StreamText {
  const { bareCall } = replyTokens(model.tokenizer, (request.tools?.length ?? 0) > 0);
  return new StreamText((t) => decodeWithThinkTags(model.tokenizer, t), promptOpensThinking(model, ids), request.stop, model.tokenizer.eosTokenIds, model.tokenizer.toolCallsId, bareCall);
}

/** `onDelta` for the deltas that carry text. */
const textOnly = (onDelta: (d: StreamDelta) => void) => (d: StreamDelta) => {
  if (d.content !== undefined || d.reasoning !== undefined) onDelta(d);
};

/** One reply, streamed through `onDelta` when given; aborting `signal` ends it after the current token (the app's Chat page). */
export async function completeChat(model: LocalModel, request: ChatRequest, prompt: ChatPrompt, onDelta?: (delta: StreamDelta) => void, signal?: AbortSignal): Promise<ChatResult> {
  const { ids } = prompt;
  const stream = onDelta ? replyStream(model, ids, request) : null;
  const emit = onDelta ? textOnly(onDelta) : () => {};
  const out = await model.generate(ids, {
    temperature: request.temperature,
    topP: request.topP,
    maxNewTokens: prompt.maxTokens,
    // The prompt is rendered already; the tools tell the reply's parser what a call looks like.
    ...(request.tools ? { template: { tools: request.tools } } : {}),
    // A conversation's next request begins with this one: only what is new is prefilled.
    reusePrefix: true,
    ...(request.seed !== undefined ? { seed: request.seed } : {}),
    ...(request.stop.length ? { stopStrings: request.stop } : {}),
    ...(stream ? { onToken: (token: number) => emit(stream.push(token)) } : {}),
    ...(signal ? { signal } : {}),
  });
  if (stream) emit(stream.finish(out.content, out.reasoning));
  return chatResult(model, ids, out);
}

/**
 * OpenAI's `n` > 1: the choices as one batched generation sharing the prompt's prefill
 * (docs/design.md §Batched generation). Choice j is the reply `seed + j` alone gives. Streamed
 * through `onDelta` when given, each choice's text held back as one reply's is (StreamText).
 */
export async function completeChats(model: LocalModel, request: ChatRequest, prompt: ChatPrompt, onDelta?: (choice: number, delta: StreamDelta) => void): Promise<ChatResult[]> {
  const { ids } = prompt;
  const streams = onDelta ? Array.from({ length: request.n }, (_, choice) => ({ text: replyStream(model, ids, request), emit: textOnly((d) => onDelta(choice, d)) })) : null;
  const [outs] = await model.generateBatch([{ prompt: ids, seeds: sequenceSeeds(request.seed, request.n) }], {
    temperature: request.temperature,
    topP: request.topP,
    maxNewTokens: prompt.maxTokens,
    ...(request.tools ? { template: { tools: request.tools } } : {}),
    ...(request.stop.length ? { stopStrings: request.stop } : {}),
    ...(streams ? { onToken: (choice: number, token: number) => streams[choice]!.emit(streams[choice]!.text.push(token)) } : {}),
  });
  if (streams) outs!.forEach((out, choice) => streams[choice]!.emit(streams[choice]!.text.finish(out.content, out.reasoning)));
  return outs!.map((out) => chatResult(model, ids, out));
}

function chatResult(model: LocalModel, ids: number[], out: GenerateResult): ChatResult {
  const eos = model.tokenizer.eosTokenIds;
  const kept = out.tokens.map((t, i) => [t, out.logprobs[i]!] as const).filter(([t]) => !eos.includes(t));
  return {
    content: out.content,
    ...(out.reasoning ? { reasoning: out.reasoning } : {}),
    toolCalls: out.toolCalls,
    finishReason: out.toolCalls.length ? 'tool_calls' : out.finishReason === 'length' ? 'length' : 'stop',
    promptTokens: ids.length,
    completionTokens: kept.length,
    tokens: kept.map(([t]) => t),
    logprobs: kept.map(([, lp]) => lp),
    promptIds: ids,
    rollout: out.finishReason === 'stop' ? null : { tokens: out.tokens, logprobs: out.logprobs },
    ...(out.finishReason === 'cancelled' ? { cancelled: true as const } : {}),
  };
}

/** Each chosen token with its log-prob, in OpenAI's `logprobs.content` shape. */
export function tokenLogprobs(model: LocalModel, result: ChatResult): TokenLogprob[] {
  return result.tokens.map((t, i) => {
    const token = model.tokenizer.decode([t], false);
    return { token, logprob: result.logprobs[i]!, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] };
  });
}
