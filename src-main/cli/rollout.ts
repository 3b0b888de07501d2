// `hindsight rollout --model DIR --tasks FILE --out EPISODES.jsonl [options]`: runs K rollouts of
// every task of a task file with a local model (docs/design.md §Rollouts), tools included,
// appends each finished episode to --out (fsynced line by line) and prints the success rate.
// A second run with the same --out resumes: episodes already there are not generated again,
// and the others get exactly the tokens a fresh run gives them (each sample's seed is fixed
// by --seed, the task's position and the sample's index).
// --adapter feeds the adapter's weights to the generation graph as inputs (no merged copy).
import fs from 'node:fs';
import { ON_POLICY_DEFAULTS, type Episode, type EpisodeFinish } from '../../src-shared/rollout.js';
import { ModelEngine } from '../model/inference-engine.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { DEFAULT_PERSIST, Store } from '../store/database.js';
import { readAdapter } from '../train/peft.js';
import { builtinTools } from '../rollout/builtin-tools.js';
import { checkResumedEpisodes, EpisodeWriter, readEpisodes } from '../rollout/episodes-file.js';
import { runRollouts } from '../rollout/manager.js';
import { enginePolicy } from '../rollout/policy.js';
import { readTasks, taskContext } from '../rollout/tasks.js';
import { ToolRegistry, type Tool } from '../rollout/tools.js';
import { loopbackUrl, readToolSchemas, userTools } from '../rollout/user-tools.js';
import { DB_OPTION, defaultDbPath, intFlag, jsonOption, numberFlag, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_OPTION, deviceFlag, loadQuantizeFlag, modelFlag, precisionFlag, QUANTIZE_OPTION } from './model-flags.js';
import { fitInference } from '../model/inference-fit.js';
import { deviceGpuMemory } from '../model/gpu-memory.js';
import { defaultPrecision } from '../../src-shared/training.js';

const D = ON_POLICY_DEFAULTS;

