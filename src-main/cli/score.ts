// `hindsight score --model DIR --input IN.jsonl --out OUT.jsonl [--adapter DIR] [--device cpu|cuda]`
// (docs/design.md §Command line): the log-probs of each line's response span. Input lines are
// {"context":[…], "response":"…"} (a `samples` export line, as it is), or the same with the
// context named "messages" (both rendered through the model's chat template), or
// {"input_ids":[…], "response_start":k}. A samples line's `response_tool_calls` are the reply's
// calls and its `tools` the tools its prompt offered, rendered as training renders them. Each
// output line is {"logprobs":[…]}, one fp32 natural log-prob per response token, in input
// order. The output is written atomically. A conversation longer than the model's context
// keeps its latest turns, as a training row does.
//
// --adapter DIR scores with a PEFT LoRA adapter (a trainer's output folder) applied,
// unmerged, as the model engine's LoRA inputs (the path rollouts and on-policy training take):
// the policy the trainer trained, with the same log-probs as its training step gives
// (test/train/score-adapter.test.ts), in batches and attention chunks like the base model's.
//
// --quantize int8|int4 scores with weight-only quantised linear layers (docs/design.md
// §Quantisation): faster, but the log-probs are no longer the fp32 ones training computes, so
// a note on stderr says how far they drift (max and mean |Δ log-prob| on a fixed text, measured
// against fp32 in the same run). The default, auto, keeps fp32 where it fits the memory
// available (model/inference-fit.ts). With --adapter too: the adapter's branch adds to the
// quantised projections as in an on-policy run's rollouts.
import { offeredTools } from '../../src-shared/offered-tools.js';
import { UserError } from '../../src-shared/types.js';
import { AtomicFileWriter, PRIVATE_FILE_MODE } from '../store/atomic-file.js';
import { readJsonLines } from '../store/jsonl-file.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { LocalModel } from '../model/local-model.js';
import type { Device } from '../model/ort-session.js';
import type { Precision } from '../../src-shared/training.js';
import { ChatTokenizer, ToolCallsNotWritten, type ChatMessage, type Reply } from '../model/tokenizer.js';
import { ModelEngine, type ScoreRow } from '../model/inference-engine.js';
import { readAdapter } from '../train/peft.js';
import { windowedResponse } from '../train/fit-max-length.js';
import { intFlag, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_OPTION, deviceFlag, loadQuantizeFlag, modelFlag, precisionFlag, QUANTIZE_OPTION } from './model-flags.js';
import { driftNote, type QuantDrift } from '../model/quant-drift.js';
import { fitInference, type LoadQuantize } from '../model/inference-fit.js';
import { deviceGpuMemory } from '../model/gpu-memory.js';
import { defaultPrecision } from '../../src-shared/training.js';
import type { Quantize } from '../model/quantize.js';

/** Rows scored at once. */
const BATCH_SIZE = 8;

