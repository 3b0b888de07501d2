/**
 * The Chat page (docs/design.md §Chat page): the user's message goes to the base model and to
 * a fine-tuned adapter at once, each side continuing its own transcript, with the same
 * sampling settings and seed. Both replies stream as `chat.progress` events, so the desktop
 * app (IPC) and the browser (serve's SSE) see the same thing; Stop ends both after their
 * current token.
 *
 * Models stay loaded between turns, one per (model folder, adapter and its weights, device):
 * the second message does not reload. A turn with another model or adapter closes the ones it
 * no longer needs; ending the chat (Clear) or closing the app closes them all. Each model runs
 * in its own worker thread (src-main/model/local-model.ts), so the two sides generate in
 * parallel; an adapter is fed beside the base weights (src-main/train/adapted-model.ts), both
 * sides in the one form of the weights that fits them together (ChatForm).
 *
 * Capture: a turn is recorded only where live capture runs (`serve`) and is on, through the
 * very hook the /v1 endpoint uses, each side as its own captured session
 * (`capture:chat:<chat id>:base` and `…:adapter`).
 *
 * Saved chats: every turn that ends (done, stopped or failed) is saved in the open database's
 * chats table under the chat's id (store/saved-chats.ts): the user's message, each side's reply
 * with its tokens, tokens per second and finish reason, the system prompt and the settings. The
 * page lists them, reopens one (the next turn continues it), and deletes them.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { CallInput } from '../../src-shared/contract.js';
import type { ChatSide, ChatSideState, ChatState } from '../../src-shared/chat-api.js';
import { appWording, UserError } from '../../src-shared/types.js';
import type { CheckedForm, LocalModel } from '../model/local-model.js';
import { fitInference } from '../model/inference-fit.js';
import { deviceGpuMemory } from '../model/gpu-memory.js';
import type { GpuMemory } from '../../src-shared/memory-verdict.js';
import { defaultPrecision } from '../../src-shared/training.js';
import type { Device } from '../model/ort-session.js';
import type { CaptureHook, CaptureTicket } from '../openai/capture-hook.js';
import { chatPrompt, completeChat, type ChatPrompt, type ChatResult } from '../openai/local-chat.js';
import { RequestError, type ChatRequest } from '../openai/protocol.js';
import { servedModelId } from '../openai/served-model.js';
import { loadAdaptedModel } from '../train/adapted-model.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from '../train/peft.js';
import type { EventHub } from '../workspace/event-hub.js';
import { isModelPath } from '../model/model-path.js';
import type { SavedChats } from '../store/saved-chats.js';
import { savedTurn, systemPromptOf, withTurn } from './chat-saving.js';

/**
 * Loads base + adapter in the weights' form and chat length the service chose for the chat
 * (ChatService `form`), telling `onConversion` how far a first load's conversion of the weights is.
 */
export type ChatModelLoader = (modelDir: string, adapterDir: string | null, device: Device, form: CheckedForm, onConversion: (done: number, total: number) => void) => Promise<LocalModel>;

export interface ChatServiceHooks {
  /** Live capture's hook where `serve` hosts it (it answers null while capture is off); null in the desktop app. */
  capture: () => CaptureHook | null;
  /** Loads base + adapter; the default feeds the adapter beside the base (tests count loads through it). */
  load?: ChatModelLoader;
  /** Where finished turns are saved: the open database's chats (none: nothing is saved). */
  saved?: () => SavedChats;
}

/** Partial replies go out at most this often; a side's start and end go out at once. */
const PROGRESS_INTERVAL_MS = 50;

const IDLE: ChatState = { chatId: null, turn: 0, state: 'idle', sides: [], captured: false, seed: null, saveError: null, weightsNote: null, contextNote: null };

interface CachedModel {
  model: Promise<LocalModel>;
}

/**
 * The form of the weights both sides load in (../model/inference-fit.ts): chosen once for the
 * model, the device and the number of sides, so that the base and the adapter answer alike, and
 * kept while their models stay loaded.
 */
interface ChatForm extends CheckedForm {
  key: string;
  engines: number;
  note: string | null;
}

/** One side of a turn: which model answers, and the transcript it continues. */
interface SidePlan {
  side: ChatSide;
  key: string;
  adapterDir: string | null;
  messages: ChatRequest['messages'];
}

export class ChatService {
  private state: ChatState = IDLE;
  private readonly models = new Map<string, CachedModel>();
  private form: ChatForm | null = null;
  /** A CUDA turn is reading the card's memory before it starts (a second start waits its turn). */
  private readingGpu = false;
  private controller: AbortController | null = null;
  private running: Promise<void> | null = null;
  private progressTimer: NodeJS.Timeout | null = null;
  private turns = 0;

