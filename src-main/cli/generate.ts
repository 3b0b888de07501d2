// `hindsight generate --model DIR --prompt TEXT [--max-new-tokens N] [--temperature T]
// [--top-p P] [--seed S] [--stop STR]… [--n N] [--quantize auto|none|int8|int4] [--device cpu|cuda]
// [--adapter DIR] [--no-chat-template] [--json]`.
// --adapter applies a PEFT LoRA adapter (Hindsight's or one trained elsewhere), fed beside the
// base weights as `serve --adapter` does (src-main/train/adapted-model.ts). --quantize auto (the
// default) keeps fp32 where it fits the memory available (src-main/model/inference-fit.ts).
// The prompt goes through the model's chat template as one user message unless
// --no-chat-template (then it is raw text, BOS added where the tokenizer adds one).
// Prints the reply on stdout; with --json, one object with the reply, its reasoning, tool
// calls, tokens, their log-probs and the execution provider that ran.
// The model's context bounds it (src-main/model/context-limit.ts): a prompt that leaves no
// room for a reply is a one-line error (exit 1), and --max-new-tokens is capped to the
// positions the prompt leaves, with a note on stderr.
// --n N generates N replies to the prompt in one batch that shares the prompt's prefill
// (docs/design.md §Batched generation); reply j is the one --seed S+j alone gives. They print
// one after another, each after a `--- reply j ---` line (--json: a `replies` array).
import type { GenerateResult } from '../model/local-model.js';
import { sequenceSeeds } from '../model/sampling.js';
import { loadAdaptedModel } from '../train/adapted-model.js';
import { conversionLines } from '../model/weight-file.js';
import { intFlag, jsonOption, numberFlag, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_OPTION, deviceFlag, loadQuantizeFlag, modelFlag, precisionFlag, QUANTIZE_OPTION } from './model-flags.js';

