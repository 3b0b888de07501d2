/**
 * The `local` judge backend: the user's own model (src-main/model/), generating in its
 * worker thread through ONNX Runtime, prompted through its chat template.
 *
 * Batching (docs/design.md §Batched generation): the judge asks for all of a sample's votes
 * at once, each with its own seed. Requests made in the same turn of the event loop are
 * gathered into one batched generation: votes on the same prompt share its prefill, and
 * different prompts (the reward and the hint prompt, other samples judged concurrently)
 * decode side by side. Each vote still gets exactly the completion its seed alone would give.
 *
 * Cancelling: the worker generates one batch at a time and cannot be interrupted
 * mid-generation, so an abort takes effect when the current batch ends (bounded by
 * the judge's max_tokens); queued votes are dropped at once.
 *
 * A prompt too long for the model's context (a small model, a long reply or next state) is
 * cut from the left, so the reply and the next state, which sit at its end with the question,
 * stay in view and generation never runs past the model's positions (../model/context-limit.ts).
 * The vote then starts with a note saying how much was cut (README, Judging). The reply keeps
 * room for a quarter of the context, or max_tokens when that is less. The LLM judge fits its
 * prompts before they get here (./prompt-fit.ts: it knows the context and counts exactly with
 * `countTokens`), so for it this cut never happens; it guards the other callers.
 *
 * Thinking models: a template with an `enable_thinking` switch (Qwen3) is rendered with it off;
 * one that thinks without a switch (R1 distills) says so (`alwaysThinks`), and the judge gives
 * it a thinking budget. A vote stopped by the token limit ends with CUT_OFF_NOTE (./parse.ts).
 */
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { keepPromptTail } from '../model/context-limit.js';
import { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import type { LoadQuantize } from '../model/inference-fit.js';
import type { ChatCompleter, CompletionOptions } from './llm-judge.js';
import type { PromptMessage } from './prompts.js';
import { CUT_OFF_NOTE } from './parse.js';

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The judge run was cancelled', 'AbortError');
}

/** The line a vote starts with when its prompt was cut; the parser reads past it (no \boxed{}, no hint tags). */
export function cutNote(dropped: number, promptTokens: number, maxPositions: number): string {
  return `[judge prompt cut: ${dropped} of its ${promptTokens} tokens were dropped from the start to fit the model's ${maxPositions} positions]`;
}

/** Sequences generated in one batch at most; more requests wait for the next batch. */
export const MAX_BATCH_SEQUENCES = 16;

interface PendingVote {
  ids: number[];
  options: CompletionOptions;
  resolve: (raw: string) => void;
  reject: (err: unknown) => void;
}

export class LocalCompleter implements ChatCompleter {
  readonly backend = 'local' as const;
  readonly model: string;
  private pending: PendingVote[] = [];
  private flushScheduled = false;
  /** Template variables the judge's prompts are rendered with: thinking off where the template can. */
  private readonly template: { extra?: Record<string, unknown> };
  private readonly thinksAlways: boolean;

  private constructor(readonly localModel: LocalModel, private readonly ownsModel: boolean) {
    // The form is part of the judge's name where the weights are quantised: an int4 judge's votes
    // are another judge's than the same model's in fp32 (labels keep it; a run in the other form
    // judges them again rather than counting them as already judged).
    const name = path.basename(path.resolve(localModel.dir));
    this.model = localModel.quantize === 'none' ? name : `${name} (${localModel.quantize})`;
    // A template has the switch when rendering with it off changes the prompt (Qwen3 then
    // writes an empty <think></think> itself).
    const probe = [{ role: 'user', content: 'hi' }];
    const off = { extra: { enable_thinking: false } };
    const switchable = localModel.promptIds(probe).join() !== localModel.promptIds(probe, { template: off }).join();
    this.template = switchable ? off : {};
    this.thinksAlways = !switchable && localModel.tokenizer.thinkStartId !== undefined;
  }

  contextTokens(): number {
    return this.localModel.maxPositions;
  }

  countTokens(messages: PromptMessage[]): number {
    return this.render(messages).length;
  }

  alwaysThinks(): boolean {
    return this.thinksAlways;
  }