  constructor(
    private readonly events: EventHub,
    private readonly hooks: ChatServiceHooks,
  ) {}

  status(): ChatState {
    return this.state;
  }

  /**
   * Starts a turn and answers at once (on CUDA, once nvidia-smi has told the card's memory); the
   * replies arrive as `chat.progress`.
   */
  async start(input: CallInput<'chatStart'>): Promise<ChatState> {
    if (this.state.state === 'running' || this.readingGpu) throw new UserError('The replies to the last message are still being written: press Stop first.');
    const modelDir = path.resolve(input.modelDir);
    const adapterDir = input.adapterDir === null ? null : path.resolve(input.adapterDir);
    const device: Device = input.device ?? 'cpu';
    checkModelFolder(modelDir);
    if (adapterDir) checkAdapterFolder(adapterDir);
    if (adapterDir && !input.adapter) throw new UserError('A chat with an adapter needs the adapter side\'s messages too.');
    const plans: SidePlan[] = [{ side: 'base', key: modelKey(modelDir, null, device), adapterDir: null, messages: input.base }];
    if (adapterDir) plans.push({ side: 'adapter', key: modelKey(modelDir, adapterDir, device), adapterDir, messages: input.adapter! });
    for (const plan of plans) {
      if (plan.messages.at(-1)?.role !== 'user') throw new UserError(`The ${plan.side} side's messages must end with the user's new message.`);
    }
    // Read only for CUDA, so that on the CPU nothing runs between the checks above and the turn's start.
    let gpu: GpuMemory | null = null;
    if (device === 'cuda') {
      this.readingGpu = true;
      try {
        gpu = await deviceGpuMemory(device);
      } finally {
        this.readingGpu = false;
      }
    }
    const form = this.formFor(modelDir, device, plans, gpu);

    const chatId = input.chatId ?? crypto.randomUUID().slice(0, 8);
    const seed = input.sampling.seed ?? crypto.randomInt(0, 2 ** 32 - 1);
    const requests = plans.map((plan) => chatRequest(plan.messages, input.sampling, seed));
    const tickets = this.beginCapture(chatId, plans, requests);
    const controller = new AbortController();
    this.controller = controller;
    this.state = {
      chatId,
      turn: ++this.turns,
      state: 'running',
      captured: tickets.some((t) => t !== null),
      seed,
      saveError: null,
      weightsNote: form.note,
      contextNote: form.context.note,
      sides: plans.map((p) => ({
        side: p.side, name: p.adapterDir ? path.basename(p.adapterDir) : 'base', text: '', reasoning: '', status: 'loading',
        tokens: null, finishReason: null, tokensPerSecond: null, firstTokenMs: null, error: null, converting: null, context: null,
      })),
    };
    this.emitNow();
    const sides = plans.map((plan, i) =>
      this.runSide(i, plan, requests[i]!, tickets[i] ?? null, { modelDir, device }, controller.signal).catch((err: unknown) =>
        this.updateSide(i, { status: 'failed', error: sideError(err), converting: null }),
      ),
    );
    this.running = Promise.all(sides).then(() => {
      if (this.controller === controller) this.controller = null;
      this.state = { ...this.state, state: controller.signal.aborted ? 'stopped' : 'done' };
      this.save(input, modelDir, adapterDir);
      this.emitNow();
    });
    return this.state;
  }

  /** Stops both replies after their current token; what was written stays (and is recorded when capture is on). */
  stop(): ChatState {
    this.controller?.abort();
    return this.state;
  }

  /** The chat is over: stop, wait for the sides to settle, close every model. */
  async end(): Promise<ChatState> {
    const turns = this.turns;
    this.controller?.abort();
    await this.running;
    // A chat started while this one ended (the page sends its next message without waiting for
    // Clear's answer): it keeps its models and its state.
    if (this.turns !== turns) return this.state;
    this.closeModelsExcept(new Set());
    this.state = { ...IDLE, turn: this.turns };
    this.emitNow();
    return this.state;
  }

  /** The app is closing. */
  async close(): Promise<void> {
    await this.end();
  }

  /** How many models are loaded or loading (for the tests of the cache). */
  get loadedModels(): number {
    return this.models.size;
  }

