/**
 * Hindsight's OpenAI-compatible endpoint: point any OpenAI client (or Hindsight's own
 * `openai` judge backend) at the local model.
 *
 *   GET  /v1/models             the served model
 *   POST /v1/chat/completions   non-streaming JSON, or (stream: true) server-sent events in
 *                               OpenAI's chunk format ending with `data: [DONE]`
 *   POST /v1/feedback           (serve, with `feedback`) a thumbs-up or -down on a captured reply,
 *                               named by its completion id (docs/design.md §Feedback endpoint)
 *
 * Auth: `Authorization: Bearer <key>`, checked by the caller's ApiKeyCheck: under `hindsight
 * serve`, the stable API key of capture clients (Settings → Live capture, `<db>.api-key`) or the
 * launch's access token; on the standalone server, its token. Errors use OpenAI's body
 * `{error:{message,type,param,code}}`, one line.
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
 * The model's context bounds every answer (../model/context-limit.ts): a prompt with no room
 * left for a reply gets 400 `context_length_exceeded` (as OpenAI answers), and max_tokens is
 * capped to the positions the prompt leaves.
 *
 * A client that disconnects mid-stream stops receiving; the worker still finishes that
 * generation (it cannot be interrupted), bounded by that capped max_tokens.
 *
 * Proxy mode and live capture (issue 7, src-main/capture/): with `upstream()` set, requests
 * are forwarded to that OpenAI-compatible server instead (./upstream.ts); with `capture`,
 * each request is handed to the capture hook (./capture-hook.ts) once nothing can refuse it any
 * more (a refused request is never recorded), and its reply is committed to the capture log
 * (fsync) BEFORE the response finishes — the JSON body is sent, or the stream's `[DONE]`
 * written, only after that. Replies of the local model carry their rollout (prompt ids,
 * generated ids, log-probs).
 *
 * Swapping the served adapter: `preload(dir, adapter)` loads the new model beside the
 * current one; the first request that asks for it switches at once, and the old model
 * closes when its last request is done. So every reply comes from one fully loaded model:
 * the one current when the request arrived. A request that finds no loaded model (the first
 * load, a changed model folder) waits up to `loadWaitMs` for it, then gets a 503 with
 * `Retry-After`.
 */
import crypto from 'node:crypto';
import type http from 'node:http';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { bearerOf, type ApiKeyCheck } from '../http/access.js';
import { BodyTooLargeError, mediaType, readBody, refuseOversizedBody, sendJson } from '../http/json.js';
import type { CheckedForm, LocalModel } from '../model/local-model.js';
import { conversionLines } from '../model/weight-file.js';
import type { Device } from '../model/ort-session.js';
import { chatPrompt, completeChat, completeChats, tokenLogprobs, type ChatPrompt, type ChatResult, type StreamDelta } from './local-chat.js';
import { loadServedModel, servedModelId } from './served-model.js';
import type { CaptureHook, CaptureTicket, FeedbackHandler } from './capture-hook.js';
import { chunkBody, completionBody, errorBody, parseChatRequest, RequestError, type ChatRequest } from './protocol.js';
import { forwardChat, type UpstreamTarget } from './upstream.js';

export interface OpenAiHandlerOptions {
  /** The model folder to serve, asked on each request (settings may change it). */
  modelDir: () => string;
  /** A PEFT LoRA adapter folder to apply, or null for the base model; asked on each request too. */
  adapterDir?: () => string | null;
  device?: Device;
  /** Where to report a failure that is not the client's fault. */
  log?: (line: string) => void;
  /** Proxy mode: the upstream server to forward to, asked on each request (null: the local model answers). */
  upstream?: () => UpstreamTarget | null;
  /** Live capture of every exchange. */
  capture?: CaptureHook;
  /** `POST /v1/feedback`: a chat client's thumbs-up or -down on a captured reply (serve only). */
  feedback?: FeedbackHandler;
  /** How long a request waits for a model that is still loading before a 503 (default 60 s). */
  loadWaitMs?: number;
}

export type OpenAiRoute = (req: http.IncomingMessage, res: http.ServerResponse, check: ApiKeyCheck) => Promise<void>;

const MAX_BODY = 8 * 1024 * 1024;

