/**
 * Hindsight's OpenAI-compatible endpoint: point any OpenAI client (or Hindsight's own
 * `openai` judge backend) at the local model.
 *
 *   GET  /v1/models             the served model
 *   POST /v1/chat/completions   non-streaming JSON, or (stream: true) server-sent events in
 *                               OpenAI's chunk format ending with `data: [DONE]`
 *
 * Auth: `Authorization: Bearer <token>`, the token of this launch (`hindsight serve`
 * prints it; it is the same one the UI uses). Errors use OpenAI's body
 * `{error:{message,type,param,code}}`.
 *
 * The model loads on the first request (so `serve` starts at once), from `modelDir()`,
 * asked again on every request: when the configured folder changes, the next request
 * loads the new model, and the old one closes once its last request is done. Requests
 * queue in the model's worker and run one at a time. Any `model` name is accepted and
 * answered by the one served model (as llama.cpp's server does); answers carry its id.
 *
 * With `adapterDir`, the model is served with that PEFT LoRA adapter applied (merged into a
 * cached copy of the weights: ./served-model.ts); its id is `<model>+<adapter>`.
 *
 * A client that disconnects mid-stream stops receiving; the worker still finishes that
 * generation (it cannot be interrupted), bounded by max_tokens.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { UserError } from '../core/types.js';
import type { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import { completeChat, tokenLogprobs } from './local-chat.js';
import { loadServedModel, servedModelId } from './served-model.js';
import { chunkBody, completionBody, errorBody, parseChatRequest, RequestError, type ChatRequest } from './protocol.js';

export interface OpenAiHandlerOptions {
  /** The model folder to serve, asked on each request (settings may change it). */
  modelDir: () => string;
  /** A PEFT LoRA adapter folder to apply, or null for the base model; asked on each request too. */
  adapterDir?: () => string | null;
  device?: Device;
  /** Where to report a failure that is not the client's fault. */
  log?: (line: string) => void;
}

export type OpenAiRoute = (req: http.IncomingMessage, res: http.ServerResponse, token: string) => Promise<void>;

const MAX_BODY = 8 * 1024 * 1024;

interface Loaded {
  key: string;
  id: string;
  model: Promise<LocalModel>;
  active: number;
  retired: boolean;
}

/** Which model a request gets; loads and retires models as the configured folder changes. */
class ModelSlot {
  private current: Loaded | null = null;
  constructor(private readonly device: Device) {}

  async acquire(dir: string, adapter: string | null): Promise<{ model: LocalModel; id: string; release: () => void }> {
    const resolved = path.resolve(dir);
    const resolvedAdapter = adapter ? path.resolve(adapter) : null;
    const key = `${resolved}\0${resolvedAdapter ?? ''}`;
    if (!this.current || this.current.key !== key) {
      const old = this.current;
      // Loading is started from a microtask so a merge that throws becomes a rejected load.
      const model = Promise.resolve().then(() => loadServedModel(resolved, resolvedAdapter, this.device));
      const entry: Loaded = { key, id: servedModelId(resolved, resolvedAdapter), model, active: 0, retired: false };
      model.catch(() => {
        if (this.current === entry) this.current = null; // a failed load is retried by the next request
      });
      this.current = entry;
      if (old) this.retire(old);
    }
    const entry = this.current;
    entry.active++;
    try {
      const model = await entry.model;
      return { model, id: entry.id, release: () => this.release(entry) };
    } catch (err) {
      this.release(entry);
      throw err;
    }
  }

  private release(entry: Loaded): void {
    entry.active--;
    if (entry.retired && entry.active === 0) void entry.model.then((m) => m.close(), () => {});
  }

  private retire(entry: Loaded): void {
    entry.retired = true;
    if (entry.active === 0) void entry.model.then((m) => m.close(), () => {});
  }

  async close(): Promise<void> {
    const entry = this.current;
    this.current = null;
    if (entry) await entry.model.then((m) => m.close(), () => {});
  }
}

export interface OpenAiHandler {
  route: OpenAiRoute;
  close(): Promise<void>;
}