  private beginCapture(chatId: string, plans: SidePlan[], requests: ChatRequest[]): (CaptureTicket | null)[] {
    const hook = this.hooks.capture();
    if (!hook) return plans.map(() => null);
    try {
      return plans.map((plan, i) => hook.begin({ 'x-session-id': `chat:${chatId}:${plan.side}` }, {}, requests[i]!));
    } catch (err) {
      throw new UserError(`Live capture could not record this message, so it was not sent: ${(err as Error).message}`);
    }
  }

  /**
   * The chat's form for these sides: the one in use while a model of theirs is loaded and no
   * more sides than it was chosen for; else every model closes and the form is chosen anew
   * for all the sides (a UserError when not even int4 fits, before anything loads).
   */
  private formFor(modelDir: string, device: Device, plans: SidePlan[], gpu: GpuMemory | null): ChatForm {
    const key = `${modelDir}\0${device}`;
    const kept = this.form?.key === key && this.form.engines >= plans.length && plans.some((p) => this.models.has(p.key));
    if (kept) {
      this.closeModelsExcept(new Set(plans.map((p) => p.key)));
      return this.form!;
    }
    this.closeModelsExcept(new Set());
    const fit = fitInference(modelDir, { quantize: 'auto', precision: defaultPrecision(device), engines: plans.length, gpu, device });
    this.form = { key, engines: plans.length, quantize: fit.quantize, note: fit.note, context: fit.context };
    return this.form;
  }

  private async runSide(index: number, plan: SidePlan, request: ChatRequest, ticket: CaptureTicket | null, at: { modelDir: string; device: Device }, signal: AbortSignal): Promise<void> {
    const turn = this.state.turn;
    // A model's first load in this form converts its weights (minutes for a 7–8B): the side says how far.
    const converting = (done: number, total: number) => {
      if (this.state.turn === turn) this.updateSide(index, { converting: total > 0 ? done / total : 1 }, done >= total);
    };
    const model = await this.model(plan.key, at.modelDir, plan.adapterDir, at.device, converting);
    if (signal.aborted) return this.updateSide(index, { status: 'stopped', converting: null });
    const prompt = fitPrompt(model, request);
    this.updateSide(index, { status: 'generating', converting: null });
    const ready = performance.now();
    let firstAt: number | null = null;
    const result = await completeChat(
      model,
      request,
      prompt,
      (delta) => {
        firstAt ??= performance.now();
        const side = this.state.sides[index]!;
        this.updateSide(index, { text: side.text + (delta.content ?? ''), reasoning: side.reasoning + (delta.reasoning ?? '') }, false);
      },
      signal,
    );
    const end = performance.now();
    ticket?.commit(capturedReply(result, at.modelDir, plan.adapterDir));
    // The rate of writing: the tokens after the first, over the time since it (the prompt's processing is firstTokenMs).
    const tokensPerSecond = firstAt !== null && result.completionTokens >= 2 && end > firstAt ? (result.completionTokens - 1) / ((end - firstAt) / 1000) : null;
    this.updateSide(index, {
      text: result.content, reasoning: result.reasoning ?? '', tokens: result.completionTokens, status: result.cancelled ? 'stopped' : 'done',
      finishReason: result.cancelled ? null : result.finishReason, tokensPerSecond, firstTokenMs: firstAt === null ? null : Math.round(firstAt - ready),
      context: { used: result.promptTokens + result.completionTokens, limit: model.maxPositions },
    });
  }

  /** Saves the turn that just ended in the open database's chats (a failure to save is the page's to show, not the turn's). */
  private save(input: CallInput<'chatStart'>, modelDir: string, adapterDir: string | null): void {
    const saved = this.hooks.saved?.();
    if (!saved || !this.state.chatId) return;
    try {
      saved.put(withTurn(saved.get(this.state.chatId), this.state, savedTurn(input, this.state), { modelDir, adapterDir, sampling: input.sampling, systemPrompt: systemPromptOf(input) }));
    } catch (err) {
      this.state = { ...this.state, saveError: `This turn could not be saved: ${(err as Error).message}` };
    }
  }

  /** The saved chats, newest first. */
  list() {
    return this.hooks.saved?.().list() ?? [];
  }

  open(id: string) {
    const chat = this.hooks.saved?.().get(id);
    if (!chat) throw new UserError(`There is no saved chat ${id} (deleted?).`);
    return chat;
  }

  delete(id: string): { deleted: boolean } {
    return { deleted: this.hooks.saved?.().delete(id) ?? false };
  }

