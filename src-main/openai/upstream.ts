/**
 * Proxy mode: a chat-completions request forwarded to another OpenAI-compatible server
 * (Ollama, llama.cpp's server, vLLM, another Hindsight), its answer passed back to the
 * client as it comes — JSON as it is, a stream event by event — while the reply is put
 * together for live capture.
 *
 * - The body goes upstream as the client sent it, with `model` replaced by the configured
 *   upstream model when one is set, and the upstream's API key instead of Hindsight's.
 * - An upstream error status (4xx/5xx) reaches the client unchanged and nothing is recorded.
 * - A stream's events are relayed as they arrive; the closing `data: [DONE]` is held back
 *   until the reply has been recorded (`onReply`, which fsyncs), so a client that saw the
 *   end of the stream knows the exchange is on disk.
 * - An upstream that cannot be reached is a 502 naming it; one that stops answering for
 *   `timeoutMs` is a 504.
 */
import http from 'node:http';
import type { ReplyText } from './capture-hook.js';
import { errorBody, RequestError, type FinishReason, type ToolCallOut } from './protocol.js';

export interface UpstreamTarget {
  /** The upstream's base URL, e.g. http://127.0.0.1:11434/v1 */
  baseUrl: string;
  apiKey?: string;
  /** Replaces the client's `model`; empty keeps it. */
  model?: string;
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;

function endpoint(target: UpstreamTarget): string {
  return target.baseUrl.replace(/\/+$/, '') + '/chat/completions';
}

function describeFailure(target: UpstreamTarget, err: unknown): RequestError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if ((err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError') {
    return new RequestError(`the upstream server ${target.baseUrl} did not answer in time`, null, 504, 'server_error', 'upstream_timeout');
  }
  const why = cause?.code ?? cause?.message ?? (err as Error).message;
  return new RequestError(`cannot reach the upstream server ${target.baseUrl}: ${why}`, null, 502, 'server_error', 'upstream_unreachable');
}

/**
 * Builds one reply out of stream deltas: text, reasoning, and tool calls merged by index. Of a
 * stream of n > 1 choices, the first (index 0), which capture records as it does without streaming.
 */
export class ReplyAccumulator {
  content = '';
  reasoning = '';
  finishReason: FinishReason = 'stop';
  model: string | null = null;
  completionId: string | null = null;
  private readonly calls = new Map<number, ToolCallOut>();

  addChunk(chunk: unknown): void {
    const c = chunk as { id?: unknown; model?: unknown; choices?: { index?: unknown; delta?: Record<string, unknown>; finish_reason?: unknown }[] };
    if (typeof c.model === 'string') this.model = c.model;
    if (typeof c.id === 'string' && this.completionId === null) this.completionId = c.id;
    const choice = c.choices?.find((x) => (x.index ?? 0) === 0);
    if (!choice) return;
    const d = choice.delta ?? {};
    if (typeof d.content === 'string') this.content += d.content;
    const r = d.reasoning_content ?? d.reasoning;
    if (typeof r === 'string') this.reasoning += r;
    if (Array.isArray(d.tool_calls)) {
      for (const raw of d.tool_calls as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]) {
        const index = raw.index ?? 0;
        const call = this.calls.get(index) ?? { id: raw.id ?? `call_${index}`, type: 'function' as const, function: { name: '', arguments: '' } };
        if (raw.id) call.id = raw.id;
        if (raw.function?.name) call.function.name += raw.function.name;
        if (raw.function?.arguments) call.function.arguments += raw.function.arguments;
        this.calls.set(index, call);
      }
    }
    if (choice.finish_reason === 'length' || choice.finish_reason === 'tool_calls' || choice.finish_reason === 'stop') this.finishReason = choice.finish_reason;
  }

  reply(): ReplyText {
    return {
      content: this.content,
      ...(this.reasoning ? { reasoning: this.reasoning } : {}),
      toolCalls: [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => c),
      finishReason: this.finishReason,
      model: this.model,
      completionId: this.completionId,
    };
  }
}

