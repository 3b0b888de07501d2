// `hindsight generate --model DIR --prompt TEXT [--max-new-tokens N] [--temperature T]
// [--top-p P] [--seed S] [--stop STR]… [--device cpu|cuda] [--adapter DIR] [--no-chat-template] [--json]`.
// --adapter applies a PEFT LoRA adapter (Hindsight's or one trained elsewhere), merged once
// into a cached folder as `serve --adapter` does (src-main/openai/served-model.ts).
// The prompt goes through the model's chat template as one user message unless
// --no-chat-template (then it is raw text, BOS added where the tokenizer adds one).
// Prints the reply on stdout; with --json, one object with the reply, its reasoning, tool
// calls, tokens, their log-probs and the execution provider that ran.
import type { Device } from '../model/ort-session.js';
import { LocalModel } from '../model/local-model.js';
import { mergedModelDir } from '../openai/served-model.js';
import { intFlag, numberFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';

const USAGE =
  'usage: hindsight generate --model DIR --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S]\n' +
  '                          [--stop STR]… [--device cpu|cuda] [--threads N] [--adapter DIR] [--no-chat-template] [--json]';

export function deviceFlag(value: string | undefined): Device {
  if (value === undefined || value === 'cpu' || value === 'cuda') return value ?? 'cpu';
  throw new UsageError(`--device must be cpu or cuda, got '${value}'`);
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, {
    model: { type: 'string' },
    prompt: { type: 'string' },
    'max-new-tokens': { type: 'string' },
    temperature: { type: 'string' },
    'top-p': { type: 'string' },
    seed: { type: 'string' },
    stop: { type: 'string', multiple: true },
    device: { type: 'string', default: 'cpu' },
    threads: { type: 'string' },
    adapter: { type: 'string' },
    'no-chat-template': { type: 'boolean', default: false },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (!values.model || values.prompt === undefined) throw new UsageError(`--model and --prompt are required\n${USAGE}`);
  const device = deviceFlag(values.device);
  const maxNewTokens = intFlag('max-new-tokens', values['max-new-tokens'], 256, 1);
  const temperature = numberFlag('temperature', values.temperature, 0);
  const topP = numberFlag('top-p', values['top-p'], 1);
  if (temperature < 0) throw new UsageError(`--temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new UsageError(`--top-p must be in (0, 1], got ${topP}`);
  const seed = values.seed === undefined ? undefined : intFlag('seed', values.seed, 0, 0);
  const threads = intFlag('threads', values.threads, 0, 0);

  const modelDir = values.adapter ? mergedModelDir(values.model, values.adapter) : values.model;
  const model = await LocalModel.load(modelDir, { device, threads: threads || undefined });
  try {
    const started = Date.now();
    const out = await model.generate(values.prompt, {
      chatTemplate: !values['no-chat-template'],
      maxNewTokens,
      temperature,
      topP,
      seed,
      stopStrings: values.stop,
    });
    const seconds = (Date.now() - started) / 1000;
    const rate = out.tokens.length / Math.max(seconds, 1e-9);
    process.stderr.write(`${out.tokens.length} tokens in ${seconds.toFixed(2)} s (${rate.toFixed(1)} tokens/s) on ${out.executionProvider}, finish: ${out.finishReason}\n`);
    if (values.json) {
      printJson({
        text: out.text,
        content: out.content,
        reasoning: out.reasoning ?? null,
        tool_calls: out.toolCalls,
        tool_call_errors: out.toolCallErrors,
        finish_reason: out.finishReason,
        prompt_tokens: out.promptTokens,
        tokens: out.tokens,
        logprobs: out.logprobs,
        execution_provider: out.executionProvider,
        chat_template: values['no-chat-template'] ? 'none' : model.tokenizer.chatTemplateSource,
        seconds,
      });
    } else {
      if (out.reasoning) process.stderr.write(`[reasoning] ${out.reasoning}\n`);
      for (const call of out.toolCalls) process.stderr.write(`[tool call] ${call.function.name}(${call.function.arguments})\n`);
      for (const e of out.toolCallErrors) process.stderr.write(`[tool call error] ${e.error}\n`);
      process.stdout.write(out.content + '\n');
    }
    return 0;
  } finally {
    await model.close();
  }
};