export const spec = {
  name: 'score',
  synopsis: '--model DIR --input IN.jsonl --out OUT.jsonl [options]',
  about: "Writes the log-probs of each input line's response tokens: one {\"logprobs\":[…]} line per input line,\n" +
    'in order. An input line is one of\n' +
    '  {"context":[messages…], "response":"…"}   a line of `export --format samples`, as it is\n' +
    '  {"messages":[messages…], "response":"…"}  the same, with the context named messages\n' +
    '  {"input_ids":[…], "response_start":k}      tokens already made; the response is ids k…end\n' +
    'Messages are {"role","content"} objects, rendered through the model\'s chat template; a line\'s\n' +
    '"response_tool_calls" are the reply\'s calls and its "tools" the tools its prompt offered.',
  options: {
    model: { type: 'string', value: 'DIR', help: "the model (a Hugging Face checkpoint folder, a .gguf file, or a name 'hindsight models' lists)", required: true },
    input: { type: 'string', value: 'IN.jsonl', help: 'the lines to score', required: true },
    out: { type: 'string', value: 'OUT.jsonl', help: 'where to write the log-probs', required: true },
    adapter: { type: 'string', value: 'DIR', help: 'apply this PEFT LoRA adapter (a train --out folder)', otherwise: 'the base model' },
    ...QUANTIZE_OPTION,
    ...DEVICE_OPTION,
    'batch-size': { type: 'string', value: 'N', help: 'rows scored at once', otherwise: String(BATCH_SIZE) },
    threads: { type: 'string', value: 'N', help: 'ONNX Runtime intra-op threads', otherwise: "ONNX Runtime's own choice" },
    ...jsonOption('print {rows, tokens, out, execution_provider, seconds, quantize} (+ drift from fp32, when quantised) as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

/**
 * Reads and validates the input file into rows, naming the line of any problem. A conversation
 * longer than the model's `positions` keeps its latest turns, as a training row does
 * (../train/fit-max-length.ts), or where its system turn alone leaves no room, its last
 * `positions` tokens (the reply whole); `windowed` counts those. Ids given as they are must fit
 * (checkRows).
 */
export function readScoreInput(file: string, tokenizer: ChatTokenizer, positions: number): { rows: ScoreRow[]; windowed: number; callsLeftOut: number } {
  const rows: ScoreRow[] = [];
  let windowed = 0, callsLeftOut = 0;
  for (const { value, where } of readJsonLines(file).lines) {
    const obj = (value ?? {}) as Record<string, unknown>;
    if (Array.isArray(obj.input_ids)) {
      const ids = obj.input_ids as unknown[];
      if (!ids.every((x) => Number.isInteger(x))) throw new UserError(`${where}: input_ids must be integers`);
      if (!Number.isInteger(obj.response_start)) throw new UserError(`${where}: response_start must be an integer`);
      rows.push({ inputIds: ids as number[], responseStart: obj.response_start as number });
    } else if (Array.isArray(obj.context ?? obj.messages) && typeof obj.response === 'string') {
      const messages = (obj.context ?? obj.messages) as ChatMessage[];
      if (!messages.every((m) => m && typeof m.role === 'string' && typeof m.content === 'string')) {
        throw new UserError(`${where}: each message needs a string role and content`);
      }
      let { reply, options } = replyOfLine(obj, obj.response, where);
      let window: ReturnType<typeof windowedResponse>;
      try {
        window = windowedResponse(tokenizer, messages, reply, positions, options);
      } catch (err) {
        // A template that writes no tool calls (the demo model's): the reply's text alone, counted.
        if (!(err instanceof ToolCallsNotWritten)) throw err;
        reply = obj.response;
        callsLeftOut++;
        window = windowedResponse(tokenizer, messages, reply, positions, options);
      }
      if (!window.fits && window.why === 'reply') throw new UserError(`${where}: the reply alone is past the model's ${positions} positions (its context length)`);
      if (window.fits) rows.push(window.span);
      else {
        const whole = tokenizer.encodeResponse(messages, reply, options), cut = whole.inputIds.length - positions;
        rows.push({ inputIds: whole.inputIds.slice(cut), responseStart: whole.responseStart - cut });
      }
      if (!window.fits || window.cut) windowed++;
    } else {
      throw new UserError(`${where}: expected {"context":[…],"response":"…"} (a samples export line), {"messages":[…],"response":"…"} or {"input_ids":[…],"response_start":k}`);
    }
  }
  return { rows, windowed, callsLeftOut };
}

/**
 * A line's reply and template options: a samples export line's `response_tool_calls` are the
 * reply's calls, and its `tools` (or any line's) the tools its prompt offered, rendered as
 * training renders them (docs/design.md §Tools offered).
 */
function replyOfLine(obj: Record<string, unknown>, text: string, where: string): { reply: Reply; options: { tools?: unknown[] } } {
  const calls = obj.response_tool_calls;
  if (calls !== undefined && !(Array.isArray(calls) && calls.every((c) => typeof c?.function?.name === 'string' && typeof c.function.arguments === 'string'))) {
    throw new UserError(`${where}: response_tool_calls must be a list of {"function": {"name": "…", "arguments": "…"}}`);
  }
  const tools = obj.tools === undefined ? null : offeredTools(obj.tools);
  if (obj.tools !== undefined && !tools) throw new UserError(`${where}: tools must be a list of tool definitions ({"type": "function", "function": {"name": …}})`);
  const reply: Reply = Array.isArray(calls) && calls.length ? { role: 'assistant', content: text, tool_calls: calls } : text;
  return { reply, options: tools ? { tools } : {} };
}

/**
 * Token ids inside the vocabulary, a response start inside the row, and a row within the model's
 * positions (past them its log-probs mean nothing: docs/design.md §The context window), naming the row.
 */
function checkRows(rows: ScoreRow[], config: { vocabSize: number; maxPositionEmbeddings: number }, file: string): void {
  const { vocabSize, maxPositionEmbeddings: positions } = config;
  rows.forEach((r, i) => {
    if (r.inputIds.length > positions) throw new UserError(`${file}: row ${i + 1} is ${r.inputIds.length} tokens long, past the model's ${positions} positions (its context length)`);
    const bad = r.inputIds.find((id) => id < 0 || id >= vocabSize);
    if (bad !== undefined) throw new UserError(`${file}: row ${i + 1}: token id ${bad} is outside the vocabulary [0, ${vocabSize})`);
    if (r.responseStart < 1 || r.responseStart > r.inputIds.length) {
      throw new UserError(`${file}: row ${i + 1}: response_start ${r.responseStart} must be between 1 and the length ${r.inputIds.length}`);
    }
  });
}

interface Scored {
  rows: ScoreRow[];
  /** Rows whose conversation lost its earliest turns (or tokens) to fit the model's `positions`. */
  windowed: number;
  /** Replies whose tool calls the model's chat template does not write: their text alone was scored. */
  callsLeftOut: number;
  positions: number;
  logprobs: number[][];
  executionProvider: string;
  /** The form the base's weights scored in. */
  quantize: Quantize;
  drift?: QuantDrift;
}

/** The --quantize and --ignore-memory asked for. */
interface LoadAsked { quantize: LoadQuantize; ignoreMemory: boolean; reader: 'cli' }

/** Where and how the model runs: the device, its arithmetic, the threads. */
interface Placement { device: Device; precision?: Precision; threads: number }

async function scoreBase(values: { model: string; input: string }, { device, precision, threads }: Placement, batchSize: number, asked: LoadAsked): Promise<Scored> {
  const model = await LocalModel.load(values.model, { device, precision, threads: threads || undefined, ...asked });
  if (model.weightsNote) process.stderr.write(`note: ${model.weightsNote}\n`);
  try {
    const { rows, windowed, callsLeftOut } = readScoreInput(values.input, model.tokenizer, model.config.maxPositionEmbeddings);
    checkRows(rows, model.config, values.input);
    const logprobs = await model.score(rows, { batchSize });
    const drift = await model.quantizationDrift();
    return { rows, windowed, callsLeftOut, positions: model.config.maxPositionEmbeddings, logprobs, executionProvider: model.executionProvider ?? device, quantize: model.quantize, drift };
  } finally {
    await model.close();
  }
}

async function scoreAdapter(values: { model: string; input: string; adapter: string }, { device, precision, threads }: Placement, batchSize: number, asked: LoadAsked): Promise<Scored> {
  const config = Checkpoint.open(values.model).config;
  const adapter = readAdapter(values.adapter, config);
  const { rows, windowed, callsLeftOut } = readScoreInput(values.input, ChatTokenizer.load(values.model), config.maxPositionEmbeddings);
  checkRows(rows, config, values.input);
  const fit = fitInference(values.model, { ...asked, precision: precision ?? defaultPrecision(device), lora: adapter.lora, gpu: await deviceGpuMemory(device) });
  if (fit.note) process.stderr.write(`note: ${fit.note}\n`);
  const engine = ModelEngine.open(values.model, { device, precision, threads: threads || undefined, lora: adapter.lora, quantize: fit.quantize });
  try {
    engine.setLora(adapter.weights);
    const logprobs = await engine.score(rows, { batchSize });
    return { rows, windowed, callsLeftOut, positions: config.maxPositionEmbeddings, logprobs, executionProvider: engine.executionProvider ?? device, quantize: fit.quantize };
  } finally {
    await engine.close();
  }
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  if (!values.model || !values.input || !values.out) throw new UsageError(`--model, --input and --out are required\n${USAGE}`);
  values.model = modelFlag(values.model);
  const device = deviceFlag(values.device);
  const asked = { quantize: loadQuantizeFlag(values.quantize), ignoreMemory: values['ignore-memory'], reader: 'cli' as const };
  const batchSize = intFlag('batch-size', values['batch-size'], BATCH_SIZE, 1);
  const threads = intFlag('threads', values.threads, 0, 0);
  const started = Date.now();
  const { model, input, out, adapter } = values;
  const placement: Placement = { device, precision: precisionFlag(values.precision), threads };
  const { rows, windowed, callsLeftOut, positions, logprobs, executionProvider: ep, quantize, drift } = adapter
    ? await scoreAdapter({ model, input, adapter }, placement, batchSize, asked)
    : await scoreBase({ model, input }, placement, batchSize, asked);
  // A log-prob that is not finite (an adapter or model whose values overflow) is no score: refused, nothing written.
  const bad = logprobs.findIndex((lp) => lp.some((x) => !Number.isFinite(x)));
  if (bad >= 0) throw new UserError(`row ${bad + 1} scores non-finite log-probs${adapter ? ` with adapter ${adapter}` : ''}: the model's values overflow; nothing written to ${out}`);
  const writer = new AtomicFileWriter(out, PRIVATE_FILE_MODE); // owner-only, like the exports it scores
  try {
    for (const lp of logprobs) writer.write(JSON.stringify({ logprobs: lp }) + '\n');
    writer.commit();
  } catch (err) {
    writer.abort();
    throw err;
  }
  const seconds = (Date.now() - started) / 1000;
  const tokens = rows.reduce((a, r) => a + r.inputIds.length, 0);
  if (drift) process.stderr.write(driftNote(quantize, drift) + '\n');
  if (windowed) process.stderr.write(`${windowed} of ${rows.length} conversations kept only their latest turns, to fit the model's ${positions} positions\n`);
  if (callsLeftOut) process.stderr.write(`${callsLeftOut} of ${rows.length} replies call tools this model's chat template does not write: their text alone was scored\n`);
  process.stderr.write(`scored ${rows.length} rows (${tokens} tokens)${adapter ? ` with adapter ${adapter}` : ''} in ${seconds.toFixed(2)} s on ${ep} → ${out}\n`);
  const quantJson = { quantize, ...(drift ? { drift: { tokens: drift.tokens, max_abs: drift.maxAbs, mean_abs: drift.meanAbs } } : {}) };
  if (values.json) printJson({ rows: rows.length, tokens, out, execution_provider: ep, seconds, ...(adapter ? { adapter } : {}), ...quantJson });
  return 0;
};
