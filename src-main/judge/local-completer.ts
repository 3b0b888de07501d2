/**
 * The `local` judge backend: the user's own model (src-main/model/), generating in its
 * worker thread through ONNX Runtime, prompted through its chat template.
 *
 * Cancelling: the worker generates one completion at a time and cannot be interrupted
 * mid-generation, so an abort takes effect when the current completion ends (bounded by
 * the judge's max_tokens); queued votes are dropped at once.
 */
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import type { ChatCompleter, CompletionOptions } from './llm-judge.js';
import type { PromptMessage } from './prompts.js';

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The judge run was cancelled', 'AbortError');
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
    const out = await this.localModel.generate(messages.map((m) => ({ role: m.role, content: m.content })), {
      temperature: options.temperature,
      maxNewTokens: options.maxTokens,
      seed: options.seed,
    });
    if (options.signal?.aborted) throw abortError(options.signal);
    // Keep reasoning in the raw vote, marked, so the parser can skip it as it would for a server.
    return out.reasoning ? `<think>${out.reasoning}</think>${out.content}` : out.text;
  }

  async close(): Promise<void> {
    if (this.ownsModel) await this.localModel.close();
  }
}