interface Loaded {
  key: string;
  id: string;
  /** The model folder, resolved. */
  dir: string;
  model: Promise<LocalModel>;
  active: number;
  retired: boolean;
}

/** Which model a request gets; loads and retires models as the configured folder changes. */
class ModelSlot {
  private current: Loaded | null = null;
  /** A model loaded ahead of a swap (preload), promoted by the first request that asks for it. */
  private staged: Loaded | null = null;
  constructor(
    private readonly device: Device,
    /** Where a load that had to leave fp32 says so (../model/inference-fit.ts). */
    private readonly log: (line: string) => void,
  ) {}

  /** `form`: the weights' form and chat length to load in without a memory check (a model beside the current one that shares its weights). */
  private entry(dir: string, adapter: string | null, form?: CheckedForm): Loaded {
    const resolved = path.resolve(dir);
    const resolvedAdapter = adapter ? path.resolve(adapter) : null;
    // Loading is started from a microtask so an adapter that fails its checks becomes a rejected load.
    const id = servedModelId(resolved, resolvedAdapter);
    // A first load converts the weights (minutes for a 7–8B model) while the first request waits: the log says how far.
    const converting = conversionLines((line) => this.log(`${id}: ${line}`));
    const model = Promise.resolve().then(() => loadServedModel(resolved, resolvedAdapter, this.device, form, converting));
    const entry: Loaded = { key: slotKey(dir, adapter), id, dir: resolved, model, active: 0, retired: false };
    // What its own memory check chose (a model loaded in the current one's form said it then).
    if (!form) model.then((m) => [m.weightsNote, m.contextNote].forEach((note) => note && this.log(`${id}: ${note}`)), () => {});
    model.catch(() => {
      // A failed load is retried by the next request.
      if (this.current === entry) this.current = null;
      if (this.staged === entry) this.staged = null;
    });
    return entry;
  }

  /**
   * Loads dir + adapter beside the current model; resolves once it is ready to answer. The same
   * model with another adapter (live capture's swap to a new fine-tune) loads in the current
   * one's form of the weights, which both read from one mapped file: checked again, the memory
   * the current one holds would count twice, and could put the new adapter on a coarser form.
   */
  async prepare(dir: string, adapter: string | null): Promise<void> {
    const key = slotKey(dir, adapter);
    if (this.current?.key === key) return void (await this.current.model);
    if (this.staged?.key !== key) {
      const form = await this.currentForm(dir);
      // Another prepare of this key may have staged it while the current model was awaited.
      if (this.staged?.key !== key) {
        if (this.staged) this.retire(this.staged);
        this.staged = this.entry(dir, adapter, form);
      }
    }
    await this.staged!.model;
  }

  /** The current model's form of the weights, where it is `dir` and loaded. */
  private async currentForm(dir: string): Promise<CheckedForm | undefined> {
    const current = this.current;
    if (current?.dir !== path.resolve(dir)) return undefined;
    return current.model.then((m) => m.checkedForm, () => undefined);
  }

  async acquire(dir: string, adapter: string | null, waitMs: number): Promise<{ model: LocalModel; id: string; release: () => void }> {
    const key = slotKey(dir, adapter);
    if (!this.current || this.current.key !== key) {
      const old = this.current;
      if (this.staged?.key === key) {
        this.current = this.staged;
        this.staged = null;
      } else this.current = this.entry(dir, adapter);
      if (old) this.retire(old);
    }
    const entry = this.current;
    entry.active++;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const seconds = Math.max(1, Math.ceil(waitMs / 1000));
        reject(new RequestError(`the model ${entry.id} is still loading; retry in ${seconds} s`, null, 503, 'server_error', 'model_loading', seconds));
      }, waitMs);
    });
    try {
      const model = await Promise.race([entry.model, timeout]);
      return { model, id: entry.id, release: () => this.release(entry) };
    } catch (err) {
      this.release(entry);
      throw err;
    } finally {
      clearTimeout(timer);
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
    const entries = [this.current, this.staged];
    this.current = this.staged = null;
    for (const entry of entries) if (entry) await entry.model.then((m) => m.close(), () => {});
  }
}

/** What every answer of one completion carries: its id, time and model. */
interface AnswerMeta {
  id: string;
  created: number;
  model: string;
}

