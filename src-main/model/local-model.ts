/**
 * The user's local model, for the rest of the app: ONNX Runtime runs in a worker thread
 * (./worker.ts), so the caller's event loop never blocks. The tokenizer and chat template
 * also live here, on the caller's side: they are fast and synchronous.
 *
 *     const model = await LocalModel.load(dir, { device: 'cpu' });
 *     const [lp] = await model.score([model.tokenizer.encodeResponse(messages, reply)]);
 *     const out = await model.generate('Once upon a time', { maxNewTokens: 50, chatTemplate: false });
 *     console.log(out.text, out.executionProvider);
 *     await model.close();
 *
 * Worker start-up: from TypeScript sources the worker is started through worker-boot.mjs,
 * which registers tsx (vitest and tsx do not pass their loaders to workers reliably); a
 * compiled build has worker.js beside this file and starts it directly.
 */
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { UserError } from '../core/types.js';
import type { ModelConfig } from './checkpoint.js';
import type { EngineOptions, GenerateOptions, GeneratedTokens, ScoreOptions, ScoreRow } from './engine.js';
import type { Device } from './ort-session.js';
import { ChatTokenizer, type ChatMessage, type TemplateOptions } from './tokenizer.js';
import { parseReply, type ParsedReply } from './chat-output.js';

export interface LoadOptions extends EngineOptions {
  /** Build these sessions during load, so load fails early (e.g. on CUDA) and timing is clean. */
  prepare?: ('score' | 'generate')[];
}

export interface GenerateRequest extends GenerateOptions {
  /** Render a string prompt (or messages) through the chat template. Default true for messages, false for strings. */
  chatTemplate?: boolean;
  /** Template options (tools, enable_thinking …) when the chat template is used. */
  template?: Omit<TemplateOptions, 'addGenerationPrompt'>;
  /** Called for each token as it is generated. */
  onToken?: (token: number, logprob: number) => void;
}

export interface GenerateResult extends GeneratedTokens, ParsedReply {
  promptTokens: number;
  executionProvider: Device;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  onEvent?: (msg: { token: number; logprob: number }) => void;
}

function reviveError(e: { name: string; message: string; stack?: string }): Error {
  const err = e.name === 'UserError' ? new UserError(e.message) : new Error(e.message);
  if (e.name !== 'UserError' && e.stack) err.stack = e.stack;
  return err;
}

function workerEntry(): { file: URL; workerData: Record<string, unknown> } {
  const compiled = new URL('./worker.js', import.meta.url);
  if (fs.existsSync(fileURLToPath(compiled))) return { file: compiled, workerData: {} };
  const source = new URL('./worker.ts', import.meta.url);
  return { file: new URL('./worker-boot.mjs', import.meta.url), workerData: { entry: pathToFileURL(fileURLToPath(source)).href } };
}

/**
 * Loads onnxruntime-node's native binding on this (long-lived) thread once. The binding is
 * not context-aware: if the first thread that loaded it exits, later workers fail with
 * "Module did not self-register". Holding it here keeps it registered for every worker.
 */
let pinned: Promise<unknown> | undefined;
function pinNativeBinding(): Promise<unknown> {
  return (pinned ??= import('onnxruntime-node'));
}

export class LocalModel {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  private ep?: Device;

  private constructor(
    readonly dir: string,
    readonly config: ModelConfig,
    readonly tokenizer: ChatTokenizer,
    private readonly worker: Worker,
    readonly device: Device,
  ) {
    worker.on('message', (msg: { id?: number; result?: unknown; error?: never; event?: string; token: number; logprob: number }) => {
      const p = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
      if (!p) return;
      if (msg.event) return p.onEvent?.(msg);
      this.pending.delete(msg.id!);
      if (msg.error) p.reject(reviveError(msg.error));
      else p.resolve(msg.result);
    });
    worker.on('error', (err) => this.failAll(err));
    worker.on('exit', (code) => {
      if (!this.closed) this.failAll(new Error(`the model worker exited unexpectedly (code ${code})`));
    });
  }