/** The reply of a non-streaming answer body. */
function replyOfBody(body: unknown): ReplyText {
  const b = body as { id?: unknown; model?: unknown; choices?: { message?: Record<string, unknown>; finish_reason?: unknown }[] };
  const message = b.choices?.[0]?.message;
  if (!message) throw new RequestError('the upstream server answered without choices[0].message', null, 502, 'server_error', 'upstream_garbage');
  const reasoning = message.reasoning_content ?? message.reasoning;
  const finish = b.choices![0]!.finish_reason;
  return {
    content: typeof message.content === 'string' ? message.content : '',
    ...(typeof reasoning === 'string' && reasoning ? { reasoning } : {}),
    toolCalls: Array.isArray(message.tool_calls) ? (message.tool_calls as ToolCallOut[]) : [],
    finishReason: finish === 'length' || finish === 'tool_calls' ? finish : 'stop',
    model: typeof b.model === 'string' ? b.model : null,
    completionId: typeof b.id === 'string' ? b.id : null,
  };
}

/**
 * Forwards one request and answers the client. `onReply` records the reply and must finish
 * (it fsyncs) before the answer completes; if it throws, the client gets an error instead.
 */
export async function forwardChat(
  target: UpstreamTarget,
  body: Record<string, unknown>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  onReply: (reply: ReplyText) => void,
  /** Called once the upstream accepted the request (a 2xx), before its answer is relayed. */
  onAccepted: () => void = () => {},
): Promise<void> {
  const outgoing = { ...body, ...(target.model ? { model: target.model } : {}) };
  const stream = body.stream === true;
  const abort = new AbortController();
  const onClientGone = () => abort.abort();
  req.socket.once('close', onClientGone);
  const timer = setTimeout(() => abort.abort(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), target.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  let upstream: Response;
  try {
    upstream = await fetch(endpoint(target), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(target.apiKey ? { Authorization: `Bearer ${target.apiKey}` } : {}) },
      body: JSON.stringify(outgoing),
      signal: abort.signal,
    });
  } catch (err) {
    clearTimeout(timer);
    req.socket.off('close', onClientGone);
    throw describeFailure(target, abort.signal.reason ?? err);
  }
  try {
    if (upstream.ok) onAccepted();
    if (!upstream.ok || !stream) {
      const text = await upstream.text();
      if (upstream.ok) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new RequestError(`the upstream server ${target.baseUrl} answered with something that is not JSON`, null, 502, 'server_error', 'upstream_garbage');
        }
        onReply(replyOfBody(parsed));
      }
      res.writeHead(upstream.status, { 'Content-Type': upstream.headers.get('content-type') ?? 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(text);
      return;
    }
    await relayStream(upstream, res, onReply);
  } catch (err) {
    if (err instanceof RequestError) throw err;
    throw describeFailure(target, abort.signal.reason ?? err);
  } finally {
    clearTimeout(timer);
    req.socket.off('close', onClientGone);
  }
}

async function relayStream(upstream: Response, res: http.ServerResponse, onReply: (reply: ReplyText) => void): Promise<void> {
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
  const acc = new ReplyAccumulator();
  const decoder = new TextDecoder();
  let buffer = '';
  let sawDone = false;
  let failed = false;
  const handleEvent = (block: string) => {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (data === '[DONE]') {
      sawDone = true;
      return; // sent after the reply is recorded
    }
    if (data) {
      try {
        const chunk = JSON.parse(data) as { error?: unknown };
        if (chunk.error) failed = true;
        else acc.addChunk(chunk);
      } catch {
        // not JSON: relayed as it is, not recorded
      }
    }
    res.write(block + '\n\n');
  };
  for await (const part of upstream.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(part, { stream: true }).replace(/\r\n/g, '\n');
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      handleEvent(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
    }
  }
  if (buffer.trim()) handleEvent(buffer);
  // Only a stream that ended properly is a reply worth training on.
  if (sawDone && !failed) {
    try {
      onReply(acc.reply());
    } catch (err) {
      res.write(`data: ${JSON.stringify(errorBody(`the reply could not be recorded: ${(err as Error).message}`, 'server_error'))}\n\n`);
    }
  }
  if (sawDone) res.write('data: [DONE]\n\n');
  res.end();
}