  /**
   * The cached model for `key`, loading it on first use; a failed load is forgotten, so the next
   * turn retries. Its generation session is built while it loads, so that a first load's
   * conversion of the weights is the side's loading (`onConversion`), not its first token's wait.
   */
  private model(key: string, modelDir: string, adapterDir: string | null, device: Device, onConversion: (done: number, total: number) => void): Promise<LocalModel> {
    const cached = this.models.get(key);
    if (cached) return cached.model;
    // The memory check was the form's, for every side at once (formFor).
    const load = this.hooks.load
      ?? ((dir, adapter, dev, form, converting) => loadAdaptedModel(dir, adapter, { device: dev, ...form, ignoreMemory: true, prepare: ['generate'], onConversion: converting }));
    const form: CheckedForm = { quantize: this.form!.quantize, context: this.form!.context };
    // Started from a microtask, so an adapter that fails its checks becomes a rejected load.
    const entry: CachedModel = { model: Promise.resolve().then(() => load(modelDir, adapterDir, device, form, onConversion)) };
    entry.model.catch(() => {
      if (this.models.get(key) === entry) this.models.delete(key);
    });
    this.models.set(key, entry);
    return entry.model;
  }

  private closeModelsExcept(keep: Set<string>): void {
    for (const [key, entry] of this.models) {
      if (keep.has(key)) continue;
      this.models.delete(key);
      void entry.model.then((m) => m.close(), () => {});
    }
  }

  private updateSide(index: number, patch: Partial<ChatSideState>, now = true): void {
    const sides = this.state.sides.map((s, i) => (i === index ? { ...s, ...patch } : s));
    this.state = { ...this.state, sides };
    if (now) this.emitNow();
    else this.progressTimer ??= setTimeout(() => this.emitNow(), PROGRESS_INTERVAL_MS);
  }

  private emitNow(): void {
    if (this.progressTimer) clearTimeout(this.progressTimer);
    this.progressTimer = null;
    this.events.emit('chat.progress', this.state);
  }
}

function checkModelFolder(dir: string): void {
  if (!isModelPath(dir)) {
    throw new UserError(fs.existsSync(dir) ? `${dir} is not a model folder: it has no config.json.` : `The model folder ${dir} does not exist.`);
  }
}

function checkAdapterFolder(dir: string): void {
  if (!fs.existsSync(dir)) throw new UserError(`The adapter folder ${dir} does not exist (moved or deleted?); choose another adapter or none.`);
  for (const file of [ADAPTER_CONFIG, ADAPTER_WEIGHTS]) {
    if (!fs.existsSync(path.join(dir, file))) throw new UserError(`${dir} is not a LoRA adapter folder: it has no ${file}.`);
  }
}

/** A model's cache key: an adapter retrained in the same folder has new weights, so it is another model. */
function modelKey(modelDir: string, adapterDir: string | null, device: Device): string {
  if (!adapterDir) return `${modelDir}\0\0${device}`;
  const weights = fs.statSync(path.join(adapterDir, ADAPTER_WEIGHTS));
  return `${modelDir}\0${adapterDir}@${weights.size}:${weights.mtimeMs}\0${device}`;
}

function chatRequest(messages: ChatRequest['messages'], sampling: CallInput<'chatStart'>['sampling'], seed: number): ChatRequest {
  return {
    model: null, messages, temperature: sampling.temperature, topP: sampling.topP, maxTokens: sampling.maxTokens, seed,
    n: 1, stop: [], stream: true, includeUsage: false, logprobs: false,
  };
}

/** A side's reply as live capture records it: the same shape as a /v1 reply of the local model. */
function capturedReply(result: ChatResult, modelDir: string, adapterDir: string | null) {
  return {
    completionId: null,
    content: result.content,
    ...(result.reasoning ? { reasoning: result.reasoning } : {}),
    toolCalls: result.toolCalls,
    finishReason: result.finishReason,
    servedBy: 'local' as const,
    model: servedModelId(modelDir, adapterDir),
    modelDir,
    rollout: result.rollout ? { promptIds: result.promptIds, ...result.rollout } : null,
  };
}

/** The rendered prompt; a conversation too long for the model says so in the page's words. */
function fitPrompt(model: LocalModel, request: ChatRequest): ChatPrompt {
  try {
    return chatPrompt(model, request);
  } catch (err) {
    if (!(err instanceof RequestError && err.code === 'context_length_exceeded')) throw err;
    const within = model.contextNote ? `the ${model.maxPositions} tokens this machine's memory holds for it` : `the model's ${model.maxPositions} positions`;
    throw new UserError(`This conversation no longer fits ${within}: press Clear to start a new chat.`);
  }
}

/** A side's failure in the page's words (a CUDA problem names the Device field, docs/design.md §Surfaces). */
function sideError(err: unknown): string {
  return appWording(err);
}