function sameSecret(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new RequestError(`the request body is larger than ${MAX_BODY / 1024 / 1024} MB`, null, 413));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function createOpenAiHandler(options: OpenAiHandlerOptions): OpenAiHandler {
  const slot = new ModelSlot(options.device ?? 'cpu');
  const log = options.log ?? ((line: string) => process.stderr.write(`hindsight openai: ${line}\n`));
  const adapterDir = () => options.adapterDir?.() || null;
  const modelId = () => servedModelId(options.modelDir(), adapterDir());

  async function chatCompletions(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') throw new RequestError(`send the request as 'Content-Type: application/json' (got '${type || 'none'}')`, null, 415);
    const text = await readBody(req);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new RequestError(`the request body is not valid JSON: ${(err as Error).message}`);
    }
    const request = parseChatRequest(json);
    const { model, id, release } = await slot.acquire(options.modelDir(), adapterDir()).catch((err: unknown) => {
      const message = err instanceof UserError ? err.message : `cannot load the model: ${(err as Error).message}`;
      throw new RequestError(message, null, 503, 'server_error', 'model_not_loaded');
    });
    try {
      if (request.stream) await streamAnswer(model, id, request, req, res);
      else await jsonAnswer(model, id, request, res);
    } finally {
      release();
    }
  }

  async function jsonAnswer(model: LocalModel, id: string, request: ChatRequest, res: http.ServerResponse): Promise<void> {
    const result = await completeChat(model, request);
    sendJson(
      res,
      200,
      completionBody({
        id: `chatcmpl-${crypto.randomUUID()}`,
        created: Math.floor(Date.now() / 1000),
        model: id,
        content: result.content,
        reasoning: result.reasoning,
        toolCalls: result.toolCalls,
        finishReason: result.finishReason,
        usage: { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens, total_tokens: result.promptTokens + result.completionTokens },
        logprobs: request.logprobs ? tokenLogprobs(model, result) : null,
      }),
    );
  }

  async function streamAnswer(model: LocalModel, id: string, request: ChatRequest, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const meta = { id: `chatcmpl-${crypto.randomUUID()}`, created: Math.floor(Date.now() / 1000), model: id };
    const usageField = request.includeUsage ? null : undefined;
    let open = true;
    req.socket.on('close', () => (open = false));
    const send = (body: unknown) => {
      if (open) res.write(`data: ${JSON.stringify(body)}\n\n`);
    };
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    send(chunkBody(meta, { role: 'assistant', content: '' }, null, usageField));
    try {
      const result = await completeChat(model, request, (delta) =>
        send(chunkBody(meta, { ...(delta.reasoning ? { reasoning_content: delta.reasoning } : {}), ...(delta.content ? { content: delta.content } : {}) }, null, usageField)),
      );
      if (result.toolCalls.length) send(chunkBody(meta, { tool_calls: result.toolCalls.map((c, index) => ({ index, ...c })) }, null, usageField));
      send(chunkBody(meta, {}, result.finishReason, usageField));
      if (request.includeUsage) {
        const usage = { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens, total_tokens: result.promptTokens + result.completionTokens };
        send(chunkBody(meta, null, null, usage));
      }
    } catch (err) {
      // The status line is gone; the error travels as an event, as OpenAI's API does.
      const message = err instanceof UserError ? err.message : `generation failed: ${(err as Error).message}`;
      if (!(err instanceof UserError)) log((err as Error).stack ?? String(err));
      send(errorBody(message, 'server_error'));
    }
    if (open) res.write('data: [DONE]\n\n');
    res.end();
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse, token: string): Promise<void> {
    try {
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith('Bearer ') || !sameSecret(auth.slice(7).trim(), token)) {
        throw new RequestError(
          "missing or wrong API key: send 'Authorization: Bearer <token>' with the access token that `hindsight serve` printed",
          null,
          401,
          'invalid_request_error',
          'invalid_api_key',
        );
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const pathname = url.pathname.replace(/\/+$/, '');
      if (pathname === '/v1/models' && req.method === 'GET') {
        const id = modelId();
        return sendJson(res, 200, { object: 'list', data: [{ id, object: 'model', created: 0, owned_by: 'hindsight' }] });
      }
      if (pathname === '/v1/chat/completions') {
        if (req.method !== 'POST') throw new RequestError('use POST for /v1/chat/completions', null, 405);
        return await chatCompletions(req, res);
      }
      throw new RequestError(`unknown endpoint ${req.method} ${pathname}: this server has GET /v1/models and POST /v1/chat/completions`, null, 404, 'invalid_request_error', 'unknown_url');
    } catch (err) {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (err instanceof RequestError) return sendJson(res, err.status, errorBody(err.message, err.type, err.param, err.code));
      if (err instanceof UserError) return sendJson(res, 400, errorBody(err.message, 'invalid_request_error'));
      log((err as Error).stack ?? String(err));
      sendJson(res, 500, errorBody(`internal error: ${(err as Error).message}`, 'server_error'));
    }
  }

  return { route, close: () => slot.close() };
}
