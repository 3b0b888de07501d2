/**
 * The `openai` judge backend: any OpenAI-compatible `/v1/chat/completions` endpoint
 * (Ollama, llama.cpp server, vLLM, LM Studio, Hindsight's own `serve`), over Node's fetch.
 *
 * Failure handling, so a judge run either works or stops with one clear line:
 * - each request has a timeout (headers AND body): a server that accepts and never
 *   answers is a UserError naming the URL and the limit; a timeout is not retried (a
 *   server that took that long will most likely take that long again);
 * - refused/reset connections, HTTP 429 and 5xx are retried with exponential backoff
 *   (honouring a short Retry-After), then reported naming the URL;
 * - a 400 that says the prompt is longer than the model's context ("maximum context length is
 *   N tokens", in OpenAI's, vLLM's, llama.cpp's and Ollama's wordings) is a ContextOverflowError
 *   with the limit (./prompt-fit.ts); the judge learns the limit and refits the prompt once;
 * - a 400 naming `chat_template_kwargs` (a server that takes no template variables, such as
 *   OpenAI's own) drops them for this client and retries at once;
 * - other HTTP errors (401, 404, 400 …) are reported at once with the server's message;
 *   the ones the user fixes in the judge's settings are JudgeSetupErrors (./judge-errors.ts),
 *   worded for the command line and for the app;
 * - a 200 whose body is not JSON, or has no choices, is "answered garbage", naming the URL;
 * - at most `concurrency` requests are in flight at once, across all samples and votes.
 * A cancelled run (AbortSignal) rejects with an AbortError at once.
 */
import { UserError } from '../../src-shared/types.js';
import { JudgeBackendDownError, JudgeSetupError } from './judge-errors.js';
import type { ChatCompleter, CompletionOptions } from './llm-judge.js';
import type { PromptMessage } from './prompts.js';
import { CUT_OFF_NOTE } from './parse.js';
import { ContextOverflowError, estimateTokens, parseContextOverflow } from './prompt-fit.js';

export interface OpenAiClientOptions {
  /** Base URL up to and including `/v1`, e.g. http://127.0.0.1:11434/v1 (Ollama). */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Per-request limit in ms (default 120 s: a large model on a CPU is slow). */
  timeoutMs?: number;
  /** Retries after the first attempt on connection errors, 429 and 5xx (default 3). */
  retries?: number;
  /** First backoff in ms; doubles on each retry (default 500). */
  backoffMs?: number;
  /** Requests in flight at once (default 4). */
  concurrency?: number;
  /** The model's context in tokens (Settings, `--judge-context`); unknown until a 400 reports it. */
  contextTokens?: number;
}

export const DEFAULT_TIMEOUT_MS = 120_000;
const MAX_RETRY_AFTER_MS = 30_000;

/** A counting semaphore: at most `limit` holders at once, served in arrival order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(readonly limit: number) {}

  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.active >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(signal!.reason);
        };
        if (signal?.aborted) return reject(signal.reason);
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(wake);
      });
    } else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes straight to the next waiter
      else this.active--;
    }
  }
}

/** Normalises a user-typed base URL and checks it is http(s). */
export function normaliseBaseUrl(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl.trim());
  } catch {
    throw new UserError(`'${baseUrl}' is not a URL; give the endpoint's base URL, e.g. http://127.0.0.1:11434/v1`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UserError(`'${baseUrl}': the endpoint URL must start with http:// or https://`);
  return url.href.replace(/\/+$/, '');
}

class RetryableError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

function connectionProblem(err: unknown): string | null {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  const code = cause?.code ?? (err as { code?: string })?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused (is the server running?)',
    ECONNRESET: 'the connection was reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host name lookup failed',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    UND_ERR_SOCKET: 'the connection was closed by the server',
    UND_ERR_CLOSED: 'the connection was closed by the server',
  };
  if (code && known[code]) return known[code]!;
  if (err instanceof TypeError && /fetch failed/i.test(err.message)) return cause?.message ?? 'the request failed';
  return null;
}

function serverMessage(body: string): string {
  try {
    const json = JSON.parse(body) as { error?: { message?: string } | string; message?: string };
    const msg = typeof json.error === 'string' ? json.error : json.error?.message ?? json.message;
    if (msg) return String(msg).slice(0, 300);
  } catch {
    // not JSON: show the text
  }
  return body.replace(/\s+/g, ' ').trim().slice(0, 200) || '(empty body)';
}

export class OpenAiClient implements ChatCompleter {
  readonly backend = 'openai' as const;
  readonly model: string;
  readonly url: string;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly limiter: Semaphore;
  private context: number | null;
  /** How many tokens the server counts per estimated token, learnt from its refusals. */
  private scale = 1;
  /** False once the server refused `chat_template_kwargs`. */
  private templateKwargs = true;

  constructor(options: OpenAiClientOptions) {
    if (!options.model.trim()) throw new JudgeSetupError({ kind: 'no-model-name' });
    this.url = `${normaliseBaseUrl(options.baseUrl)}/chat/completions`;
    this.model = options.model.trim();
    this.apiKey = options.apiKey ?? '';
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 500;
    this.limiter = new Semaphore(Math.max(1, options.concurrency ?? 4));
    this.context = options.contextTokens && options.contextTokens > 0 ? options.contextTokens : null;
  }

  contextTokens(): number | null {
    return this.context;
  }

  /** No tokenizer here: a conservative estimate (./prompt-fit.ts), scaled by what refusals taught. */
  countTokens(messages: PromptMessage[]): number {
    return Math.ceil(estimateTokens(messages) * this.scale);
  }