  /** Opens the checkpoint in a new worker; rejects with a UserError on bad input. */
  static async load(dir: string, options: LoadOptions = {}): Promise<LocalModel> {
    const tokenizer = ChatTokenizer.load(dir);
    await pinNativeBinding();
    const { prepare, ...engineOptions } = options;
    const entry = workerEntry();
    const worker = new Worker(entry.file, { workerData: { ...entry.workerData, dir, options: engineOptions } });
    const ready = await new Promise<{ config: ModelConfig }>((resolve, reject) => {
      const onMessage = (msg: { ready?: { config: ModelConfig }; fatal?: { name: string; message: string } }) => {
        worker.off('error', onError);
        if (msg.ready) resolve(msg.ready);
        else reject(reviveError(msg.fatal!));
      };
      const onError = (err: Error) => reject(err);
      worker.once('message', onMessage);
      worker.once('error', onError);
    }).catch(async (err) => {
      await worker.terminate();
      throw err;
    });
    const model = new LocalModel(dir, ready.config, tokenizer, worker, options.device ?? 'cpu');
    if (prepare?.length) {
      try {
        model.ep = (await model.call('prepare', [prepare])) as Device;
      } catch (err) {
        await model.close();
        throw err;
      }
    }
    return model;
  }

  /** The EP the sessions run on: known once a session exists (after `prepare` or the first call). */
  get executionProvider(): Device | undefined {
    return this.ep;
  }

  private call(method: string, args: unknown[], onEvent?: Pending['onEvent']): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('the model is closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ id, method, args });
    });
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** Log-probs of each row's response tokens (fp32), in input order. */
  async score(rows: ScoreRow[], options: ScoreOptions = {}): Promise<number[][]> {
    const out = (await this.call('score', [rows, options])) as { logprobs: number[][]; executionProvider: Device };
    this.ep = out.executionProvider;
    return out.logprobs;
  }

  /** The same log-probs through the KV-cache path, one token per step (a reference; slow). */
  async scoreIncremental(row: ScoreRow, prefill?: number): Promise<number[]> {
    return (await this.call('scoreIncremental', [row, prefill])) as number[];
  }

  /** Prompt ids for a string, messages, or ids as they are. */
  promptIds(prompt: string | ChatMessage[] | number[], request: Pick<GenerateRequest, 'chatTemplate' | 'template'> = {}): number[] {
    if (Array.isArray(prompt) && (prompt.length === 0 || typeof prompt[0] === 'number')) return prompt as number[];
    const messages = typeof prompt === 'string' ? [{ role: 'user', content: prompt }] : (prompt as ChatMessage[]);
    const useTemplate = request.chatTemplate ?? typeof prompt !== 'string';
    if (useTemplate) return this.tokenizer.encodeChat(messages, { ...request.template, addGenerationPrompt: true });
    // A raw string: encoded as a model would see the start of a document (BOS where the tokenizer adds it).
    return this.tokenizer.encode(prompt as string, true);
  }

  async generate(prompt: string | ChatMessage[] | number[], request: GenerateRequest = {}): Promise<GenerateResult> {
    const { chatTemplate, template, onToken, ...options } = request;
    const ids = this.promptIds(prompt, { chatTemplate, template });
    const out = (await this.call('generate', [ids, options, !!onToken], onToken && ((m) => onToken(m.token, m.logprob)))) as GeneratedTokens & { executionProvider: Device };
    this.ep = out.executionProvider;
    const reply = parseReply(out.tokens.filter((t) => !this.tokenizer.eosTokenIds.includes(t)), {
      thinkStartId: this.tokenizer.thinkStartId,
      thinkEndId: this.tokenizer.thinkEndId,
      decode: (t) => this.tokenizer.decode(t),
    });
    // A stop string cut the text: parse what was kept, not the tokens beyond it.
    const parsed = out.finishReason === 'stop' ? parseReply([], { decode: () => out.text }) : reply;
    return { ...out, ...parsed, promptTokens: ids.length, executionProvider: out.executionProvider };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.call('close', []);
    } catch {
      // closing anyway
    }
    this.closed = true;
    await this.worker.terminate();
  }
}