export const spec = {
  name: 'rollout',
  synopsis: '--model DIR --tasks FILE --out EPISODES.jsonl [options]',
  about: 'Runs K rollouts of every task in a task file (JSONL: messages, optional tools, answer or answer_regex)\n' +
    'with a local model, executing its tool calls, and appends each episode to --out; prints the success rate.\n' +
    'Run it again with the same --out to resume. Built-in tools: calculator, current_time, and search_history\n' +
    'over the database when there is one.',
  options: {
    model: { type: 'string', value: 'PATH', help: "the model folder, .gguf file, or a name 'hindsight models' lists", required: true },
    tasks: { type: 'string', value: 'FILE', help: 'the task file (one JSON task per line)', required: true },
    out: { type: 'string', value: 'FILE', help: 'the episodes file to append to (resumed when it exists)', required: true },
    adapter: { type: 'string', value: 'DIR', help: 'a PEFT LoRA adapter to generate with (fed as graph inputs)', otherwise: 'the base model alone' },
    rollouts: { type: 'string', default: String(D.rollouts), value: 'K', help: 'episodes per task' },
    'max-turns': { type: 'string', default: String(D.maxTurns), value: 'N', help: 'assistant replies per episode (a tool result starts another)' },
    'max-tokens': { type: 'string', default: String(D.maxTokens), value: 'N', help: 'generated tokens per episode, over all its replies' },
    temperature: { type: 'string', default: String(D.temperature), value: 'T', help: 'sampling temperature; 0 is greedy' },
    'top-p': { type: 'string', default: String(D.topP), value: 'P', help: 'nucleus sampling mass, in (0, 1]' },
    seed: { type: 'string', default: '0', value: 'S', help: 'seed base: sample k of task t uses S + t·K + k' },
    tools: { type: 'string', value: 'FILE', help: 'your own tools: a JSON array of OpenAI-style schemas (needs --tool-url)', otherwise: 'built-in tools only' },
    'tool-url': { type: 'string', value: 'URL', help: 'the loopback endpoint your tools run at: each call is POSTed as {"name","arguments"}', otherwise: 'none' },
    'tool-timeout-ms': { type: 'string', default: String(D.toolTimeoutMs), value: 'MS', help: 'a tool call is abandoned after this long' },
    'tool-error-limit': { type: 'string', default: String(D.toolErrorLimit), value: 'N', help: 'failed tool calls after which an episode stops' },
    'contexts-per-batch': { type: 'string', default: String(D.contextsPerStep), value: 'N', help: 'tasks generated together (each with its K episodes) in one batch' },
    ...DB_OPTION,
    ...QUANTIZE_OPTION,
    ...DEVICE_OPTION,
    threads: { type: 'string', value: 'N', help: 'ONNX Runtime intra-op threads', otherwise: "ONNX Runtime's own choice" },
    ...jsonOption('print the counts and the success rate as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

interface Tally {
  episodes: number;
  rewarded: number;
  successes: number;
  finishes: Record<EpisodeFinish, number>;
  toolCalls: number;
  invalidToolCalls: number;
}

function tally(episodes: readonly Episode[]): Tally {
  const t: Tally = { episodes: 0, rewarded: 0, successes: 0, finishes: { answer: 0, max_turns: 0, max_tokens: 0, tool_errors: 0 }, toolCalls: 0, invalidToolCalls: 0 };
  for (const e of episodes) {
    t.episodes++;
    t.finishes[e.finish]++;
    t.toolCalls += e.summary.toolCalls;
    t.invalidToolCalls += e.summary.invalidToolCalls;
    if (e.reward !== null) t.rewarded++;
    if (e.reward !== null && e.reward > 0) t.successes++;
  }
  return t;
}

/** The database search_history reads: --db, or the app's own when it exists. */
async function openHistory(dbFlag: string | undefined): Promise<Store | undefined> {
  const file = dbFlag ?? defaultDbPath();
  if (dbFlag === undefined && !fs.existsSync(file)) {
    process.stderr.write(`note: no database at ${file}: search_history is not offered\n`);
    return undefined;
  }
  return Store.open(file, DEFAULT_PERSIST, 'read');
}

function userToolList(file: string | undefined, url: string | undefined): Tool[] {
  if (!file && !url) return [];
  if (!file || !url) throw new UsageError(`--tools and --tool-url go together (the schemas, and where they run)\n${USAGE}`);
  return userTools(readToolSchemas(file), loopbackUrl(url));
}

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  if (!values.model || !values.tasks || !values.out) throw new UsageError(`--model, --tasks and --out are required\n${USAGE}`);
  values.model = modelFlag(values.model, '--model', values.db);
  const rollouts = intFlag('rollouts', values.rollouts, D.rollouts, 1);
  const maxTurns = intFlag('max-turns', values['max-turns'], D.maxTurns, 1);
  const maxTokens = intFlag('max-tokens', values['max-tokens'], D.maxTokens, 1);
  const temperature = numberFlag('temperature', values.temperature, D.temperature);
  const topP = numberFlag('top-p', values['top-p'], D.topP);
  if (temperature < 0) throw new UsageError(`--temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new UsageError(`--top-p must be in (0, 1], got ${topP}`);
  const seed = intFlag('seed', values.seed, 0, 0);
  const timeoutMs = intFlag('tool-timeout-ms', values['tool-timeout-ms'], D.toolTimeoutMs, 1);
  const toolErrorLimit = intFlag('tool-error-limit', values['tool-error-limit'], D.toolErrorLimit, 1);
  const perBatch = intFlag('contexts-per-batch', values['contexts-per-batch'], D.contextsPerStep, 1);
  const threads = intFlag('threads', values.threads, 0, 0);
  const device = deviceFlag(values.device);

  // Everything the user wrote is checked before the model loads.
  const tasks = readTasks(values.tasks);
  const extraTools = userToolList(values.tools, values['tool-url']);
  const previous = readEpisodes(values.out);
  for (const note of previous.notes) process.stderr.write(`note: ${note}\n`);
  const done = new Set(previous.episodes.map((e) => e.id));
  const config = Checkpoint.open(values.model).config;
  const adapter = values.adapter ? readAdapter(values.adapter, config) : undefined;

  const precision = precisionFlag(values.precision);
  const fit = fitInference(values.model, {
    quantize: loadQuantizeFlag(values.quantize), ignoreMemory: values['ignore-memory'], reader: 'cli', precision: precision ?? defaultPrecision(device), rows: perBatch, lora: adapter?.lora,
    gpu: await deviceGpuMemory(device),
  });
  if (fit.note) process.stderr.write(`note: ${fit.note}\n`);

  const store = await openHistory(values.db);
  const engine = ModelEngine.open(values.model, { device, precision, threads: threads || undefined, lora: adapter?.lora, quantize: fit.quantize });
  try {
    if (adapter) engine.setLora(adapter.weights);
    const registry = new ToolRegistry([...builtinTools({ store }), ...extraTools], { timeoutMs });
    const contexts = tasks.map((t) => taskContext(t, registry));
    checkResumedEpisodes(values.out, previous.episodes, contexts);
    const { writer, notes } = EpisodeWriter.open(values.out);
    for (const note of notes) process.stderr.write(`note: ${note}\n`);
    if (done.size) process.stderr.write(`resuming: ${done.size} episode(s) already in ${values.out}\n`);
    const fresh: Episode[] = [];
    const started = Date.now();
    try {
      const policy = enginePolicy(engine, { temperature, topP });
      for (let from = 0; from < contexts.length; from += perBatch) {
        await runRollouts(policy, contexts.slice(from, from + perBatch), {
          tools: registry, rollouts, maxTurns, maxTokens, toolErrorLimit, step: 0,
          // Seeds count tasks from the file's start, whatever the batch size.
          seedBase: seed + from * rollouts,
          skip: done,
          onEpisode: (e) => {
            writer.append(e);
            fresh.push(e);
          },
        });
        process.stderr.write(`rollout: ${Math.min(from + perBatch, contexts.length)}/${contexts.length} tasks, ${fresh.length} new episode(s)\n`);
      }
    } finally {
      writer.close();
    }
    const seconds = (Date.now() - started) / 1000;
    return report(tally([...previous.episodes, ...fresh]), fresh.length, seconds, values.json, engine.executionProvider ?? device);
  } finally {
    await engine.close();
    store?.close();
  }
};

function report(t: Tally, fresh: number, seconds: number, json: boolean | undefined, provider: string): number {
  const rate = t.rewarded ? t.successes / t.rewarded : null;
  if (json) {
    printJson({
      episodes: t.episodes, new_episodes: fresh, rewarded: t.rewarded, successes: t.successes, success_rate: rate,
      finishes: t.finishes, tool_calls: t.toolCalls, invalid_tool_calls: t.invalidToolCalls, seconds, execution_provider: provider,
    });
    return 0;
  }
  process.stderr.write(`${fresh} new episode(s) in ${seconds.toFixed(1)} s on ${provider}\n`);
  const finishes = Object.entries(t.finishes).map(([k, n]) => `${k} ${n}`).join(', ');
  process.stdout.write(`episodes: ${t.episodes} (${finishes}); tool calls: ${t.toolCalls} (${t.invalidToolCalls} invalid)\n`);
  process.stdout.write(rate === null
    ? 'success rate: no task has an answer to check\n'
    : `success rate: ${t.successes}/${t.rewarded} (${(100 * rate).toFixed(1)}%)\n`);
  return 0;
}