  learnContext(overflow: ContextOverflowError, sent: PromptMessage[]): void {
    this.context = overflow.limit;
    const estimate = estimateTokens(sent);
    // Where the server said how many tokens the prompt took, count as it does from now on (and
    // 5% more); without its count, assume the estimate was a quarter short.
    this.scale = overflow.promptTokens !== undefined ? (overflow.promptTokens / estimate) * 1.05 : this.scale * 1.25;
  }

  complete(messages: PromptMessage[], options: CompletionOptions): Promise<string> {
    return this.limiter.run(() => this.completeWithRetries(messages, options), options.signal);
  }

  private async completeWithRetries(messages: PromptMessage[], options: CompletionOptions): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(messages, options);
      } catch (err) {
        if (!(err instanceof RetryableError)) throw err;
        if (attempt >= this.retries) {
          throw new JudgeBackendDownError(`the OpenAI-compatible endpoint ${this.url} failed after ${attempt + 1} attempt(s): ${err.message}`);
        }
        await sleep(Math.min(err.retryAfterMs ?? Infinity, this.backoffMs * 2 ** attempt), options.signal);
      }
    }
  }

  private async attempt(messages: PromptMessage[], options: CompletionOptions): Promise<string> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json' };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    const body = JSON.stringify({
      model: this.model,
      messages,
      temperature: options.temperature,
      max_tokens: options.maxTokens,
      seed: options.seed,
      stream: false,
      // Thinking off where the model's template has the switch (Qwen3; vLLM, SGLang, llama.cpp
      // pass it to the template); servers without template variables are told once, below.
      ...(this.templateKwargs ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    });
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const res = await fetch(this.url, { method: 'POST', headers, body, signal });
      status = res.status;
      retryAfter = res.headers.get('retry-after');
      text = await res.text();
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      if (timeout.aborted) {
        throw new JudgeSetupError({ kind: 'timeout', url: this.url, timeoutMs: this.timeoutMs });
      }
      if ((err as { cause?: { message?: string } })?.cause?.message === 'bad port') {
        throw new UserError(`cannot use ${this.url}: Node's fetch refuses port ${new URL(this.url).port} (a port browsers block as unsafe); run the server on another port`);
      }
      const problem = connectionProblem(err);
      if (problem) throw new RetryableError(`cannot reach it: ${problem}`);
      throw err;
    }
    if (status === 429 || status >= 500) {
      const seconds = retryAfter !== null ? Number(retryAfter) : NaN;
      const retryAfterMs = Number.isFinite(seconds) && seconds >= 0 ? Math.min(seconds * 1000, MAX_RETRY_AFTER_MS) : undefined;
      throw new RetryableError(`HTTP ${status}: ${serverMessage(text)}`, retryAfterMs);
    }
    if (status === 401 || status === 403) {
      throw new JudgeSetupError({ kind: 'key-refused', url: this.url, status, detail: serverMessage(text) });
    }
    if (status === 404) {
      throw new JudgeSetupError({ kind: 'not-found', url: this.url, model: this.model, detail: serverMessage(text) });
    }
    if (status === 400 || status === 413 || status === 422) {
      const overflow = parseContextOverflow(text);
      if (overflow) throw new ContextOverflowError(`the OpenAI-compatible endpoint ${this.url} answered HTTP ${status}: ${serverMessage(text)}`, overflow.limit, overflow.promptTokens);
      if (this.templateKwargs && /chat_template_kwargs/i.test(text)) {
        this.templateKwargs = false;
        return this.attempt(messages, options);
      }
    }
    if (status < 200 || status >= 300) throw new UserError(`the OpenAI-compatible endpoint ${this.url} answered HTTP ${status}: ${serverMessage(text)}`);
    return this.contentOf(text);
  }

  /** The first choice's text; anything else from a 200 is garbage, named as such. */
  private contentOf(text: string): string {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new UserError(`the OpenAI-compatible endpoint ${this.url} answered garbage: not JSON (${JSON.stringify(text.slice(0, 120))})`);
    }
    const choices = (json as { choices?: unknown })?.choices;
    if (!Array.isArray(choices) || choices.length === 0) {
      throw new UserError(`the OpenAI-compatible endpoint ${this.url} answered garbage: JSON without choices (${JSON.stringify(text.slice(0, 120))})`);
    }
    const choice = choices[0] as { finish_reason?: unknown; message?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown } };
    const message = choice.message;
    if (!message || typeof message !== 'object') {
      throw new UserError(`the OpenAI-compatible endpoint ${this.url} answered garbage: its first choice has no message`);
    }
    const content = typeof message.content === 'string' ? message.content : '';
    // Servers that split reasoning off send it apart (`reasoning_content`: vLLM, llama.cpp,
    // Hindsight; `reasoning`: Ollama); keep it in the raw vote, marked as reasoning so the
    // parser skips it.
    const split = [message.reasoning_content, message.reasoning].find((r): r is string => typeof r === 'string' && r.length > 0);
    const reasoning = split ?? '';
    // Reasoning stopped by max_tokens has no closing tag: the parser then finds no answer.
    const raw = reasoning ? `<think>${reasoning}${content || choice.finish_reason !== 'length' ? '</think>' : ''}${content}` : content;
    return choice.finish_reason === 'length' ? raw + CUT_OFF_NOTE : raw;
  }

  async close(): Promise<void> {
    // fetch keeps no per-client state to release
  }
}
