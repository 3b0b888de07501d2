// `hindsight <command> …` (docs/design.md §Command line). Each command lives in src-main/cli/<command>.ts and is
// loaded only when asked for, so `hindsight stats` never pays for ONNX Runtime's start-up.
//
// Exit status: 0 on success, 1 on a user error (one-line message), 2 on bad usage.
import { UserError } from '../src-shared/types.js';
import { formatHelp, UsageError, wantsHelp, type Command, type CommandSpec } from './cli/args.js';
import { setLockHolderName } from './store/db-lock.js';
import { keepCudaFp32Exact } from './model/cuda-env.js';

interface CommandModule {
  command: Command;
  spec: CommandSpec;
}

export const COMMANDS: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
  import: { summary: 'import chat exports (files, folders, zips) into the database', load: () => import('./cli/import.js') },
  stats: { summary: 'count sessions, turns, samples and labels', load: () => import('./cli/stats.js') },
  samples: { summary: 'print the samples as JSON lines', load: () => import('./cli/samples.js') },
  label: { summary: 'set a manual label, hint, repair or note on one reply', load: () => import('./cli/label.js') },
  judge: { summary: 'label the samples with a judge (heuristic, local model or OpenAI-compatible)', load: () => import('./cli/judge.js') },
  export: { summary: 'write a JSONL dataset (samples, openclaw, kto, sft, dpo, sdft)', load: () => import('./cli/export.js') },
  score: { summary: "log-probs of each line's response under a model", load: () => import('./cli/score.js') },
  generate: { summary: 'generate a reply with a local model', load: () => import('./cli/generate.js') },
  models: { summary: 'list the models on this machine (Ollama, LM Studio, the Hugging Face cache, your folders)', load: () => import('./cli/models.js') },
  cache: { summary: "show (or --clear) the graph cache: each model's converted weights, their size and last use", load: () => import('./cli/cache.js') },
  train: { summary: 'fine-tune a LoRA adapter (Binary RL, On-Policy Distillation or both)', load: () => import('./cli/train.js') },
  rollout: { summary: 'run K rollouts of each task of a task file, with tools, and print the success rate', load: () => import('./cli/rollout.js') },
  split: { summary: 'show or change which sessions are held out of training for evaluation', load: () => import('./cli/split.js') },
  eval: { summary: 'measure the base model and adapters on the held-out samples, side by side', load: () => import('./cli/eval.js') },
  lessons: { summary: 'distil your hints into a system prompt of lessons (no training): show, regenerate, edit, write', load: () => import('./cli/lessons.js') },
  serve: { summary: 'serve the app and the OpenAI-compatible API to a browser', load: () => import('./cli/serve.js') },
  'api-key': { summary: "print (or --regenerate) the API key chat clients send to serve's /v1", load: () => import('./cli/api-key.js') },
  demo: { summary: "run the app's core path on the bundled demo exports", load: () => import('./cli/demo.js') },
  'export-model': { summary: 'write a run\'s adapter as a GGUF LoRA + Ollama Modelfile (and optionally a merged GGUF)', load: () => import('./cli/export-model.js') },
  handoff: { summary: "hand the data to a GPU cluster's trainer (TRL files, or a replay into OpenClaw-RL)", load: () => import('./cli/handoff.js') },
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length)) + 2;
  const commands = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}${c.summary}`);
  return ['usage: hindsight <command> [options]', '', 'commands:', ...commands, '', "run 'hindsight <command> --help' for a command's options and their defaults"].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  keepCudaFp32Exact();
  let [name, ...rest] = argv;
  // `hindsight help train` is `hindsight train --help`.
  if (name === 'help' && rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0])) [name, rest] = [rest[0], ['--help']];
  if (!name) {
    process.stderr.write(usage() + '\n');
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage() + '\n');
    return 0;
  }
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!entry) {
    process.stderr.write(`hindsight: unknown command '${name}'\n${usage()}\n`);
    return 2;
  }
  // A database this command writes is locked in its name (see store/db-lock.ts).
  setLockHolderName(name === 'serve' ? 'Hindsight serve' : `hindsight ${name}`);
  let loaded: CommandModule;
  try {
    loaded = await entry.load();
  } catch (err) {
    process.stderr.write(`hindsight: command '${name}' is not available in this build: ${(err as Error).message}\n`);
    return 1;
  }
  if (wantsHelp(rest)) {
    process.stdout.write(formatHelp(loaded.spec));
    return 0;
  }
  const { command } = loaded;
  try {
    return (await command(rest)) ?? 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`hindsight ${name}: ${err.message}\n`);
      return 2;
    }
    if (err instanceof UserError) {
      process.stderr.write(`hindsight ${name}: ${err.message.split('\n')[0]}\n`);
      return 1;
    }
    process.stderr.write(`hindsight ${name}: internal error: ${(err as Error).stack ?? err}\n`);
    return 1;
  }
}