  private render(messages: PromptMessage[]): number[] {
    return this.localModel.promptIds(messages.map((m) => ({ role: m.role, content: m.content })), { template: this.template });
  }

  /** Loads the model folder in a new worker; a bad folder is a UserError naming it. */
  static async load(dir: string, options: { device?: Device; quantize?: LoadQuantize } = {}): Promise<LocalCompleter> {
    let model: LocalModel;
    try {
      model = await LocalModel.load(dir, { device: options.device ?? 'cpu', quantize: options.quantize, prepare: ['generate'] });
    } catch (err) {
      if (err instanceof UserError) throw err;
      throw new UserError(`cannot load the local judge model from ${dir}: ${(err as Error).message}`);
    }
    return new LocalCompleter(model, true);
  }

  /** Why the model answers with int8 or int4 weights (fp32 did not fit), or null. */
  get weightsNote(): string | null {
    return this.localModel.weightsNote;
  }

  /** Uses a model that is already loaded (e.g. the one `serve` answers with); close() leaves it open. */
  static wrap(model: LocalModel): LocalCompleter {
    return new LocalCompleter(model, false);
  }

  async complete(messages: PromptMessage[], options: CompletionOptions): Promise<string> {
    if (options.signal?.aborted) throw abortError(options.signal);
    const model = this.localModel;
    const rendered = this.render(messages);
    const replyRoom = Math.min(options.maxTokens, Math.max(1, Math.floor(model.maxPositions / 4)));
    const prompt = keepPromptTail(rendered, model.maxPositions, replyRoom, model.tokenizer.bosTokenId);
    const raw = await new Promise<string>((resolve, reject) => {
      this.pending.push({ ids: prompt.ids, options, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
    if (options.signal?.aborted) throw abortError(options.signal);
    return prompt.dropped ? `${cutNote(prompt.dropped, rendered.length, model.maxPositions)}\n${raw}` : raw;
  }

  /** Generates the votes gathered so far, in batches of votes that share their sampling settings. */
  private flush(): void {
    this.flushScheduled = false;
    const waiting = this.pending.splice(0);
    const live = waiting.filter((v) => {
      if (!v.options.signal?.aborted) return true;
      v.reject(abortError(v.options.signal));
      return false;
    });
    const groups = new Map<string, PendingVote[]>();
    for (const v of live) {
      const key = `${v.options.temperature}|${v.options.maxTokens}`;
      groups.set(key, [...(groups.get(key) ?? []), v]);
    }
    // The worker runs one request at a time: the batches queue there, in this order.
    for (const group of groups.values()) {
      for (let i = 0; i < group.length; i += MAX_BATCH_SEQUENCES) void this.generate(group.slice(i, i + MAX_BATCH_SEQUENCES));
    }
  }

  private async generate(votes: PendingVote[]): Promise<void> {
    // Votes on the same prompt become one prompt with several seeds (one prefill).
    const byPrompt = new Map<string, PendingVote[]>();
    for (const v of votes) {
      const key = v.ids.join(',');
      byPrompt.set(key, [...(byPrompt.get(key) ?? []), v]);
    }
    const prompts = [...byPrompt.values()];
    try {
      const { temperature, maxTokens } = votes[0]!.options;
      const out = await this.localModel.generateBatch(
        prompts.map((same) => ({ prompt: same[0]!.ids, seeds: same.map((v) => v.options.seed) })),
        // The judge's prompts begin with the same instructions: a batch continues the last one's cache as far as they agree.
        { temperature, maxNewTokens: maxTokens, reusePrefix: true },
      );
      prompts.forEach((same, i) => same.forEach((v, j) => {
        const reply = out[i]![j]!;
        // Keep reasoning in the raw vote, marked, so the parser can skip it as it would for a server.
        const raw = reply.reasoning ? `<think>${reply.reasoning}</think>${reply.content}` : reply.text;
        v.resolve(reply.finishReason === 'length' ? raw + CUT_OFF_NOTE : raw);
      }));
    } catch (err) {
      for (const v of votes) v.reject(err);
    }
  }

  async close(): Promise<void> {
    if (this.ownsModel) await this.localModel.close();
  }
}
