/**
 * The user's local model, for the rest of the app: ONNX Runtime runs in a worker thread
 * (./model-worker.ts), so the caller's event loop never blocks. The tokenizer and chat template
 * also live here, on the caller's side: they are fast and synchronous.
 *
 *     const model = await LocalModel.load(dir, { device: 'cpu' });
 *     const [lp] = await model.score([model.tokenizer.encodeResponse(messages, reply)]);
 *     const out = await model.generate('Once upon a time', { maxNewTokens: 50, chatTemplate: false });
 *     console.log(out.text, out.executionProvider);
 *     await model.close();
 *
 * The worker's start-up and request/response mechanics are shared with the training step's
 * worker: ./worker-host.ts.
 */
import type { ModelConfig } from './hf-checkpoint.js';
import type { EngineOptions, GenerateOptions, GeneratedTokens, ScoreOptions, ScoreRow } from './inference-engine.js';
import type { Quantize } from './quantize.js';
import { fitInference, type ChatContext, type FitRequest, type LoadQuantize } from './inference-fit.js';
import { deviceGpuMemory } from './gpu-memory.js';
import { driftTextIds, type QuantDrift } from './quant-drift.js';
import type { Device } from './ort-session.js';
import { defaultPrecision, type Precision } from '../../src-shared/training.js';
import { ChatTokenizer, type ChatMessage, type TemplateOptions } from './tokenizer.js';
import { parseCutReply, parseReply, replyTokens, type ParsedReply } from './chat-output.js';
import { DEFAULT_MAX_NEW_TOKENS, replyBudget } from './context-limit.js';
import { startWorker, waitUntilReady, WorkerClient, type WorkerEvent } from './worker-host.js';

export interface LoadOptions extends Omit<EngineOptions, 'quantize' | 'cachePrecision'>, Pick<FitRequest, 'ignoreMemory' | 'engines' | 'reader'> {
  /** Build these sessions during load, so load fails early (e.g. on CUDA) and timing is clean. */
  prepare?: ('score' | 'generate')[];
  /** The weights' form; default 'auto': the most exact that fits this machine's memory (./inference-fit.ts). */
  quantize?: LoadQuantize;
  /**
   * The longest chat and the batches the caller's own memory check found room for, where it loads
   * a form it chose itself with `ignoreMemory` (the Chat page's form for both sides, a replay's, the
   * served model's for its swap to a new adapter); default: this load's own check's (with
   * `ignoreMemory`, the positions and any batch).
   */
  context?: ChatContext;
  /**
   * Told as a weights file is written for this model (bytes done, of the total): its first load in
   * a form converts every weight, minutes for a 7–8B model; a later load maps the converted file
   * (docs/design.md §Graph cache) and says nothing. With `prepare`, during the load.
   */
  onConversion?: (done: number, total: number) => void;
}

/** A loaded model's form as its memory check chose it: what a load of the same weights beside it takes (LoadOptions.quantize and .context). */
export interface CheckedForm {
  quantize: Quantize;
  context: ChatContext;
}

export interface GenerateRequest extends Omit<GenerateOptions, 'decodeText'> {
  /** Render a string prompt (or messages) through the chat template. Default true for messages, false for strings. */
  chatTemplate?: boolean;
  /** Template options (tools, enable_thinking …) when the chat template is used. */
  template?: Omit<TemplateOptions, 'addGenerationPrompt'>;
  /** Called for each token as it is generated. */
  onToken?: (token: number, logprob: number) => void;
  /** Aborting stops generation after the token in progress; the result so far comes back with finish reason 'cancelled'. */
  signal?: AbortSignal;
}

/** A batch's options: a generation's, but per sequence (no one seed, no stop signal); `onToken` names the sequence. */
export interface BatchGenerateRequest extends Omit<GenerateRequest, 'seed' | 'onToken' | 'signal'> {
  onToken?: (sequence: number, token: number, logprob: number) => void;
}

export interface GenerateResult extends GeneratedTokens, ParsedReply {
  promptTokens: number;
  /** The budget generation ran with: the one asked for, capped to the positions the prompt left. */
  maxNewTokens: number;
  executionProvider: Device;
}

/** One prompt of a batch, with one seed per sequence to generate from it. */
export interface BatchRequestPrompt {
  prompt: string | ChatMessage[] | number[];
  seeds: number[];
  /** This prompt's template options (its own tools), in place of the request's. */
  template?: Omit<TemplateOptions, 'addGenerationPrompt'>;
}

/**
 * A stop flag the worker reads between tokens (a SharedArrayBuffer is shared, not copied, when
 * posted), raised when `signal` aborts.
 */
function stopFlagFor(signal: AbortSignal): { flag: Int32Array; dispose: () => void } {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const raise = () => Atomics.store(flag, 0, 1);
  if (signal.aborted) raise();
  signal.addEventListener('abort', raise);
  return { flag, dispose: () => signal.removeEventListener('abort', raise) };
}

