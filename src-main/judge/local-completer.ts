/**
 * The `local` judge backend: the user's own model (src-main/model/), generating in its
 * worker thread through ONNX Runtime, prompted through its chat template.
 *
 * Cancelling: the worker generates one completion at a time and cannot be interrupted
 * mid-generation, so an abort takes effect when the current completion ends (bounded by
 * the judge's max_tokens); queued votes are dropped at once.
 *
 * A prompt too long for the model's context (a small model, a long reply or next state) is
 * cut from the left, so the reply and the next state, which sit at its end with the question,
 * stay in view and generation never runs past the model's positions (../model/context-limit.ts).
 * The vote then starts with a note saying how much was cut (README, Judges). The reply keeps
 * room for a quarter of the context, or max_tokens when that is less.
 */
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { keepPromptTail } from '../model/context-limit.js';
import { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import type { ChatCompleter, CompletionOptions } from './llm-judge.js';
import type { PromptMessage } from './prompts.js';

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The judge run was cancelled', 'AbortError');
}

/** The line a vote starts with when its prompt was cut; the parser reads past it (no \boxed{}, no hint tags). */
export function cutNote(dropped: number, promptTokens: number, maxPositions: number): string {
  return `[judge prompt cut: ${dropped} of its ${promptTokens} tokens were dropped from the start to fit the model's ${maxPositions} positions]`;
}

export class LocalCompleter implements ChatCompleter {
  readonly backend = 'local' as const;
  readonly model: string;

  private constructor(readonly localModel: LocalModel, private readonly ownsModel: boolean) {
    this.model = path.basename(path.resolve(localModel.dir));
  }

  /** Loads the model folder in a new worker; a bad folder is a UserError naming it. */
  static async load(dir: string, options: { device?: Device } = {}): Promise<LocalCompleter> {
    let model: LocalModel;
    try {
      model = await LocalModel.load(dir, { device: options.device ?? 'cpu', prepare: ['generate'] });
    } catch (err) {
      if (err instanceof UserError) throw err;
      throw new UserError(`cannot load the local judge model from ${dir}: ${(err as Error).message}`);
    }
    return new LocalCompleter(model, true);
  }

  /** Uses a model that is already loaded (e.g. the one `serve` answers with); close() leaves it open. */
  static wrap(model: LocalModel): LocalCompleter {
    return new LocalCompleter(model, false);
  }

  async complete(messages: PromptMessage[], options: CompletionOptions): Promise<string> {
    if (options.signal?.aborted) throw abortError(options.signal);
    const model = this.localModel;
    const rendered = model.promptIds(messages.map((m) => ({ role: m.role, content: m.content })));
    const replyRoom = Math.min(options.maxTokens, Math.max(1, Math.floor(model.maxPositions / 4)));
    const prompt = keepPromptTail(rendered, model.maxPositions, replyRoom, model.tokenizer.bosTokenId);
    const out = await model.generate(prompt.ids, {
      temperature: options.temperature,
      maxNewTokens: options.maxTokens,
      seed: options.seed,
    });
    if (options.signal?.aborted) throw abortError(options.signal);
    // Keep reasoning in the raw vote, marked, so the parser can skip it as it would for a server.
    const raw = out.reasoning ? `<think>${out.reasoning}</think>${out.content}` : out.text;
    return prompt.dropped ? `${cutNote(prompt.dropped, rendered.length, model.maxPositions)}\n${raw}` : raw;
  }

  async close(): Promise<void> {
    if (this.ownsModel) await this.localModel.close();
  }
}