export const spec = {
  name: 'generate',
  synopsis: '--model DIR --prompt TEXT [options]',
  about: 'Generates a reply with a local model (a Hugging Face checkpoint folder or a .gguf file) and prints it on stdout;\n' +
    'the token count and speed go to stderr. The prompt is one user message through the chat template.',
  options: {
    model: { type: 'string', value: 'PATH', help: "the model folder, .gguf file, or a name 'hindsight models' lists", required: true },
    prompt: { type: 'string', value: 'TEXT', help: 'the user message', required: true },
    'max-new-tokens': { type: 'string', default: '256', value: 'N', help: 'the most tokens to generate' },
    temperature: { type: 'string', default: '0', value: 'T', help: 'sampling temperature; 0 is greedy' },
    'top-p': { type: 'string', default: '1', value: 'P', help: 'nucleus sampling mass, in (0, 1]' },
    seed: { type: 'string', value: 'S', help: 'the sampling seed', otherwise: 'a random one' },
    stop: { type: 'string', multiple: true, value: 'STR', help: 'stop when the reply contains this text', otherwise: "the model's end tokens only" },
    n: { type: 'string', default: '1', value: 'N', help: 'replies to generate in one batch (reply j uses seed S+j)' },
    ...QUANTIZE_OPTION,
    ...DEVICE_OPTION,
    threads: { type: 'string', value: 'N', help: 'ONNX Runtime intra-op threads', otherwise: "ONNX Runtime's own choice" },
    adapter: { type: 'string', value: 'DIR', help: 'a PEFT LoRA adapter to apply (fed beside the base weights)', otherwise: 'the base model alone' },
    'no-chat-template': { type: 'boolean', default: false, help: 'send the prompt as raw text (BOS added where the tokenizer adds one)' },
    ...jsonOption('print the reply, reasoning, tool calls, tokens and log-probs as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  if (!values.model || values.prompt === undefined) throw new UsageError(`--model and --prompt are required\n${USAGE}`);
  values.model = modelFlag(values.model);
  const device = deviceFlag(values.device);
  const maxNewTokens = intFlag('max-new-tokens', values['max-new-tokens'], 256, 1);
  const temperature = numberFlag('temperature', values.temperature, 0);
  const topP = numberFlag('top-p', values['top-p'], 1);
  if (temperature < 0) throw new UsageError(`--temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new UsageError(`--top-p must be in (0, 1], got ${topP}`);
  const seed = values.seed === undefined ? undefined : intFlag('seed', values.seed, 0, 0);
  const threads = intFlag('threads', values.threads, 0, 0);
  const n = intFlag('n', values.n, 1, 1);
  const model = await loadAdaptedModel(values.model, values.adapter ?? null, {
    device, threads: threads || undefined, quantize: loadQuantizeFlag(values.quantize), ignoreMemory: values['ignore-memory'], reader: 'cli', precision: precisionFlag(values.precision),
    prepare: ['generate'], onConversion: conversionLines((line) => process.stderr.write(`${line}\n`)),
  });
  const quantize = model.quantize;
  for (const note of [model.weightsNote, model.contextNote]) if (note) process.stderr.write(`note: ${note}\n`);
  try {
    const started = Date.now();
    const request = { chatTemplate: !values['no-chat-template'], maxNewTokens, temperature, topP, stopStrings: values.stop };
    const outs = n === 1
      ? [await model.generate(values.prompt, { ...request, seed })]
      : (await model.generateBatch([{ prompt: values.prompt, seeds: sequenceSeeds(seed, n) }], request))[0]!;
    const first = outs[0]!;
    if (first.maxNewTokens < maxNewTokens) {
      process.stderr.write(`note: --max-new-tokens ${maxNewTokens} capped to ${first.maxNewTokens}: the model answers within ${model.maxPositions} tokens${model.contextNote ? ' here' : ''} and the prompt takes ${first.promptTokens}\n`);
    }
    const seconds = (Date.now() - started) / 1000;
    const tokens = outs.reduce((a, o) => a + o.tokens.length, 0);
    const rate = tokens / Math.max(seconds, 1e-9);
    const finishes = outs.map((o) => o.finishReason).join(', ');
    const what = n === 1 ? `${tokens} tokens` : `${n} replies, ${tokens} tokens`;
    const quantNote = quantize === 'none' ? `, ${model.precision}` : `, ${quantize} weights`;
    process.stderr.write(`${what} in ${seconds.toFixed(2)} s (${rate.toFixed(1)} tokens/s) on ${first.executionProvider}${quantNote}, finish: ${finishes}\n`);
    if (values.json) {
      const common = {
        prompt_tokens: first.promptTokens,
        execution_provider: first.executionProvider,
        quantize,
        ...(quantize === 'none' ? { precision: model.precision } : {}),
        chat_template: values['no-chat-template'] ? 'none' : model.tokenizer.chatTemplateSource,
        seconds,
        ...(values.adapter ? { adapter: values.adapter } : {}),
      };
      printJson(n === 1 ? { ...replyJson(first), ...common } : { replies: outs.map(replyJson), ...common });
    } else {
      outs.forEach((out, j) => {
        if (n > 1) process.stdout.write(`--- reply ${j + 1} ---\n`);
        if (out.reasoning) process.stderr.write(`[reasoning] ${out.reasoning}\n`);
        for (const call of out.toolCalls) process.stderr.write(`[tool call] ${call.function.name}(${call.function.arguments})\n`);
        for (const e of out.toolCallErrors) process.stderr.write(`[tool call error] ${e.error}\n`);
        process.stdout.write(out.content + '\n');
      });
    }
    return 0;
  } finally {
    await model.close();
  }
};

function replyJson(out: GenerateResult) {
  return {
    text: out.text,
    content: out.content,
    reasoning: out.reasoning ?? null,
    tool_calls: out.toolCalls,
    tool_call_errors: out.toolCallErrors,
    finish_reason: out.finishReason,
    tokens: out.tokens,
    logprobs: out.logprobs,
  };
}