/** Whether a request's template options offer the model tools. */
const offersTools = (template: { tools?: unknown[] } | undefined): boolean => (template?.tools?.length ?? 0) > 0;

export class LocalModel {
  private ep?: Device;

  private constructor(
    readonly dir: string,
    readonly config: ModelConfig,
    readonly tokenizer: ChatTokenizer,
    private readonly worker: WorkerClient,
    readonly device: Device,
    /** Whether score and generate run on quantised weights (docs/design.md §Quantisation). */
    readonly quantize: Quantize,
    /** The base's arithmetic where the weights are not quantised (docs/design.md §Precision). */
    readonly precision: Precision,
    /** Why `quantize` is not fp32 where the memory check chose it (./inference-fit.ts); null otherwise. */
    readonly weightsNote: string | null,
    /** The memory check's longest chat and the batches that fit (InferenceFit.context). */
    private readonly context: ChatContext,
  ) {}

  /**
   * Opens the checkpoint in a new worker; rejects with a UserError on bad input, and when the
   * weights in the asked form (or, by default, in any form) do not fit this machine's memory.
   */
  static async load(dir: string, options: LoadOptions = {}): Promise<LocalModel> {
    const tokenizer = ChatTokenizer.load(dir);
    const { prepare, ignoreMemory, engines, reader, context, onConversion, ...engineOptions } = options;
    const device = options.device ?? 'cpu';
    const precision = options.precision ?? defaultPrecision(device);
    const fit = fitInference(dir, { quantize: options.quantize ?? 'auto', precision, engines, lora: options.lora, gpu: await deviceGpuMemory(device), device, ignoreMemory, reader });
    const chats = context ?? fit.context;
    // The worker gets the end-of-sequence ids, so it loads a second tokenizer only for stop strings.
    const worker = await startWorker(
      { compiled: new URL('./model-worker.js', import.meta.url), source: new URL('./model-worker.ts', import.meta.url) },
      { dir, options: { ...engineOptions, quantize: fit.quantize, cachePrecision: chats.cachePrecision, eosTokenIds: tokenizer.eosTokenIds } },
    );
    const ready = await waitUntilReady<{ config: ModelConfig }>(worker);
    const client = new WorkerClient(worker, { subject: 'the model', worker: 'the model worker' }, (msg) => {
      if (msg.event === 'convert') onConversion?.(msg.done as number, msg.total as number);
    });
    const model = new LocalModel(dir, ready.config, tokenizer, client, device, fit.quantize, precision, fit.note, chats);
    if (prepare?.length) {
      try {
        model.ep = await model.worker.call<Device>('prepare', [prepare]);
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

  /**
   * The tokens prompt and reply together fit in: the model's positions (config.json's
   * max_position_embeddings), or fewer where this machine's memory holds only a shorter chat's
   * decode cache (./inference-fit.ts; {@link contextNote} says why). Every prompt is held to it:
   * the Chat page, `/v1` (context_length_exceeded), the judge, replays, `generate`.
   */
  get maxPositions(): number {
    return Math.min(this.config.maxPositionEmbeddings, this.context.tokens);
  }

  /** Why {@link maxPositions} is below the model's positions (the memory there is); null where it is not. */
  get contextNote(): string | null {
    return this.context.note;
  }

  /** This model's form, for a load of the same weights beside it (the served model's swap to a new adapter). */
  get checkedForm(): CheckedForm {
    return { quantize: this.quantize, context: this.context };
  }

  /** Log-probs of each row's response tokens (fp32), in input order. */
  async score(rows: ScoreRow[], options: ScoreOptions = {}): Promise<number[][]> {
    const out = await this.worker.call<{ logprobs: number[][]; executionProvider: Device }>('score', [rows, options]);
    this.ep = out.executionProvider;
    return out.logprobs;
  }

  /** max/mean |Δ log-prob| from fp32 on a fixed text with this model's quantisation; undefined without. */
  async quantizationDrift(): Promise<QuantDrift | undefined> {
    if (this.quantize === 'none') return undefined;
    return (await this.worker.call<QuantDrift | null>('quantizationDrift', [driftTextIds(this.tokenizer)])) ?? undefined;
  }

  /** The same log-probs through the KV-cache path, one token per step (a reference; slow). */
  async scoreIncremental(row: ScoreRow, prefill?: number): Promise<number[]> {
    return this.worker.call<number[]>('scoreIncremental', [row, prefill]);
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
    const { chatTemplate, template, onToken, signal, ...options } = request;
    const ids = this.promptIds(prompt, { chatTemplate, template });
    // Throws ContextLengthError (a UserError) when the prompt leaves no room: ./context-limit.ts.
    const maxNewTokens = replyBudget(ids.length, options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS, this.maxPositions);
    const onEvent = onToken && ((m: WorkerEvent) => onToken(m.token as number, m.logprob as number));
    const stop = signal && stopFlagFor(signal);
    try {
      const out = await this.worker.call<GeneratedTokens & { executionProvider: Device }>('generate', [ids, { ...options, maxNewTokens, decodeText: false, ...(stop ? { stopFlag: stop.flag } : {}) }, !!onToken], onEvent);
      this.ep = out.executionProvider;
      return this.result(out, ids.length, maxNewTokens, out.executionProvider, offersTools(template));
    } finally {
      stop?.dispose();
    }
  }

  /**
   * Several prompts, several sequences each, generated as one batch (docs/design.md §Batched
   * generation): sequence j of a prompt gives what `generate` gives with `seed: seeds[j]`.
   * Results per prompt, in seed order. Prompts that leave no room throw as in `generate`.
   * `onToken` sees each token as it is chosen, with its sequence: the prompts' seeds counted in order.
   * A batch whose rows' caches would not fit the memory the load found is generated in parts
   * (batchParts), which gives the same sequences.
   */
  async generateBatch(prompts: BatchRequestPrompt[], request: BatchGenerateRequest = {}): Promise<GenerateResult[][]> {
    const { chatTemplate, template, onToken, ...options } = request;
    const requested = options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
    const batch = prompts.map((p) => {
      const promptIds = this.promptIds(p.prompt, { chatTemplate, template: p.template ?? template });
      return { promptIds, seeds: p.seeds, maxNewTokens: replyBudget(promptIds.length, requested, this.maxPositions) };
    });
    const outputs: GeneratedTokens[][] = batch.map(() => []);
    let sequences = 0;
    let executionProvider: Device = this.device;
    for (const part of batchParts(batch, (rows, slots) => this.context.fitsBatch(rows, slots))) {
      const before = sequences;
      const onEvent = onToken && ((m: WorkerEvent) => onToken(before + (m.sequence as number), m.token as number, m.logprob as number));
      const out = await this.worker.call<{ outputs: GeneratedTokens[][]; executionProvider: Device }>('generateBatch', [part.map((p) => p.item), { ...options, maxNewTokens: requested, decodeText: false }, !!onToken], onEvent);
      part.forEach((p, k) => outputs[p.index]!.push(...out.outputs[k]!));
      sequences += part.reduce((a, p) => a + p.item.seeds.length, 0);
      executionProvider = out.executionProvider;
    }
    this.ep = executionProvider;
    return outputs.map((seqs, i) => seqs.map((s) => this.result(s, batch[i]!.promptIds.length, batch[i]!.maxNewTokens, executionProvider, offersTools(prompts[i]!.template ?? template))));
  }

  private result(out: GeneratedTokens, promptTokens: number, maxNewTokens: number, executionProvider: Device, toolsOffered: boolean): GenerateResult {
    // A stop string cut the text: parse what was kept, not the tokens beyond it. Otherwise the
    // worker left the text to this thread, whose tokenizer it does not load (decodeText).
    const stopped = out.finishReason === 'stop';
    const tok = replyTokens(this.tokenizer, toolsOffered);
    const parsed = stopped ? parseCutReply(out.text, out.tokens, tok) : parseReply(out.tokens.filter((t) => !this.tokenizer.eosTokenIds.includes(t)), tok);
    const text = stopped ? out.text : this.tokenizer.decode(out.tokens);
    return { tokens: out.tokens, logprobs: out.logprobs, text, finishReason: out.finishReason, ...parsed, promptTokens, maxNewTokens, executionProvider };
  }

  /**
   * The adapter weights later calls run with, for a model loaded with the `lora` option
   * (./inference-engine.ts `setLora`); null: the base model. The arrays are copied to the worker.
   */
  async setLora(weights: ReadonlyMap<string, Float32Array> | null): Promise<void> {
    await this.worker.call('setLora', [weights]);
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}

/** One prompt of a batch, as the engine takes it. */
interface BatchItem {
  promptIds: number[];
  seeds: number[];
  maxNewTokens: number;
}

/**
 * A batch in parts that each fit (`fits(rows, slots)`: every row's cache as long as the part's
 * longest, prompt and reply), in order: a prompt's seeds may be parted too. A
 * row that does not fit even alone is a part of its own (the load checked one chat of its length).
 */
export function batchParts(batch: readonly BatchItem[], fits: (rows: number, slots: number) => boolean): { index: number; item: BatchItem }[][] {
  const parts: { index: number; item: BatchItem }[][] = [];
  let part: { index: number; item: BatchItem }[] = [];
  let rows = 0, longest = 0;
  batch.forEach((item, index) => {
    const length = item.promptIds.length + item.maxNewTokens;
    for (const seed of item.seeds) {
      const wider = Math.max(longest, length);
      if (rows > 0 && !fits(rows + 1, wider)) {
        parts.push(part);
        [part, rows, longest] = [[], 0, 0];
      }
      const last = part.at(-1);
      if (last?.index === index) last.item = { ...last.item, seeds: [...last.item.seeds, seed] };
      else part.push({ index, item: { ...item, seeds: [seed] } });
      rows++;
      longest = Math.max(longest, length);
    }
  });
  if (part.length) parts.push(part);
  return parts;
}