/** A JSON request body, or a RequestError (415 for another media type, 400 for bad JSON). */
async function readJsonBody(req: http.IncomingMessage): Promise<unknown> {
  const type = mediaType(req);
  if (type !== 'application/json') throw new RequestError(`send the request as 'Content-Type: application/json' (got '${type || 'none'}')`, null, 415);
  const text = await readBody(req, MAX_BODY);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new RequestError(`the request body is not valid JSON: ${(err as Error).message}`);
  }
}

function slotKey(dir: string, adapter: string | null): string {
  return `${path.resolve(dir)}\0${adapter ? path.resolve(adapter) : ''}`;
}

export interface OpenAiHandler {
  route: OpenAiRoute;
  /** Loads a model (and adapter) ahead of serving it, so a swap never makes requests wait. */
  preload(modelDir: string, adapterDir: string | null): Promise<void>;
  close(): Promise<void>;
}

export function createOpenAiHandler(options: OpenAiHandlerOptions): OpenAiHandler {
  const log = options.log ?? ((line: string) => process.stderr.write(`hindsight openai: ${line}\n`));
  const slot = new ModelSlot(options.device ?? 'cpu', log);
  const adapterDir = () => options.adapterDir?.() || null;
  const modelId = () => servedModelId(options.modelDir(), adapterDir());

  async function chatCompletions(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const json = await readJsonBody(req);
    const request = parseChatRequest(json);
    const upstream = options.upstream?.() ?? null;
    if (upstream) {
      // Recorded once the upstream accepts it: a request it refuses leaves nothing.
      const ticket = options.capture?.begin(req.headers, json as Record<string, unknown>, request, { defer: true }) ?? null;
      return forwardChat(upstream, json as Record<string, unknown>, req, res, (reply) =>
        ticket?.commit({ ...reply, servedBy: 'upstream', modelDir: null, rollout: null }),
      () => ticket?.start());
    }
    const modelDir = options.modelDir();
    const { model, id, release } = await slot.acquire(modelDir, adapterDir(), options.loadWaitMs ?? 60_000).catch((err: unknown) => {
      if (err instanceof RequestError) throw err;
      const message = err instanceof UserError ? err.message : `cannot load the model: ${(err as Error).message}`;
      throw new RequestError(message, null, 503, 'server_error', 'model_not_loaded');
    });
    let prompt: ChatPrompt;
    let ticket: CaptureTicket | null;
    try {
      // Everything a request can be refused for comes first (a prompt too long for the model: 400
      // before any byte is sent); only then is it captured, so a refused request leaves no record.
      prompt = chatPrompt(model, request);
      ticket = options.capture?.begin(req.headers, json as Record<string, unknown>, request) ?? null;
    } catch (err) {
      release();
      throw err;
    }
    const completionId = `chatcmpl-${crypto.randomUUID()}`;
    const commit = ticket
      ? (result: ChatResult) =>
          ticket.commit({
            completionId,
            content: result.content,
            ...(result.reasoning ? { reasoning: result.reasoning } : {}),
            toolCalls: result.toolCalls,
            finishReason: result.finishReason,
            servedBy: 'local',
            model: id,
            modelDir: path.resolve(modelDir),
            rollout: result.rollout ? { promptIds: result.promptIds, ...result.rollout } : null,
          })
      : null;
    try {
      const meta = { id: completionId, created: Math.floor(Date.now() / 1000), model: id };
      if (request.stream) await streamAnswer(model, meta, request, prompt, req, res, commit);
      else await jsonAnswer(model, meta, request, prompt, res, commit);
    } finally {
      release();
    }
  }

  async function jsonAnswer(model: LocalModel, meta: AnswerMeta, request: ChatRequest, prompt: ChatPrompt, res: http.ServerResponse, commit: ((r: ChatResult) => void) | null): Promise<void> {
    const results = request.n > 1 ? await completeChats(model, request, prompt) : [await completeChat(model, request, prompt)];
    // Live capture records one reply per exchange: the first choice.
    commit?.(results[0]!);
    const completionTokens = results.reduce((a, r) => a + r.completionTokens, 0);
    sendJson(
      res,
      200,
      completionBody({
        ...meta,
        choices: results.map((r) => ({
          content: r.content,
          reasoning: r.reasoning,
          toolCalls: r.toolCalls,
          finishReason: r.finishReason,
          logprobs: request.logprobs ? tokenLogprobs(model, r) : null,
        })),
        usage: { prompt_tokens: prompt.ids.length, completion_tokens: completionTokens, total_tokens: prompt.ids.length + completionTokens },
      }),
    );
  }

  async function streamAnswer(
    model: LocalModel,
    meta: AnswerMeta,
    request: ChatRequest,
    prompt: ChatPrompt,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    commit: ((r: ChatResult) => void) | null,
  ): Promise<void> {
    const usageField = request.includeUsage ? null : undefined;
    let open = true;
    // Removed at the end: a keep-alive socket carries many requests.
    const onClose = () => (open = false);
    req.socket.on('close', onClose);
    const send = (body: unknown) => {
      if (open) res.write(`data: ${JSON.stringify(body)}\n\n`);
    };
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    // Each choice opens with its role; with n > 1 the choices' chunks interleave, each naming its index.
    for (let choice = 0; choice < request.n; choice++) send(chunkBody(meta, { role: 'assistant', content: '' }, null, usageField, choice));
    try {
      const onDelta = (choice: number, delta: StreamDelta) =>
        send(chunkBody(meta, { ...(delta.reasoning ? { reasoning_content: delta.reasoning } : {}), ...(delta.content ? { content: delta.content } : {}) }, null, usageField, choice));
      const results = request.n > 1
        ? await completeChats(model, request, prompt, onDelta)
        : [await completeChat(model, request, prompt, (delta) => onDelta(0, delta))];
      results.forEach((result, choice) => {
        if (result.toolCalls.length) send(chunkBody(meta, { tool_calls: result.toolCalls.map((c, index) => ({ index, ...c })) }, null, usageField, choice));
        send(chunkBody(meta, {}, result.finishReason, usageField, choice));
      });
      if (request.includeUsage) {
        const completionTokens = results.reduce((a, r) => a + r.completionTokens, 0);
        send(chunkBody(meta, null, null, { prompt_tokens: prompt.ids.length, completion_tokens: completionTokens, total_tokens: prompt.ids.length + completionTokens }));
      }
      // Before [DONE]: a client that saw the end knows the exchange is recorded (the first choice, as without streaming).
      commit?.(results[0]!);
    } catch (err) {
      // The status line is gone; the error travels as an event, as OpenAI's API does.
      const message = err instanceof UserError ? err.message : `generation failed: ${(err as Error).message}`;
      if (!(err instanceof UserError)) log((err as Error).stack ?? String(err));
      send(errorBody(message, 'server_error'));
    }
    if (open) res.write('data: [DONE]\n\n');
    req.socket.off('close', onClose);
    res.end();
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse, check: ApiKeyCheck): Promise<void> {
    try {
      const refused = check(bearerOf(req));
      if (refused) throw new RequestError(refused.message, null, refused.status, refused.status === 401 ? 'invalid_request_error' : 'server_error', refused.code);
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
      if (pathname === '/v1/feedback' && options.feedback) {
        if (req.method !== 'POST') throw new RequestError('use POST for /v1/feedback', null, 405);
        const answer = options.feedback(await readJsonBody(req));
        return sendJson(res, answer.status, answer.body);
      }
      const feedback = options.feedback ? ', POST /v1/feedback' : '';
      throw new RequestError(`unknown endpoint ${req.method} ${pathname}: this server has GET /v1/models, POST /v1/chat/completions${feedback}`, null, 404, 'invalid_request_error', 'unknown_url');
    } catch (err) {
      if (res.headersSent) return void res.end();
      if (err instanceof BodyTooLargeError) return refuseOversizedBody(res, errorBody(err.message, 'invalid_request_error'));
      if (err instanceof RequestError) {
        if (err.retryAfter !== undefined) res.setHeader('Retry-After', String(err.retryAfter));
        return sendJson(res, err.status, errorBody(err.message, err.type, err.param, err.code));
      }
      if (err instanceof UserError) return sendJson(res, 400, errorBody(err.message, 'invalid_request_error'));
      log((err as Error).stack ?? String(err));
      sendJson(res, 500, errorBody(`internal error: ${(err as Error).message}`, 'server_error'));
    }
  }

  return { route, preload: (dir, adapter) => slot.prepare(dir, adapter), close: () => slot.close() };
}
