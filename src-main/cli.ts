// `hindsight <command> …` (docs/design.md §Command line). Each command lives in src-main/cli/<command>.ts and is
// loaded only when asked for, so `hindsight stats` never pays for ONNX Runtime's start-up.
//
// Exit status: 0 on success, 1 on a user error (one-line message), 2 on bad usage.
import { UserError } from '../src-shared/types.js';
import { UsageError, type Command } from './cli/args.js';

const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  import: () => import('./cli/import.js'),
  stats: () => import('./cli/stats.js'),
  samples: () => import('./cli/samples.js'),
  label: () => import('./cli/label.js'),
  judge: () => import('./cli/judge.js'),
  export: () => import('./cli/export.js'),
  score: () => import('./cli/score.js'),
  generate: () => import('./cli/generate.js'),
  train: () => import('./cli/train.js'),
  serve: () => import('./cli/serve.js'),
  demo: () => import('./cli/demo.js'),
  handoff: () => import('./cli/handoff.js'),
};

function usage(): string {
  return `usage: hindsight <command> [options]\ncommands: ${Object.keys(COMMANDS).join(', ')}\n` +
    `every command takes --db PATH and --json; run 'hindsight <command> --help' for its options`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    process.stderr.write(usage() + '\n');
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`hindsight: unknown command '${name}'\n${usage()}\n`);
    return 2;
  }
  let command: Command;
  try {
    ({ command } = await load());
  } catch (err) {
    process.stderr.write(`hindsight: command '${name}' is not available in this build: ${(err as Error).message}\n`);
    return 1;
  }
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
